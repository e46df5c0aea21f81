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
"""

from __future__ import annotations

from dataclasses import replace
from logging import ERROR
from typing import Any

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Error, Message, MetricRecord
from flwr.app.message_type import MessageType
from flwr.clientapp import ClientApp
from flwr.clientapp.mod import fixedclipping_mod
from flwr.common.constant import ErrorCode
from flwr.supercore import log
from flwr.supercore.differential_privacy import KEY_CLIPPING_NORM

from reportfed.core import schema
from reportfed.core.config import NodeSettings
from reportfed.core.errors import ReportfedError
from reportfed.core.node import NodeAlgorithm
from reportfed.flower import secure
from reportfed.flower.modalities import hyperparameters
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

LOCAL = "local"  #: ``context.state`` key of the weights that stay on the node


def node_settings(context: Context) -> NodeSettings:
    """The node's settings from its node config (and, under the simulation engine, its table
    from the run config's ``partitions``)."""
    settings = schema.decode(NodeSettings, context.node_config)
    partitions = [p for p in str(context.run_config.get("partitions", "")).split(",") if p]
    if not settings.data and "partition-id" in context.node_config and partitions:
        settings = replace(settings, data=partitions[int(context.node_config["partition-id"])])
    return settings


def algorithm(context: Context, message: Any = None) -> NodeAlgorithm:
    """This node's algorithm under the hyperparameters of ``message`` (a ConfigRecord; else the
    modality's table of the run config), with the weights it keeps between rounds restored."""
    run = dict(context.run_config)
    kind, config = hyperparameters(run, message)
    settings = node_settings(context)
    if settings.lr:  # this node's own learning rate
        config = replace(config, lr=settings.lr)
    node = kind.node(settings, config, run)
    if LOCAL in context.state.array_records:
        own = context.state.array_records[LOCAL]
        node.restore({k: own[k].numpy() for k in own})
    return node


def optional_clipping(msg: Message, context: Context, call_next: Any) -> Message:
    """Flower's client-side DP clipping, applied only when the server asked for it."""
    meta = msg.content.config_records.get(META)
    if msg.metadata.message_type == MessageType.TRAIN and meta and KEY_CLIPPING_NORM in meta:
        return fixedclipping_mod(msg, context, call_next)
    return call_next(msg, context)


def failing_in_one_line(msg: Message, context: Context, call_next: Any) -> Message:
    """A node that cannot answer for a reason of its own (its table gone or unreadable, another
    embedder) logs one line and answers the message with that reason, which the server's round
    line, history and model provenance name; other exceptions stay Flower's, with a traceback."""
    try:
        return call_next(msg, context)
    except ReportfedError as exc:
        log(ERROR, "this node cannot answer %s: %s", msg.metadata.message_type, exc)
        return Message(
            Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=str(exc)), reply_to=msg
        )


app = ClientApp(mods=[failing_in_one_line, optional_clipping, secure.secure_mod])


@app.query()
def query(msg: Message, context: Context) -> Message:
    """Describe this node: name, labels, fingerprint, input dimension, rows, table settings."""
    return reply(msg, description_records(algorithm(context).describe()))


@app.train()
def train(msg: Message, context: Context) -> Message:
    """One round of local training from the received shared block and label rows (under secure
    aggregation, from the instructions SecAgg+ forwards, and back to it to be masked)."""
    masked = secure.carries_instructions(msg)
    state, meta = secure.unpack(msg) if masked else unpack(msg)
    node = algorithm(context, meta)
    evaluation = evaluation_records(node.evaluate(state)) if meta.get("evaluate") else {}
    update, metrics = node.train(
        state,
        int(meta["round"]) - 1,  # type: ignore[arg-type]
        int(meta["node-index"]),  # type: ignore[arg-type]
    )
    local = node.local_arrays()
    if local:
        context.state[LOCAL] = ArrayRecord({k: Array(v) for k, v in local.items()})
    scores = {("train-" if k == "loss" else "") + schema.dashed(k): v for k, v in metrics.items()}
    if masked:
        return Message(secure.masked_input(update, state, meta, scores), reply_to=msg)
    return reply(
        msg,
        {
            ARRAYS: to_record(update.shared, update.task),
            META: ConfigRecord({"labels": list(update.labels)}),
            METRICS: MetricRecord({"num-examples": update.num_examples, **scores}),
            **evaluation,
        },
    )


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """Per-label AUROC, F1 threshold and calibration of the received rows on the held-out
    rows."""
    state, meta = unpack(msg)
    return reply(msg, evaluation_records(algorithm(context, meta).evaluate(state)))
