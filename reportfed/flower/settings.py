"""The settings of a Flower run beyond the hyperparameters, declared once: the ServerApp reads
them from the run config, ``reportfed federation run`` has a flag per field, and
``app/pyproject.toml`` holds their defaults (a test keeps it equal to these)."""

from __future__ import annotations

from dataclasses import dataclass

from reportfed.schema import setting
from reportfed.sentences import GRANULARITY_HELP, Granularity

#: What a Flower run fixes among the hyperparameters: an invalid update (NaN, wrong shape) is
#: dropped, since one hospital's fault must not end a federation (``SurgicalAggregation`` always
#: drops; the app's run config declares it, and the ServerApp refuses another value).
FLOWER_DEFAULTS = {"on_invalid": "drop"}


@dataclass(frozen=True)
class RunSettings:
    """Where the run writes, when it starts and waits, what the nodes embed with, and DP."""

    out: str = setting(
        "reportfed-federation", "server-side output directory (global model and history)"
    )
    min_nodes: int = setting(
        2, "nodes needed to start, and valid updates a round needs to change the model"
    )
    evaluate_every: int = setting(
        1, "evaluate on the nodes' held-out rows every N rounds (0: after the last only)"
    )
    round_timeout: float = setting(600.0, "seconds a round waits for the nodes' updates")
    join_timeout: float = setting(
        600.0, "seconds a node has to answer its first message (it embeds its reports then)"
    )
    embedder: str = setting("minilm", "embedder spec of every node without its own")
    granularity: Granularity = setting("sentence", GRANULARITY_HELP)
    fingerprint: str = setting("", "embedder fingerprint every node must have ('': the commonest)")
    resume: bool = setting(True, "continue after the last round saved in the output directory")
    dp_noise: float = setting(0.0, "DP noise multiplier (0 = off)")
    dp_clip: float = setting(1.0, "DP clipping norm of node updates")
