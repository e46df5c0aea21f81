"""Local training of image classifiers: the hyperparameters of an image federation, the
training and prediction loops (GPU when present, AMP in bf16, channels-last; CPU otherwise: the
same code path), and which weights stay on a node under each normalisation strategy:

* ``fedavg`` — every weight and BatchNorm statistic averaged;
* ``fedbn`` — normalisation layers stay local (BatchNorm parameters and statistics for DenseNet121;
  for ViT, which has no batch statistics, its LayerNorm parameters);
* ``fedbn+`` (FedFBN) — BatchNorm statistics frozen at their pretrained values (BatchNorm layers
  run in eval mode while training), BatchNorm affine parameters averaged. For ViT it equals FedAvg.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from reportfed.core.schema import setting
from reportfed.core.server import ServerOptions
from reportfed.nn.loss import masked_bce
from reportfed.vision.data import ImageDataset, ImageTable
from reportfed.vision.models import (
    Arch,
    ImageClassifier,
    build_model,
    freeze_batchnorm_statistics,
    norm_keys,
)

NormStrategy = Literal["fedavg", "fedbn", "fedbn+"]


@dataclass(frozen=True)
class ImageFederationConfig(ServerOptions):
    """Hyperparameters of an image federation (and the server's rules, shared with text)."""

    arch: Arch = setting("densenet121", "image model: densenet121 or vit", architecture=True)
    rounds: int = setting(10, "federated rounds")
    local_epochs: int = setting(1, "epochs each node trains per round")
    lr: float = setting(1e-4, "the nodes' AdamW learning rate")
    batch_size: int = setting(16, "the nodes' batch size")
    image_size: int = setting(224, "images are resized to this square side", architecture=True)
    in_channels: int = setting(1, "image channels", architecture=True)
    norm: NormStrategy = setting(
        "fedavg", "normalisation layers: fedavg, fedbn (local) or fedbn+ (frozen statistics)"
    )
    warmup_rounds: int = setting(0, "rounds training only the task block (frozen representation)")
    checkpoint: str | None = None
    vit_options: dict[str, Any] = field(default_factory=dict)
    device: str | None = None
    seed: int = setting(0, "seed of the initial model, the batches and the augmentation")


@contextmanager
def seeded(seed: int, device: torch.device) -> Iterator[None]:
    """Seed torch's generator (and ``device``'s) inside the block and restore its state after,
    so seeding an image model leaves the rest of the process untouched (MONAI's layers draw
    their initial weights and dropout masks from the global generator)."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        yield


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
    with seeded(seed, device):  # MONAI's dropout draws from torch's generator: scope it
        return _train_epochs(model, table, config, optimizer, epochs, seed, device)


def _train_epochs(
    model: ImageClassifier,
    table: ImageTable,
    config: ImageFederationConfig,
    optimizer: torch.optim.Optimizer,
    epochs: int,
    seed: int,
    device: torch.device,
) -> tuple[float, float]:
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
    with seeded(config.seed, torch.device("cpu")):
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
