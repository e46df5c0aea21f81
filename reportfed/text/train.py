"""Local training of one node: BCE over the node's own labels, not-annotated (NaN) entries masked."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from reportfed.core.errors import ConfigError
from reportfed.nn.loss import masked_bce
from reportfed.nn.threads import torch_threads, training_threads
from reportfed.text.model import seed_dropout


def positive_weights(y: np.ndarray, max_weight: float = 100.0) -> np.ndarray:
    """Per column, negatives / positives among the annotated entries of ``y`` (NaN: not
    annotated), clipped to ``[1, max_weight]``; 1 for a column without positives."""
    pos = np.sum(y == 1, axis=0)
    neg = np.sum(y == 0, axis=0)
    ratio = np.divide(neg, pos, out=np.ones(y.shape[1]), where=pos > 0)
    return np.clip(ratio, 1.0, max_weight).astype(np.float32)


def train_local(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epochs: int = 1,
    lr: float = 1e-3,
    batch_size: int = 32,
    seed: int = 0,
    soft: torch.Tensor | None = None,
    distill: float = 0.0,
    weight_decay: float = 0.0,
    pos_weight: torch.Tensor | None = None,
    prox: float = 0.0,
) -> float:
    """Train ``model`` on ``(x, y)`` with a fresh Adam; returns the mean training loss.

    ``seed`` fixes the batch order and the dropout masks of the model's
    :class:`~reportfed.text.model.SeededDropout` layers (two generators, no global state), so a run is
    reproducible. ``soft`` (same shape as
    ``y``, NaN where unused) adds ``distill`` x the masked BCE against these soft targets.
    ``weight_decay`` is Adam's L2 term; ``pos_weight`` weighs the positives of each label.
    ``prox`` adds FedProx's proximal term ``prox/2 * ||w - w_start||^2`` (to the gradient; the
    returned loss is the data loss). Runs with :func:`~reportfed.nn.threads.training_threads`
    torch threads.
    """
    if len(x) == 0:
        raise ConfigError("a node has no training examples")
    with torch_threads(training_threads()):
        gen = torch.Generator().manual_seed(seed)
        seed_dropout(model, torch.Generator().manual_seed(seed))
        optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
        anchor = [p.detach().clone() for p in model.parameters()] if prox > 0 else []
        model.train()
        losses = []
        for _ in range(epochs):
            order = torch.randperm(len(x), generator=gen)
            for start in range(0, len(x), batch_size):
                idx = order[start : start + batch_size]
                logits = model(x[idx])
                loss = masked_bce(logits, y[idx], pos_weight)
                if soft is not None and distill > 0:
                    loss = loss + distill * masked_bce(logits, soft[idx])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                for param, start_value in zip(model.parameters(), anchor, strict=False):
                    param.grad.add_(param.detach() - start_value, alpha=prox)  # type: ignore[union-attr]
                optimizer.step()
                losses.append(loss.item())
        seed_dropout(model, None)
        return float(np.mean(losses))
