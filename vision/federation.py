"""Local training of image classifiers and federated rounds through the aggregation core.

The task block is always aggregated surgically (:func:`reportfed.aggregation.aggregate`); the
representation block by one of the strategies of the Surgical Aggregation papers:

* ``fedavg`` — every weight and BatchNorm statistic averaged;
* ``fedbn`` — normalisation layers stay local (BatchNorm parameters and statistics for DenseNet121;
  for ViT, which has no batch statistics, its LayerNorm parameters);
* ``fedbn+`` (FedFBN) — BatchNorm statistics frozen at their pretrained values (BatchNorm layers
  run in eval mode while training), BatchNorm affine parameters averaged. For ViT it equals FedAvg.

Every node keeps its own model between rounds (so FedBN's local layers persist); each round it
loads the global shared block and its label rows, trains ``local_epochs``, and sends the rest.
GPU when present (AMP in bf16, channels-last), CPU otherwise: the same code path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from reportfed.aggregation import GlobalState, NodeUpdate, node_arrays
from reportfed.labels import LabelSpace
from reportfed.model import load_arrays, to_arrays
from reportfed.rounds import round_seed, run_rounds
from reportfed.server import ServerOptions, SurgicalServer
from reportfed.train import masked_bce
from vision.data import ImageDataset, ImageTable
from vision.models import (
    Arch,
    ImageClassifier,
    build_model,
    freeze_batchnorm_statistics,
    norm_keys,
    set_representation_trainable,
)

NormStrategy = Literal["fedavg", "fedbn", "fedbn+"]


@dataclass(frozen=True)
class ImageFederationConfig(ServerOptions):
    """Hyperparameters of an image federation (and the server's rules, shared with text)."""

    arch: Arch = "densenet121"
    rounds: int = 10
    local_epochs: int = 1
    lr: float = 1e-4
    batch_size: int = 16
    image_size: int = 224
    in_channels: int = 1
    norm: NormStrategy = "fedavg"
    warmup_rounds: int = 0  #: rounds training only the task block (frozen representation)
    checkpoint: str | None = None
    vit_options: dict[str, Any] = field(default_factory=dict)
    device: str | None = None
    seed: int = 0


@dataclass
class ImageNode:
    """One site's training images and the labels it annotates."""

    name: str
    table: ImageTable


@dataclass
class ImageFederationResult:
    """Global state, each node's own model (local normalisation layers under FedBN), history."""

    state: GlobalState
    node_models: dict[str, ImageClassifier]
    history: list[dict[str, Any]]


def device_of(config: ImageFederationConfig) -> torch.device:
    """``config.device``, else CUDA when available, else CPU."""
    return torch.device(config.device or ("cuda" if torch.cuda.is_available() else "cpu"))


def _loader(
    table: ImageTable, config: ImageFederationConfig, *, train: bool, seed: int = 0
) -> torch.utils.data.DataLoader[tuple[torch.Tensor, torch.Tensor]]:
    dataset = ImageDataset(
        table, image_size=config.image_size, channels=config.in_channels, train=train, seed=seed
    )
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=config.batch_size,
        shuffle=train,
        generator=torch.Generator().manual_seed(seed),
        pin_memory=torch.cuda.is_available(),
    )


def _autocast(device: torch.device) -> torch.autocast:
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def train_images(
    model: ImageClassifier,
    table: ImageTable,
    config: ImageFederationConfig,
    *,
    epochs: int = 1,
    seed: int = 0,
    freeze_bn_stats: bool = False,
) -> tuple[float, float]:
    """Train ``model`` on ``table`` with masked BCE; returns (mean loss, images per second)."""
    device = device_of(config)
    model.to(device).to(memory_format=torch.channels_last).train()  # type: ignore[call-overload]
    if freeze_bn_stats:
        freeze_batchnorm_statistics(model)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr)
    torch.manual_seed(seed)
    losses, seen, start = [], 0, time.perf_counter()
    for epoch in range(epochs):
        for x, y in _loader(table, config, train=True, seed=seed * 31 + epoch):
            x = x.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
            y = y.to(device, non_blocking=True)
            with _autocast(device):
                logits = model(x)
            loss = masked_bce(logits.float(), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            seen += len(x)
    return float(np.mean(losses)), seen / max(time.perf_counter() - start, 1e-9)


@torch.inference_mode()
def predict_images(
    model: ImageClassifier, table: ImageTable, config: ImageFederationConfig
) -> np.ndarray:
    """Sigmoid outputs ``(len(table), n_outputs)``."""
    device = device_of(config)
    model.to(device).eval()
    out = []
    for x, _ in _loader(table, config, train=False):
        with _autocast(device):
            out.append(torch.sigmoid(model(x.to(device)).float()).cpu())
    return torch.cat(out).numpy()


def new_model(config: ImageFederationConfig, n_labels: int) -> ImageClassifier:
    """The configured classifier for ``n_labels`` labels, seeded: every node and the server start
    from the same representation block."""
    torch.manual_seed(config.seed)
    return build_model(
        config.arch, n_labels, in_channels=config.in_channels, image_size=config.image_size,
        checkpoint=config.checkpoint, **config.vit_options,
    )  # fmt: skip


def local_keys(model: ImageClassifier, norm: NormStrategy) -> list[str]:
    """Representation keys that stay on the node under ``norm`` (see module docstring)."""
    if norm == "fedbn":
        return norm_keys(model)
    if norm == "fedbn+":
        return [k for k in norm_keys(model) if k.rsplit(".", 1)[-1].startswith("running_")]
    return []


def run_image_federation(
    nodes: Sequence[ImageNode],
    config: ImageFederationConfig = ImageFederationConfig(),
    *,
    evaluate: Callable[[int, GlobalState, dict[str, ImageClassifier]], dict[str, Any]]
    | None = None,
    progress: bool = True,
) -> ImageFederationResult:
    """``config.rounds`` rounds of local training + surgical aggregation over image nodes."""
    if not nodes:
        raise ValueError("no nodes")
    union = LabelSpace.union(n.table.label_space for n in nodes)
    reference = new_model(config, len(union))
    local = local_keys(reference, config.norm)
    server = SurgicalServer(GlobalState(union, *to_arrays(reference, skip=local)), config)
    models = {n.name: new_model(config, len(n.table.label_space)) for n in nodes}

    def load_global(state: GlobalState) -> None:
        for node in nodes:
            load_arrays(models[node.name].cpu(), *node_arrays(state, node.table.label_space))

    def train(r: int, i: int, node: ImageNode, state: GlobalState) -> tuple[NodeUpdate, dict]:
        model = models[node.name]
        load_arrays(model.cpu(), *node_arrays(state, node.table.label_space))
        set_representation_trainable(model, r >= config.warmup_rounds)
        loss, speed = train_images(
            model, node.table, config, epochs=config.local_epochs,
            seed=round_seed(config.seed, r, i), freeze_bn_stats=config.norm == "fedbn+",
        )  # fmt: skip
        shared, task = to_arrays(model, skip=local)
        update = NodeUpdate(node.name, node.table.label_space, shared, task, len(node.table))
        return update, {"loss": loss, "images_per_s": speed}

    def evaluate_nodes(r: int, state: GlobalState) -> dict[str, Any]:
        assert evaluate is not None
        load_global(state)  # the nodes' models with the new global weights
        return evaluate(r, state, models)

    history = run_rounds(
        server,
        nodes,
        config.rounds,
        train,
        evaluate=None if evaluate is None else evaluate_nodes,
        progress=progress,
    )
    load_global(server.state)
    return ImageFederationResult(server.state, models, history)


def global_image_model(
    state: GlobalState, config: ImageFederationConfig, *, local_from: ImageClassifier | None = None
) -> ImageClassifier:
    """A classifier over every label of ``state``. Under FedBN the normalisation layers are not
    global: take them from one node's model (``local_from``), else they keep their initial values."""
    model = new_model(config, len(state.labels))
    if local_from is not None:
        keys = local_keys(model, config.norm)
        own = local_from.representation.state_dict()
        model.representation.load_state_dict({k: own[k] for k in keys}, strict=False)
    load_arrays(model, state.shared, state.task)
    return model.eval()


class ImageLabeler:
    """A trained image classifier with the labeler contract: ``classes_`` and
    ``predict_proba(image paths)`` (what :func:`reportfed.combine.combine` takes)."""

    def __init__(
        self, model: ImageClassifier, labels: LabelSpace, config: ImageFederationConfig
    ) -> None:
        self.model = model
        self.labels = labels
        self.config = config
        self.classes_ = np.array(labels.names, dtype=object)

    def predict_proba(self, images: Sequence[str | Path]) -> np.ndarray:
        """Probabilities ``(len(images), len(classes_))``."""
        table = ImageTable(
            [Path(p) for p in images],
            np.full((len(images), len(self.labels)), np.nan, dtype=np.float32),
            self.labels,
        )
        return predict_images(self.model, table, self.config)
