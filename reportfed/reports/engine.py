"""In-process federation of report sites: every node's :class:`~reportfed.reports.node.ReportAlgorithm`
trains in this process and :class:`~reportfed.core.server.SurgicalServer` steps. Deterministic for a
seed; used by the labeler, the experiments and as the reference the Flower apps must match.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from reportfed.core.aggregation import GlobalState
from reportfed.core.config import FederationConfig
from reportfed.core.errors import ConfigError
from reportfed.core.labels import LabelSpace
from reportfed.core.rounds import run_rounds
from reportfed.core.server import SurgicalServer
from reportfed.reports.node import Node, ReportAlgorithm, initial_state


@dataclass
class FederationResult:
    """The final global state and one history entry per round."""

    state: GlobalState
    history: list[dict[str, Any]]
    config: FederationConfig


def run_federation(
    nodes: Sequence[Node],
    config: FederationConfig = FederationConfig(),
    *,
    evaluate: Callable[[int, GlobalState], dict[str, float]] | None = None,
    progress: bool = True,
) -> FederationResult:
    """Run ``config.rounds`` rounds of local training + surgical aggregation.

    ``evaluate(round, state)`` is called after every round; its metrics go into the history.
    """
    if not nodes:
        raise ConfigError("no nodes")
    dims = {n.x.shape[-1] for n in nodes}
    if len(dims) != 1:
        raise ConfigError(f"nodes disagree on embedding dimension: {sorted(dims)}")
    start = initial_state(dims.pop(), LabelSpace.union(n.labels for n in nodes), config)
    server = SurgicalServer(start, config)
    algorithms = [ReportAlgorithm(node, config) for node in nodes]
    history = run_rounds(server, algorithms, config.rounds, evaluate=evaluate, progress=progress)
    return FederationResult(state=server.state, history=history, config=config)
