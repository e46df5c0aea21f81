"""What a Flower run refuses before it starts, one line each: ``federation run`` checks it, so
the user sees it at once, and the ServerApp again, for a run started with ``flwr run``."""

from __future__ import annotations

from typing import Any

from reportfed.core.config import RunSettings
from reportfed.core.errors import ConfigError


def check_run(options: Any, settings: RunSettings) -> None:
    """Refuse settings no run can honour (``options``: the modality's hyperparameters)."""
    if settings.secure_aggregation:
        _check_secure(options, settings)
    if settings.dp_noise > 0 and (
        getattr(options, "distill", 0.0) > 0 or getattr(options, "read", False)
    ):
        raise ConfigError(
            "dp-noise needs distill = 0 and read off: Flower's clipping compares the rows a node "
            "receives with the rows it sends, and with knowledge transfer or reading (both on by "
            "default) a node receives every label's rows but sends only those it annotates or "
            "reads (add --distill 0 --no-read)"
        )


def _check_secure(options: Any, settings: RunSettings) -> None:
    """Refuse what secure aggregation (:mod:`reportfed.flower.secure`) cannot do."""
    if options.weighting != "uniform":
        raise ConfigError(
            "secure aggregation averages the nodes uniformly: weighting by sample counts needs "
            "each node's count, which it keeps from the server (use weighting = uniform)"
        )
    if settings.dp_noise > 0:
        raise ConfigError(
            "secure aggregation with dp-noise is not supported: Flower's DP wrapper needs the "
            "individual updates (use clip-norm to bound each node's update)"
        )
    if settings.min_nodes < 2:
        raise ConfigError("secure aggregation needs min-nodes >= 2 (the sum of one update is it)")
