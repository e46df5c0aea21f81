"""The ServerApps' round loop (text and vision): Flower's ``Strategy.start`` without its
numbering from 1, so a resumed run logs and records its true round numbers."""

from __future__ import annotations

from collections.abc import Callable
from logging import INFO

from flwr.app import ArrayRecord, ConfigRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy
from flwr.supercore import log


def run_on_grid(
    strategy: Strategy,
    grid: Grid,
    arrays: ArrayRecord,
    rounds: range,
    *,
    timeout: float,
    config: ConfigRecord,
    after_round: Callable[[int, ArrayRecord], None] | None = None,
) -> ArrayRecord:
    """Run ``rounds`` (1-based round numbers, e.g. ``range(6, 11)`` after a checkpoint of round
    5) of train then evaluate messages; ``after_round(round, arrays)`` follows each. Returns the
    final global arrays."""
    log(INFO, "rounds %d..%d", rounds.start, rounds.stop - 1)
    strategy.summary()
    for r in rounds:
        log(INFO, "[ROUND %d/%d]", r, rounds.stop - 1)
        messages = strategy.configure_train(r, arrays, config, grid)
        replies = grid.send_and_receive(messages, timeout=timeout)
        merged, metrics = strategy.aggregate_train(r, replies)
        if merged is not None:
            arrays = merged
        if metrics is not None:
            log(INFO, "\t└──> train: %s", dict(metrics))
        messages = strategy.configure_evaluate(r, arrays, config, grid)
        replies = grid.send_and_receive(messages, timeout=timeout)
        evaluation = strategy.aggregate_evaluate(r, replies)
        if evaluation is not None:
            log(INFO, "\t└──> evaluation: %s", dict(evaluation))
        if after_round is not None:
            after_round(r, arrays)
    return arrays
