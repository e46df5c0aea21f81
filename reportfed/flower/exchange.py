"""The ServerApps' round loop (text and vision): Flower's ``Strategy.start`` without its
numbering from 1, so a resumed run logs and records its true round numbers, with replies
pulled every :data:`POLL_S` seconds (Flower's ``Grid.send_and_receive`` polls every 3 s), and the
bytes each node sends and receives in a round counted (:class:`Traffic`)."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy
from flwr.supercore.inflatable.inflatable_object import (
    get_all_nested_objects,
    no_object_id_recompute,
)

_log = logging.getLogger(__name__)

#: seconds between two pulls of the replies a message exchange waits for
POLL_S = 0.05


def _message_bytes(message: Message) -> int:
    """The bytes ``message`` takes on the wire: Flower's serialized objects (the message, its
    records, its arrays' chunks), each distinct object once, as Flower sends them. Each object's
    id is computed once, as Flower does when it pushes (without, every level serializes its
    children again)."""
    with no_object_id_recompute():
        return sum(len(obj.deflate()) for obj in get_all_nested_objects(message).values())


@dataclass
class Traffic:
    """A round's bytes by Flower node id: ``down`` from the server, ``up`` to it."""

    down: Counter[int] = field(default_factory=Counter)
    up: Counter[int] = field(default_factory=Counter)


#: a round's train exchange: ``(round, global arrays, traffic) -> (new arrays or None, metrics
#: or None)``, counting its messages' bytes in ``traffic``
TrainExchange = Callable[
    [int, ArrayRecord, Traffic], tuple[ArrayRecord | None, MetricRecord | None]
]


def exchange(
    grid: Grid, messages: Iterable[Message], *, timeout: float, traffic: Traffic | None = None
) -> list[Message]:
    """Send ``messages`` and return the replies that arrive within ``timeout`` seconds (what
    ``Grid.send_and_receive`` does, polling every :data:`POLL_S` seconds instead of 3), their
    bytes counted in ``traffic``."""
    messages = list(messages)
    if not messages:
        return []
    if traffic is not None:
        for message in messages:
            traffic.down[message.metadata.dst_node_id] += _message_bytes(message)
    waiting = set(grid.push_messages(messages))
    replies: list[Message] = []
    end = time.monotonic() + timeout
    while waiting:
        pulled = list(grid.pull_messages(waiting))
        if traffic is not None:
            for reply in pulled:
                traffic.up[reply.metadata.src_node_id] += _message_bytes(reply)
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
    after_round: Callable[[int, ArrayRecord, Traffic], None] | None = None,
    train: TrainExchange | None = None,
) -> ArrayRecord:
    """Run ``rounds`` (1-based round numbers, e.g. ``range(6, 11)`` after a checkpoint of round
    5): the strategy's train exchange (or ``train``, e.g. secure aggregation's), then its
    evaluate exchange (which it may leave empty); ``after_round(round, arrays, traffic)``
    follows each. Returns the final global arrays.

    Why not ``Strategy.start``: Flower 1.41's loop numbers rounds from 1 (a resumed run goes on
    from its checkpoint's round), waits with ``Grid.send_and_receive``'s 3 s polling, has no
    hook after a round (the checkpoint, the run page) and cannot swap the train exchange (the
    SecAgg+ workflow). Overriding ``start`` would copy its loop with those four changes, which
    is this function; the strategy's own methods (``configure_*``, ``aggregate_*``,
    ``summary``) are Flower's, called as ``start`` calls them."""
    _log.info("rounds %d..%d", rounds.start, rounds.stop - 1)
    strategy.summary()
    for r in rounds:
        _log.info("[ROUND %d/%d]", r, rounds.stop - 1)
        traffic = Traffic()
        if train is None:
            messages = strategy.configure_train(r, arrays, config, grid)
            replies = exchange(grid, messages, timeout=timeout, traffic=traffic)
            merged, metrics = strategy.aggregate_train(r, replies)
        else:
            merged, metrics = train(r, arrays, traffic)
        if merged is not None:
            arrays = merged
        if metrics is not None:
            _log.info("\t└──> train: %s", dict(metrics))
        messages = strategy.configure_evaluate(r, arrays, config, grid)
        replies = exchange(grid, messages, timeout=timeout, traffic=traffic)
        strategy.aggregate_evaluate(r, replies)
        if after_round is not None:
            after_round(r, arrays, traffic)
    return arrays
