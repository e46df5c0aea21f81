"""The in-process round loop, shared by text (:func:`reportfed.reports.engine.run_federation`)
and vision (:func:`reportfed.vision.federation.run_image_federation`), and the seed of a node's round, which
every engine (the loop, lockstep, Flower nodes) derives the same way."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from tqdm.auto import tqdm

from reportfed.core.aggregation import GlobalState
from reportfed.core.node import NodeAlgorithm
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
) -> list[dict[str, Any]]:
    """``rounds`` rounds: every node trains from the global state (``node.train(state, round,
    index)``), then the server steps.

    Returns one history entry per round: ``round`` (1-based), each node metric by node name,
    the nodes whose updates were ``accepted``, ``rejected`` updates with their reasons (when
    any), the round's wall ``seconds`` (training and the server step) and what
    ``evaluate(round, state)`` returns after the round.
    """
    history: list[dict[str, Any]] = []
    for r in tqdm(range(rounds), desc="rounds", disable=not progress, leave=False):
        entry: dict[str, Any] = {"round": r + 1}
        start = time.perf_counter()
        updates = []
        for i, node in enumerate(nodes):
            update, metrics = node.train(server.state, r, i)
            updates.append(update)
            for key, value in metrics.items():
                entry.setdefault(key, {})[update.node_id] = value
        step = server.step(updates)
        entry["accepted"] = step.accepted
        entry["seconds"] = round(time.perf_counter() - start, 3)
        if step.rejected:
            entry["rejected"] = step.rejected
        if evaluate is not None:
            entry.update(evaluate(r + 1, step.state))
        history.append(entry)
    return history
