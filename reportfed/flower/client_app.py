"""The ``ClientApp``: one hospital's side of a Flower federation.

Node config (``flower-supernode --node-config`` or ``reportfed federation node``):

* ``data`` (required) — the node's reports table with label columns (CSV or Parquet); under the
  simulation engine, virtual node ``partition-id`` reads the table of that index in the run
  config's comma-separated ``partitions``;
* ``name`` — the node's name in logs and the model file (default: the table's file stem);
* ``embedder``, ``base-url`` — embedder spec (default: the run's ``embedder``); the run config's
  ``granularity`` says whether reports are embedded whole or sentence by sentence;
* ``cache-dir`` — the node's embedding cache (default ``$REPORTFED_EMBEDDINGS_CACHE``);
* ``val-fraction`` (0.1) — rows held out for evaluation and thresholds;
* ``uncertain`` (``zeros``) — what ``-1`` labels become;
* ``blank`` (``negative``) — what a blank label cell means: not mentioned (``negative``) or not
  annotated (``ignore``);
* ``lr`` — a node-specific learning rate.

Messages: ``query`` (name, labels, fingerprint, dimension, rows), ``train`` (the shared block and
the rows of the node's labels in, the trained arrays out; with ``evaluate`` set, the node first
evaluates the rows it received on its held-out rows and sends that evaluation with its update, so
a round is one exchange), ``evaluate`` (the same evaluation alone, for the final model). Only
weights and metrics leave the node.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from flwr.app import ConfigRecord, Context, Message, MetricRecord
from flwr.app.message_type import MessageType
from flwr.clientapp import ClientApp
from flwr.clientapp.mod import fixedclipping_mod
from flwr.supercore.differential_privacy import KEY_CLIPPING_NORM

from reportfed import schema
from reportfed.aggregation import GlobalState
from reportfed.calibration import calibration_features, fit_calibration
from reportfed.config import FederationConfig
from reportfed.errors import ReportfedError
from reportfed.engine import initial_state, local_round
from reportfed.flower.settings import RunSettings
from reportfed.flower.site import NodeData, load_node_data
from reportfed.flower.wire import (
    ARRAYS,
    META,
    METRICS,
    evaluation_records,
    federation_config,
    reply,
    to_record,
    unpack,
)
from reportfed.labels import LabelSpace
from reportfed.model import global_model, predict_proba
from reportfed.paths import embeddings_cache_dir


def _data(context: Context) -> str:
    node, run = context.node_config, context.run_config
    if node.get("data"):
        return str(node["data"])
    partitions = [p for p in str(run.get("partitions", "")).split(",") if p]
    if "partition-id" in node and partitions:  # simulation engine: virtual nodes by partition
        return partitions[int(node["partition-id"])]
    raise ReportfedError("node config has no 'data' (the path of this node's reports table)")


def _node_data(context: Context) -> NodeData:
    node, run = context.node_config, context.run_config
    settings = schema.decode(RunSettings, run)
    data = _data(context)
    return load_node_data(
        data,
        name=str(node.get("name") or Path(data).stem),
        embedder=str(node.get("embedder") or settings.embedder),
        base_url=str(node["base-url"]) if node.get("base-url") else None,
        granularity=settings.granularity,
        cache_dir=str(node.get("cache-dir") or embeddings_cache_dir()),
        val_fraction=float(node.get("val-fraction", 0.1)),
        seed=federation_config(run).seed,
        uncertain=str(node.get("uncertain", "zeros")),  # type: ignore[arg-type]
        blank=str(node.get("blank", "negative")),  # type: ignore[arg-type]
    )


def _with_own_labels(
    state: GlobalState, labels: LabelSpace, dim: int, config: FederationConfig
) -> GlobalState:
    """``state`` plus freshly initialised rows for the node's labels the server does not know yet
    (a label the node brings into the federation)."""
    new = [name for name in labels if name not in state.labels]
    if not new:
        return state
    fresh = initial_state(dim, LabelSpace(tuple(new)), config)
    task = {k: np.concatenate([v, fresh.task[k]]) for k, v in state.task.items()}
    return GlobalState(LabelSpace(state.labels.names + tuple(new)), state.shared, task)


def optional_clipping(msg: Message, context: Context, call_next: Any) -> Message:
    """Flower's client-side DP clipping, applied only when the server asked for it."""
    meta = msg.content.config_records.get(META)
    if msg.metadata.message_type == MessageType.TRAIN and meta and KEY_CLIPPING_NORM in meta:
        return fixedclipping_mod(msg, context, call_next)
    return call_next(msg, context)


app = ClientApp(mods=[optional_clipping])


@app.query()
def query(msg: Message, context: Context) -> Message:
    """Describe this node: name, labels, embedder fingerprint, input dimension, rows."""
    site = _node_data(context)
    meta = ConfigRecord(
        {
            "name": site.node.name,
            "labels": list(site.node.labels),
            "fingerprint": site.fingerprint,
            "dim": int(site.node.x.shape[-1]),
        }
    )
    return reply(msg, {META: meta, METRICS: MetricRecord({"num-examples": len(site.node.x)})})


@app.train()
def train(msg: Message, context: Context) -> Message:
    """One round of local training from the received shared block and label rows."""
    site = _node_data(context)
    state, meta = unpack(msg)
    config = federation_config(meta)
    evaluation = _evaluation(site, state, config) if meta.get("evaluate") else {}
    if "lr" in context.node_config:
        config = replace(config, lr=float(context.node_config["lr"]))
    dim = int(site.node.x.shape[-1])
    state = _with_own_labels(state, site.node.labels, dim, config)
    update, loss = local_round(
        site.node,
        state,
        config,
        round_=int(meta["round"]) - 1,  # type: ignore[arg-type]
        node_index=int(meta["node-index"]),  # type: ignore[arg-type]
    )
    return reply(
        msg,
        {
            ARRAYS: to_record(update.shared, update.task),
            META: ConfigRecord({"labels": list(site.node.labels)}),
            METRICS: MetricRecord({"num-examples": update.num_examples, "train-loss": loss}),
            **evaluation,
        },
    )


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """Per-label AUROC, F1 threshold and calibration of the received rows on the held-out
    rows."""
    state, meta = unpack(msg)
    return reply(msg, _evaluation(_node_data(context), state, federation_config(meta)))


def _evaluation(site: NodeData, state: GlobalState, config: FederationConfig) -> dict[str, Any]:
    """The evaluation records of the global rows ``state`` on the node's held-out rows."""
    labels = [name for name in state.labels if name in site.node.labels]
    model = global_model(state, int(site.node.x.shape[-1]), config)
    y = site.val_y[:, site.node.labels.indices(labels)]
    p = predict_proba(model, torch.from_numpy(site.val_x))[:, state.labels.indices(labels)]
    features = calibration_features(p, site.val_mentions, labels)
    return evaluation_records(labels, y, p, fit_calibration(features, y))
