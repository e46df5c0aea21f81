"""reportfed: federated radiology-report labeling with surgical aggregation."""

__version__ = "0.1.0"
