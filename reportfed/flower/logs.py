"""reportfed's log inside Flower's processes: every ``reportfed.flower`` module logs on
reportfed's logger (``logging.getLogger(__name__)``), and the apps Flower runs show it where
Flower shows its own."""

from __future__ import annotations

import logging


def through_flower() -> None:
    """In a Flower process (the ServerApp, a node's ClientApp), show reportfed's log from INFO up
    through Flower's own handlers, in its format and wherever it goes (the run's log that
    ``flwr run --stream`` and ``reportfed federation run`` show, a node's output). Idempotent."""
    ours = logging.getLogger("reportfed")
    for handler in logging.getLogger("flwr").handlers:
        if handler not in ours.handlers:
            ours.addHandler(handler)
    if ours.level == logging.NOTSET or ours.level > logging.INFO:
        ours.setLevel(logging.INFO)
