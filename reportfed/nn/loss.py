"""The loss of every modality: binary cross-entropy with not-annotated (NaN) targets masked out
(torchxrayvision's idiom for sites that label different findings)."""

from __future__ import annotations

import torch
from torch import nn


def masked_bce(
    logits: torch.Tensor, targets: torch.Tensor, pos_weight: torch.Tensor | None = None
) -> torch.Tensor:
    """Mean binary cross-entropy over the entries of ``targets`` that are not NaN; ``pos_weight``
    (one per column) multiplies the loss of positive entries."""
    mask = ~torch.isnan(targets)
    if not mask.any():
        return logits.sum() * 0.0
    if pos_weight is None:
        return nn.functional.binary_cross_entropy_with_logits(logits[mask], targets[mask])
    loss = nn.functional.binary_cross_entropy_with_logits(
        logits, torch.nan_to_num(targets), pos_weight=pos_weight, reduction="none"
    )
    return loss[mask].mean()
