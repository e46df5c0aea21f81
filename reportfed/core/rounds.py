"""The in-process round loop, shared by text (:func:`reportfed.reports.engine.run_federation`)
and vision (:func:`reportfed.vision.federation.run_image_federation`), and the seed of a node's round, which
every engine (the loop, lockstep, Flower nodes) derives the same way."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from tqdm.auto import tqdm

from reportfed.core.aggregation import GlobalState, NodeUpdate
from reportfed.core.node import NodeAlgorithm
from reportfed.core.record import RunHistory
from reportfed.core.server import SurgicalServer


def round_seed(seed: int, round_: int, node_index: int) -> int:
    """The seed of node ``node_index``'s local training in (0-based) round ``round_``."""
    return seed * 100_003 + round_ * 1_009 + node_index


def run_rounds(
    server: SurgicalServer,
    nodes: Sequence[NodeAlgorithm],
    rounds: int,
    *,
    evaluate: Callable[[int, GlobalState], dict[str, Any]] | None = None,
    progress: bool = True,
) -> RunHistory:
    """``rounds`` rounds: every node trains from the global state (``node.train(state, round,
    index)``), then the server steps.

    Returns the run's record, one entry per round (:meth:`RunHistory.trained`, as a Flower
    server writes it): ``round`` (1-based), each node metric by node name, the nodes whose
    updates were ``accepted`` and ``rejected`` with their reasons, the round's wall ``seconds``
    (training and the server step) and what ``evaluate(round, state)`` returns after the round.
    """
    history = RunHistory()
    for r in tqdm(range(rounds), desc="rounds", disable=not progress, leave=False):
        start = time.perf_counter()
        updates: list[NodeUpdate] = []
        metrics: dict[str, dict[str, float]] = {}
        for i, node in enumerate(nodes):
            update, found = node.train(server.state, r, i)
            updates.append(update)
            for key, value in found.items():
                metrics.setdefault(key, {})[update.node_id] = value
        step = server.step(updates)
        history.trained(r + 1, step, seconds=time.perf_counter() - start, metrics=metrics)
        if evaluate is not None:
            history.attach(r + 1, evaluate(r + 1, step.state))
    return history
