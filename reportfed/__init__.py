"""reportfed: federated radiology-report labeling with surgical aggregation."""

from reportfed.core.telemetry import switch_off

__version__ = "0.1.0"

switch_off()  # no library's usage telemetry (reportfed.core.telemetry)
