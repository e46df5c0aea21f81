"""The ServerApps' round loop (text and vision): Flower's ``Strategy.start`` without its
numbering from 1, so a resumed run logs and records its true round numbers, and with replies
pulled every :data:`POLL_S` seconds (Flower's ``Grid.send_and_receive`` polls every 3 s)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from logging import INFO

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy
from flwr.supercore import log

#: seconds between two pulls of the replies a message exchange waits for
POLL_S = 0.05
#: a round's train exchange: ``(round, global arrays) -> (new arrays or None, metrics or None)``
TrainExchange = Callable[[int, ArrayRecord], tuple[ArrayRecord | None, MetricRecord | None]]


def exchange(grid: Grid, messages: Iterable[Message], *, timeout: float) -> list[Message]:
    """Send ``messages`` and return the replies that arrive within ``timeout`` seconds (what
    ``Grid.send_and_receive`` does, polling every :data:`POLL_S` seconds instead of 3)."""
    messages = list(messages)
    if not messages:
        return []
    waiting = set(grid.push_messages(messages))
    replies: list[Message] = []
    end = time.monotonic() + timeout
    while waiting:
        pulled = list(grid.pull_messages(waiting))
        replies += pulled
        waiting -= {reply.metadata.reply_to_message_id for reply in pulled}
        if not waiting or time.monotonic() >= end:
            break
        time.sleep(POLL_S)
    return replies


def run_on_grid(
    strategy: Strategy,
    grid: Grid,
    arrays: ArrayRecord,
    rounds: range,
    *,
    timeout: float,
    config: ConfigRecord,
    after_round: Callable[[int, ArrayRecord], None] | None = None,
    train: TrainExchange | None = None,
) -> ArrayRecord:
    """Run ``rounds`` (1-based round numbers, e.g. ``range(6, 11)`` after a checkpoint of round
    5): the strategy's train exchange (or ``train(round, arrays)``, e.g. secure aggregation's),
    then its evaluate exchange (which it may leave empty); ``after_round(round, arrays)`` follows
    each. Returns the final global arrays."""
    log(INFO, "rounds %d..%d", rounds.start, rounds.stop - 1)
    strategy.summary()
    for r in rounds:
        log(INFO, "[ROUND %d/%d]", r, rounds.stop - 1)
        if train is None:
            messages = strategy.configure_train(r, arrays, config, grid)
            replies = exchange(grid, messages, timeout=timeout)
            merged, metrics = strategy.aggregate_train(r, replies)
        else:
            merged, metrics = train(r, arrays)
        if merged is not None:
            arrays = merged
        if metrics is not None:
            log(INFO, "\t└──> train: %s", dict(metrics))
        messages = strategy.configure_evaluate(r, arrays, config, grid)
        replies = exchange(grid, messages, timeout=timeout)
        strategy.aggregate_evaluate(r, replies)
        if after_round is not None:
            after_round(r, arrays)
    return arrays
