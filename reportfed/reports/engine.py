"""In-process federation of report sites: every node's :class:`~reportfed.reports.node.ReportAlgorithm`
trains in this process and :class:`~reportfed.core.server.SurgicalServer` steps. Deterministic for a
seed; used by the labeler, the experiments and as the reference the Flower apps must match.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reportfed.core.aggregation import GlobalState
from reportfed.core.config import FederationConfig
from reportfed.core.errors import ConfigError
from reportfed.core.labels import LabelSpace
from reportfed.core.record import RunHistory
from reportfed.core.rounds import run_rounds
from reportfed.core.server import SurgicalServer
from reportfed.reports.node import Node, ReportAlgorithm, initial_state


@dataclass
class FederationResult:
    """The final global state and the run's record, one entry per round."""

    state: GlobalState
    history: RunHistory
    config: FederationConfig


def run_federation(
    nodes: Sequence[Node],
    config: FederationConfig = FederationConfig(),
    *,
    evaluate: Callable[[int, GlobalState], dict[str, Any]] | None = None,
    progress: bool = True,
) -> FederationResult:
    """Run ``config.rounds`` rounds of local training + surgical aggregation.

    ``evaluate(round, state)`` is called after every round; its metrics go into the history, with
    the weights each node received and sent (``bytes``, as :func:`round_traffic` counts them).
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
    traffic = round_traffic(server.state, nodes, config)
    for entry in history:
        history.traffic(entry["round"], traffic)
    return FederationResult(state=server.state, history=history, config=config)


def round_traffic(
    state: GlobalState, nodes: Sequence[Node], config: FederationConfig
) -> dict[str, dict[str, int]]:
    """Per node, the bytes of weights one round moves (float32 arrays as sent, before any
    framing): ``down``, the shared block and its head's rows (every label's with ``distill``),
    and ``up``, the shared block and the rows of the labels it trains (:meth:`~reportfed.reports.node.Node.trains`)."""
    shared = sum(np.asarray(v).nbytes for v in state.shared.values())
    row = sum(np.asarray(v)[0].nbytes for v in state.task.values())
    received = len(state.labels) if config.distill > 0 else None
    trained = {node.name: len(node.trains(state.labels)) for node in nodes}
    return {
        node.name: {
            "down": shared + (received or trained[node.name]) * row,
            "up": shared + trained[node.name] * row,
        }
        for node in nodes
    }
