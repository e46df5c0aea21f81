"""Image classifiers with ``representation`` and ``task`` blocks, so that
:func:`reportfed.nn.arrays.to_arrays` / :func:`~reportfed.nn.arrays.load_arrays` and the aggregation core
treat them exactly like the report MLP.

* ``densenet121`` — MONAI ``DenseNet121`` (the Surgical Aggregation papers): representation = the
  convolutional features + ReLU + global pooling (1024-d), task = a linear layer per label set.
* ``vit`` — MONAI ``ViT`` (FeSTA): representation = patch embedding + transformer blocks + final
  LayerNorm, mean-pooled over tokens; task = a linear layer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, cast

import torch
from torch import nn

from reportfed.core.errors import ConfigError, InputFileError

Arch = Literal["densenet121", "vit"]


class _TokenMean(nn.Module):
    """MONAI's ViT without a classification head returns ``(tokens, hidden_states)``; keep the
    mean token."""

    def __init__(self, vit: nn.Module) -> None:
        super().__init__()
        self.vit = vit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens, _ = self.vit(x)
        return tokens.mean(dim=1)


class ImageClassifier(nn.Module):
    """``representation`` (image -> feature vector) followed by ``task`` (one logit per label)."""

    def __init__(self, representation: nn.Module, width: int, n_labels: int, arch: str) -> None:
        super().__init__()
        self.arch = arch
        self.representation = representation
        self.task = nn.Linear(width, n_labels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.task(self.representation(x))


def build_model(
    arch: Arch,
    n_labels: int,
    *,
    in_channels: int = 1,
    image_size: int = 224,
    checkpoint: str | Path | None = None,
    **vit_options: Any,
) -> ImageClassifier:
    """An image classifier for ``n_labels`` labels.

    ``checkpoint`` loads pretrained weights for the representation block (a torch state dict of
    the whole classifier or of ``representation`` alone; the task block is always new).
    ``vit_options`` override MONAI ViT settings (``patch_size``, ``hidden_size``, ``mlp_dim``,
    ``num_layers``, ``num_heads``); the default is ViT-B/16.
    """
    from monai.networks.nets import DenseNet121, ViT

    if arch == "densenet121":
        net = DenseNet121(spatial_dims=2, in_channels=in_channels, out_channels=1)
        *pooling, head = list(net.class_layers.children())  # relu, pool, flatten | out
        representation: nn.Module = nn.Sequential(net.features, *pooling)
        width = int(cast(nn.Linear, head).in_features)
    elif arch == "vit":
        options: dict[str, Any] = {"patch_size": 16, "hidden_size": 768, "mlp_dim": 3072,
                                   "num_layers": 12, "num_heads": 12, **vit_options}  # fmt: skip
        patch = options.pop("patch_size")
        vit = ViT(
            in_channels=in_channels,
            img_size=(image_size, image_size),
            patch_size=(patch, patch),
            classification=False,
            spatial_dims=2,
            **options,
        )
        representation, width = _TokenMean(vit), int(options["hidden_size"])
    else:
        raise ConfigError(f"unknown architecture {arch!r}: use densenet121 or vit")
    model = ImageClassifier(representation, width, n_labels, arch)
    if checkpoint is not None:
        load_representation(model, checkpoint)
    return model


def load_representation(model: ImageClassifier, checkpoint: str | Path) -> None:
    """Load pretrained representation weights from a local state-dict file (no downloads)."""
    path = Path(checkpoint)
    if not path.is_file():
        raise InputFileError(f"{path}: no such checkpoint")
    state = torch.load(path, map_location="cpu", weights_only=True)
    prefix = "representation."
    if any(k.startswith(prefix) for k in state):
        state = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
    missing, unexpected = model.representation.load_state_dict(state, strict=False)
    if unexpected or len(missing) == len(model.representation.state_dict()):
        raise ConfigError(
            f"{path}: not a {model.arch} representation checkpoint "
            f"({len(missing)} missing, {len(unexpected)} unexpected keys)"
        )


def norm_keys(model: nn.Module) -> list[str]:
    """Representation-block keys of normalisation layers: BatchNorm affine parameters and
    statistics (DenseNet121), LayerNorm parameters (ViT, which has no batch statistics)."""
    keys = []
    for name, module in model.representation.named_modules():  # type: ignore[union-attr]
        if isinstance(module, nn.modules.batchnorm._BatchNorm | nn.LayerNorm):
            keys += [f"{name}.{k}" for k in module.state_dict()]
    return keys


def freeze_batchnorm_statistics(model: nn.Module) -> None:
    """Put BatchNorm layers in eval mode: running statistics stay as they are (FedBN+/FedFBN)."""
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.eval()


def set_representation_trainable(model: ImageClassifier, trainable: bool) -> None:
    """Freeze (head warm-up) or unfreeze (fine-tuning) the representation block."""
    for p in model.representation.parameters():
        p.requires_grad_(trainable)
