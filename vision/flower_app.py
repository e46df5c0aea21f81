"""Image federation on Flower: the reports' :class:`SurgicalAggregation` strategy, unchanged, with
an image ``ClientApp`` (``client_app``) and ``ServerApp`` (``server_app``).

Node config: ``images`` (an image table, see :mod:`vision.data`), ``layout``, ``image-root``,
``name``, ``val-fraction`` (0.1). Run config: every field of
:class:`~vision.federation.ImageFederationConfig`, dashed (``arch``, ``image-size``, ``norm``
fedavg | fedbn | fedbn+, ..., and the server options such as ``server-momentum``), plus
``min-nodes``, ``evaluate-every``, ``round-timeout``, ``join-timeout``, ``out``. Under FedBN a node's normalisation layers live in its
Flower ``context.state`` between rounds and never leave it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from safetensors.numpy import save

from reportfed import schema
from reportfed.aggregation import Arrays, GlobalState, flatten, node_arrays
from reportfed.data.partition import split_rows
from reportfed.errors import ReportfedError
from reportfed.flower.exchange import run_on_grid
from reportfed.flower.strategy import SurgicalAggregation
from reportfed.flower.wire import (
    ARRAYS,
    META,
    METRICS,
    evaluation_records,
    reply,
    to_record,
    unpack,
)
from reportfed.io import atomic_write
from reportfed.labels import LabelSpace
from reportfed.model import load_arrays, to_arrays
from reportfed.rounds import round_seed
from vision.data import ImageTable, read_image_table
from vision.federation import (
    ImageFederationConfig,
    local_keys,
    new_model,
    predict_images,
    train_images,
)
from vision.models import ImageClassifier, set_representation_trainable

LOCAL = "local"  #: context.state key of a node's FedBN layers


def _fingerprint(config: ImageFederationConfig) -> str:
    size = config.image_size
    return f"image:{config.arch}:{size}x{size}x{config.in_channels}:{config.norm}"


@dataclass
class ImageNodeData:
    name: str
    train: ImageTable
    val: ImageTable
    config: ImageFederationConfig


def _node(context: Context) -> ImageNodeData:
    node = context.node_config
    if not node.get("images"):
        raise ReportfedError("node config has no 'images' (the path of this node's image table)")
    table = read_image_table(
        str(node["images"]),
        image_root=str(node["image-root"]) if node.get("image-root") else None,
        layout=str(node.get("layout", "table")),  # type: ignore[arg-type]
    )
    config = schema.decode(ImageFederationConfig, context.run_config)
    held = float(node.get("val-fraction", 0.1))
    fit, val = split_rows(len(table), held, np.random.default_rng(config.seed))
    name = str(node.get("name") or Path(str(node["images"])).parent.name)
    return ImageNodeData(name, table.subset(fit), table.subset(val), config)


def _model(node: ImageNodeData, context: Context, n_labels: int) -> ImageClassifier:
    model = new_model(node.config, n_labels)
    if LOCAL in context.state.array_records:  # this node's own normalisation layers
        own = context.state.array_records[LOCAL]
        load_arrays(model, {k: own[k].numpy() for k in own}, {})
    return model


client_app = ClientApp()


@client_app.query()
def query(msg: Message, context: Context) -> Message:
    """Name, labels, model fingerprint (architecture, input, norm strategy), image size, rows."""
    node = _node(context)
    meta = ConfigRecord(
        {
            "name": node.name,
            "labels": list(node.train.label_space),
            "fingerprint": _fingerprint(node.config),
            "dim": node.config.image_size,
        }
    )
    return reply(msg, {META: meta, METRICS: MetricRecord({"num-examples": len(node.train)})})


@client_app.train()
def train(msg: Message, context: Context) -> Message:
    """Load the global shared block and this node's rows, train, keep FedBN layers local."""
    node = _node(context)
    state, meta = unpack(msg)
    evaluation = _evaluation(node, context, state) if meta.get("evaluate") else {}
    labels = node.train.label_space
    model = _model(node, context, len(labels))
    known = [c for c in labels if c in state.labels]
    shared, task = node_arrays(state, known)
    rows = labels.indices(known)
    full_task = {k: v.detach().numpy().copy() for k, v in model.task.state_dict().items()}
    for key in full_task:
        full_task[key][rows] = task[key]
    load_arrays(model, shared, full_task)
    round_ = int(meta["round"])  # type: ignore[arg-type]
    set_representation_trainable(model, round_ > node.config.warmup_rounds)
    loss, speed = train_images(
        model,
        node.train,
        node.config,
        epochs=node.config.local_epochs,
        seed=round_seed(node.config.seed, round_ - 1, int(meta["node-index"])),  # type: ignore[arg-type]
        freeze_bn_stats=node.config.norm == "fedbn+",
    )
    keep = local_keys(model, node.config.norm)
    if keep:
        own = model.representation.state_dict()
        context.state[LOCAL] = ArrayRecord({k: Array(own[k].cpu().numpy()) for k in keep})
    shared, task = to_arrays(model.cpu(), skip=keep)
    metrics: dict[str, int | float | list[int] | list[float]] = {
        "num-examples": len(node.train),
        "train-loss": loss,
        "images-per-s": speed,
    }
    return reply(
        msg,
        {
            ARRAYS: to_record(shared, task),
            META: ConfigRecord({"labels": list(labels)}),
            METRICS: MetricRecord(metrics),
            **evaluation,
        },
    )


@client_app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """Per-label AUROC and thresholds of the global rows on this node's held-out images."""
    state, _ = unpack(msg)
    return reply(msg, _evaluation(_node(context), context, state))


def _evaluation(node: ImageNodeData, context: Context, state: GlobalState) -> dict[str, Any]:
    """The evaluation records of the global rows ``state`` on the node's held-out images."""
    model = _model(node, context, len(state.labels))
    load_arrays(model, state.shared, state.task)
    labels = [c for c in state.labels if c in node.val.label_space]
    y = node.val.labels[:, node.val.label_space.indices(labels)]
    p = predict_images(model, node.val, node.config) if len(node.val) else np.zeros((0, 0))
    return evaluation_records(labels, y, p[:, state.labels.indices(labels)] if len(p) else y)


server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """Register the image nodes, run the rounds, write ``out/global.safetensors``."""
    run = dict(context.run_config)
    config = schema.decode(ImageFederationConfig, run)
    out = Path(str(run.get("out", "vision-federation")))

    def init_fn(dim: int, labels: LabelSpace) -> tuple[Arrays, Arrays]:
        model = new_model(config, len(labels))  # dim is the image size the nodes reported
        return to_arrays(model, skip=local_keys(model, config.norm))

    strategy = SurgicalAggregation(
        init_fn,
        min_nodes=int(run.get("min-nodes", 2)),
        options=config,
        evaluate_every=int(run.get("evaluate-every", 0)),
        join_timeout=float(run.get("join-timeout", 600.0)),
    )
    initial = strategy.register(grid, config.rounds)
    final = run_on_grid(
        strategy,
        grid,
        initial,
        range(1, config.rounds + 1),
        timeout=float(run.get("round-timeout", 600.0)),
        config=ConfigRecord({}),
    )
    state = strategy.global_state(final)
    tensors = flatten(state.shared, state.task)
    meta = {"labels": list(state.labels), "fingerprint": strategy.registry.fingerprint,
            "thresholds": strategy.thresholds, "history": strategy.history.entries}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(
        out / "global.safetensors",
        save(tensors, metadata={"reportfed-vision": json.dumps(meta, default=float)}),
    )
