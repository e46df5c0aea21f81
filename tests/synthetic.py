"""A learnable synthetic embedding task for fast engine tests (labels are linear in x)."""

from __future__ import annotations

import numpy as np

from reportfed.core.labels import LabelSpace


def synthetic(
    n: int = 600,
    dim: int = 24,
    labels: tuple[str, ...] = (
        "Atelectasis",
        "Cardiomegaly",
        "Edema",
        "Pleural Effusion",
        "Pneumonia",
        "Fracture",
    ),
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, LabelSpace]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim)).astype(np.float32)
    w = rng.normal(size=(dim, len(labels)))
    y = (x @ w > np.quantile(x @ w, 0.7, axis=0)).astype(np.float32)
    return x, y, LabelSpace(labels)
