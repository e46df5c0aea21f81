"""Synthetic chest-X-ray-like images whose labels are visible, for tests and CPU runs.

A dark background, a grey thorax, two darker textured lungs and a bright heart shadow; each label
adds its own sign: Cardiomegaly widens the heart, Pleural Effusion fills the base of the right
lung, Pneumothorax empties the apex of the left lung, Lung Lesion adds small bright nodules,
Support Devices draws a tube. Position, brightness and noise vary per image.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from reportfed.core.labels import LabelSpace

LABELS = LabelSpace.of(
    ["Cardiomegaly", "Pleural Effusion", "Pneumothorax", "Lung Lesion", "Support Devices"]
)


def _ellipse(h: int, w: int, cy: float, cx: float, ry: float, rx: float) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    return ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0


def synthetic_image(y: Sequence[float], rng: np.random.Generator, size: int = 64) -> np.ndarray:
    """One ``size`` x ``size`` image in [0, 1] showing the findings ``y`` (in :data:`LABELS` order)."""
    s = size / 64.0
    dy, dx = rng.normal(0, 1.5 * s, 2)
    img = np.full((size, size), 0.05)
    img[_ellipse(size, size, 34 * s + dy, 32 * s + dx, 28 * s, 26 * s)] = 0.35
    lungs = []
    for cx in (20, 44):
        lung = _ellipse(size, size, 30 * s + dy, cx * s + dx, 18 * s, 9 * s)
        img[lung] = 0.15 + 0.04 * rng.standard_normal(lung.sum())
        lungs.append(lung)
    heart_w = (13 if y[0] else 8) * s
    img[_ellipse(size, size, 42 * s + dy, 30 * s + dx, 8 * s, heart_w)] = 0.6
    yy, _ = np.mgrid[0:size, 0:size]
    if y[1]:  # effusion: the base of the (patient's) right lung, on the image's left
        img[lungs[0] & (yy > (38 + rng.uniform(-2, 2)) * s + dy)] = 0.55
    if y[2]:  # pneumothorax: the apex of the left lung loses its markings
        img[lungs[1] & (yy < (24 + rng.uniform(-2, 2)) * s + dy)] = 0.0
    if y[3]:  # lung lesions: a few bright nodules inside the lungs
        for _ in range(rng.integers(2, 4)):
            lung = lungs[rng.integers(0, 2)]
            cy, cx = np.argwhere(lung)[rng.integers(0, lung.sum())]
            img[_ellipse(size, size, cy, cx, 2 * s, 2 * s)] = 0.85
    if y[4]:  # support device: a tube from the top towards the heart
        x0 = (30 + rng.uniform(-3, 3)) * s
        for t in np.linspace(0, 1, 4 * size):
            r, c = int(2 * s + t * 36 * s), int(x0 + t * 6 * s)
            img[max(r - 1, 0) : r + 1, max(c - 1, 0) : c + 1] = 0.95
    img = img * rng.uniform(0.85, 1.15) + rng.normal(0, 0.03, img.shape)
    return np.clip(img, 0, 1).astype(np.float32)


def write_synthetic_node(
    out_dir: str | Path,
    n: int,
    label_names: Sequence[str],
    *,
    seed: int = 0,
    prevalence: float = 0.35,
    size: int = 64,
) -> Path:
    """Write ``n`` PNG images and ``labels.csv`` (``Path`` + the node's label columns, spelt as
    given, e.g. NIH's ``Effusion``) under ``out_dir``; returns the CSV path."""
    from PIL import Image

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    y = (rng.random((n, len(LABELS))) < prevalence).astype(np.float32)
    rows = []
    for i in range(n):
        name = f"img{i:05d}.png"
        Image.fromarray((synthetic_image(y[i], rng, size) * 255).astype(np.uint8)).save(out / name)
        rows.append(name)
    cols = LABELS.indices(label_names)
    frame = pd.DataFrame(
        {"Path": rows, **{n_: y[:, c] for n_, c in zip(label_names, cols, strict=True)}}
    )
    frame.to_csv(out / "labels.csv", index=False)
    return out / "labels.csv"
