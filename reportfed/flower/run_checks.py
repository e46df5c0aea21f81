"""What a Flower run refuses before it starts, one line each: ``federation run`` checks it, so
the user sees it at once, and the ServerApp again, for a run started with ``flwr run``."""

from __future__ import annotations

from typing import Any

from reportfed.core.config import RunSettings
from reportfed.core.errors import ConfigError
from reportfed.flower import secure


def check_run(options: Any, settings: RunSettings) -> None:
    """Refuse settings no run can honour (``options``: the modality's hyperparameters)."""
    secure.check(options, settings)
    if settings.dp_noise > 0 and getattr(options, "distill", 0.0) > 0:
        raise ConfigError(
            "dp-noise needs distill = 0: Flower's clipping compares the rows a node receives "
            "with the rows it sends, and with knowledge transfer (on by default) a node "
            "receives every label's rows but sends only its own (add --distill 0)"
        )
