"""The ``ClientApp``: one hospital's side of a Flower federation, for report and image nodes.

The run config's ``modality`` (:class:`~reportfed.core.config.RunSettings`) names the node algorithm
(:func:`reportfed.flower.modalities.modality`); the node config holds the node's
:class:`~reportfed.core.config.NodeSettings` (``flower-supernode --node-config`` or ``reportfed
federation node``): ``data`` (required: the node's table with label columns; under the simulation
engine, virtual node ``partition-id`` reads the table of that index in the run config's
comma-separated ``partitions``), ``name``, ``embedder``, ``base-url``, ``cache-dir``, ``blank``,
``uncertain``, ``val-fraction``, ``lr``, and for images ``image-root`` and ``layout``.

Messages: ``query`` (the node's :class:`~reportfed.core.node.Description`), ``train`` (the shared
block and the rows of the node's labels in, the trained arrays out; with ``evaluate`` set, the
node first evaluates the rows it received on its held-out rows and sends that evaluation with its
update, so a round is one exchange; under secure aggregation, Flower's SecAgg+ stages, the third
of which trains and masks the node's change, :mod:`reportfed.flower.secure`), ``evaluate`` (the same evaluation alone, for the final
model). Only weights and metrics leave the node; weights that stay on it between rounds (FedBN's
normalisation layers) live in the node's ``context.state``.

The handlers translate Flower's messages to and from :mod:`reportfed.flower.node_service`, which
answers them in this process or, with the node setting ``warm``, in the node's warm process
(:mod:`reportfed.flower.warm`): this module imports neither torch nor scikit-learn.
"""

from __future__ import annotations

import logging
from typing import Any

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Error, Message, MetricRecord
from flwr.app.message_type import MessageType
from flwr.clientapp import ClientApp
from flwr.clientapp.mod import fixedclipping_mod
from flwr.common.constant import ErrorCode
from flwr.supercore.differential_privacy import KEY_CLIPPING_NORM

from reportfed.core import schema
from reportfed.core.aggregation import GlobalState
from reportfed.core.errors import ReportfedError, without_paths
from reportfed.flower import secure
from reportfed.flower.logs import through_flower
from reportfed.flower.node_service import Answer, Request, answer, check_policy
from reportfed.flower.wire import (
    ARRAYS,
    META,
    METRICS,
    description_records,
    evaluation_records,
    reply,
    to_record,
    unpack,
)

_log = logging.getLogger(__name__)

LOCAL = "local"  #: ``context.state`` key of the weights that stay on the node


def ask(kind: str, context: Context, meta: Any = None, state: GlobalState | None = None) -> Answer:
    """This node's answer to a ``kind`` message carrying ``meta`` and ``state``; the weights it
    keeps between rounds go in and come back through ``context.state``."""
    kept = context.state.array_records.get(LOCAL)
    request = Request(
        kind,
        dict(context.node_config),
        dict(context.run_config),
        dict(meta or {}),
        state,
        {k: kept[k].numpy() for k in kept} if kept is not None else {},
    )
    found = answer(request)
    if found.local:
        context.state[LOCAL] = ArrayRecord({k: Array(v) for k, v in found.local.items()})
    return found


def optional_clipping(msg: Message, context: Context, call_next: Any) -> Message:
    """Flower's client-side DP clipping, applied only when the server asked for it."""
    meta = msg.content.config_records.get(META)
    if msg.metadata.message_type == MessageType.TRAIN and meta and KEY_CLIPPING_NORM in meta:
        return fixedclipping_mod(msg, context, call_next)
    return call_next(msg, context)


def failing_in_one_line(msg: Message, context: Context, call_next: Any) -> Message:
    """A node that cannot answer for a reason of its own (its table gone or unreadable, another
    embedder, a run its settings forbid) logs one line and answers the message with that reason
    without the paths on its disk (:func:`~reportfed.core.errors.without_paths`), which the
    server's round line, history and model provenance name; other exceptions stay Flower's,
    with a traceback."""
    through_flower()
    try:
        return call_next(msg, context)
    except ReportfedError as exc:
        _log.error("this node cannot answer %s: %s", msg.metadata.message_type, exc)
        reason = without_paths(str(exc))
        return Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=reason),
                       reply_to=msg)  # fmt: skip


app = ClientApp(mods=[failing_in_one_line, optional_clipping, secure.secure_mod])


@app.query()
def query(msg: Message, context: Context) -> Message:
    """Describe this node: name, labels, fingerprint, input dimension, rows, table settings
    (a run its settings forbid is refused first: :func:`check_policy`)."""
    check_policy(dict(context.node_config), dict(context.run_config))
    found = ask("query", context)
    assert found.description is not None
    return reply(msg, description_records(found.description))


@app.train()
def train(msg: Message, context: Context) -> Message:
    """One round of local training from the received shared block and label rows (under secure
    aggregation, from the instructions SecAgg+ forwards, and back to it to be masked)."""
    masked = secure.carries_instructions(msg)
    state, meta = secure.unpack(msg) if masked else unpack(msg)
    check_policy(dict(context.node_config), dict(context.run_config), dict(meta), masked=masked)
    found = ask("train", context, meta, state)
    update = found.update
    assert update is not None
    scores = {
        ("train-" if k == "loss" else "") + schema.dashed(k): v for k, v in found.metrics.items()
    }
    if masked:
        return Message(secure.masked_input(update, state, meta, scores), reply_to=msg)
    return reply(
        msg,
        {
            ARRAYS: to_record(update.shared, update.task),
            META: ConfigRecord({"labels": list(update.labels), "annotated": list(found.annotated)}),
            METRICS: MetricRecord({"num-examples": update.num_examples, **scores}),
            **evaluation_records(found.evaluation),
        },
    )


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """Per-label AUROC, F1 threshold and calibration of the received rows on the held-out
    rows."""
    state, meta = unpack(msg)
    return reply(msg, evaluation_records(ask("evaluate", context, meta, state).evaluation))
