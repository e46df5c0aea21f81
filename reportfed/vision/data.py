"""Image tables, image loading, preprocessing and training-side augmentation.

An :class:`ImageTable` is the image counterpart of :class:`reportfed.data.table.ReportTable`:
image paths and a label matrix (NaN = not annotated) over a :class:`~reportfed.core.labels.LabelSpace`,
so label names from any vocabulary merge through the same aliases.

Layouts read by :func:`read_image_table`:

* ``table`` — a CSV/Parquet with a path column (``Path``, ``path``, ``image``, ``Image Index``,
  ``file``) and label columns (1 / 0 / -1 / blank); CheXpert's ``train.csv`` is this layout;
* ``nih`` — NIH ChestX-ray14's ``Data_Entry_2017.csv`` (``Image Index``, ``Finding Labels``
  joined by ``|``; every label annotated);
* ``mimic`` — MIMIC-CXR-JPG: ``mimic-cxr-2.0.0-metadata.csv(.gz)`` joined with
  ``mimic-cxr-2.0.0-chexpert.csv(.gz)`` (give the metadata file; the label file sits beside it),
  images at ``files/pXX/pSUBJECT/sSTUDY/DICOM_ID.jpg``; ``split`` keeps the images that
  ``mimic-cxr-2.0.0-split.csv(.gz)`` beside them puts in one official split, as ``reportfed
  corpus mimic --split`` keeps their studies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
import torch
from torch.nn import functional as F

from reportfed.core.config import Blank, Uncertain
from reportfed.core.errors import ConfigError, InputFileError
from reportfed.core.labels import NIH_14, LabelledRows, LabelSpace, canonical, is_known
from reportfed.data.mimic import SPLITS, Split, read_split
from reportfed.data.table import parse_label_column, read_frame

PATH_COLUMNS = ("Path", "path", "image", "Image Index", "file")
Layout = Literal["table", "nih", "mimic"]


@dataclass
class ImageTable(LabelledRows):
    """Image paths with a (possibly partial) label matrix ``(len(paths), len(label_space))``."""

    paths: list[Path]
    labels: np.ndarray
    label_space: LabelSpace
    source: str = ""

    ROWS: ClassVar[str] = "paths"


def _read(path: Path) -> pd.DataFrame:
    """An image table read as report tables are (:func:`reportfed.data.table.read_frame`)."""
    return read_frame(path, PATH_COLUMNS, "an image table")


def read_image_table(
    path: str | Path,
    *,
    image_root: str | Path | None = None,
    layout: Layout = "table",
    uncertain: Uncertain = "zeros",
    blank: Blank = "negative",
    split: Split | None = None,
) -> ImageTable:
    """Read an image table; relative image paths are resolved against ``image_root`` (default:
    the table's directory). Label cells read as report tables' do (:mod:`reportfed.core.config`'s
    ``Blank`` and ``Uncertain``: a blank cell is a negative by default). ``split``: the mimic
    layout's images of one official split."""
    path = Path(path)
    if split is not None and (layout != "mimic" or split not in SPLITS):
        raise ConfigError(f"split {split!r}: one of {', '.join(SPLITS)}, of the mimic layout only")
    root = Path(image_root) if image_root is not None else path.parent
    frame = _read(path)
    if layout == "nih":
        space = LabelSpace.of(NIH_14)
        findings = [
            {canonical(f, allow_unknown=True) for f in row.split("|")}
            for row in frame["Finding Labels"]
        ]
        labels = np.array([[float(c in row) for c in space] for row in findings], dtype=np.float32)
        files = frame["Image Index"].tolist()
    elif layout == "mimic":
        label_file = path.with_name(path.name.replace("metadata", "chexpert"))
        chexpert = _read(label_file)
        frame = frame.merge(chexpert, on=["subject_id", "study_id"], how="inner")
        if split is not None:
            name = path.name.replace("metadata", "split").removesuffix(".gz")
            found = next(
                (p for p in (path.with_name(name), path.with_name(name + ".gz")) if p.is_file()),
                None,
            )
            if found is None:
                raise InputFileError(f"{path.with_name(name)}(.gz): no such file, for split")
            frame = frame[frame["dicom_id"].isin(read_split(found, split, "dicom_id"))]
        files = [
            f"files/p{s[:2]}/p{s}/s{t}/{d}.jpg"
            for s, t, d in zip(
                frame["subject_id"], frame["study_id"], frame["dicom_id"], strict=True
            )
        ]
        return _labelled(
            path, frame, files, root, (uncertain, blank), source=f"MIMIC-CXR-JPG {path}"
        )
    elif layout == "table":
        column = next((c for c in PATH_COLUMNS if c in frame.columns), None)
        if column is None:
            raise InputFileError(f"{path}: no image path column (one of {list(PATH_COLUMNS)})")
        files = frame[column].tolist()
        return _labelled(path, frame, files, root, (uncertain, blank), source=str(path))
    else:
        raise ConfigError(f"unknown layout {layout!r}: table, nih or mimic")
    return ImageTable([root / f for f in files], labels, space, source=f"NIH {path}")


def _labelled(
    path: Path,
    frame: pd.DataFrame,
    files: list[str],
    root: Path,
    cells: tuple[Uncertain, Blank],
    source: str,
) -> ImageTable:
    columns = [c for c in frame.columns if is_known(str(c))]
    if not columns:
        raise InputFileError(f"{path}: no label column with a known label name")
    space = LabelSpace.of(columns)
    labels = np.stack(
        [parse_label_column(path, c, frame[c], cells[0], 2, cells[1]) for c in columns], axis=1
    )
    return ImageTable([root / f for f in files], labels, space, source=source)


def load_image(path: str | Path) -> np.ndarray:
    """A greyscale image as float32 in [0, 1] (PNG/JPEG; DICOM when pydicom is installed)."""
    path = Path(path)
    if path.suffix.lower() == ".dcm":
        try:
            import pydicom
        except ImportError:
            raise InputFileError(
                f"{path}: reading DICOM needs pydicom (pip install pydicom)"
            ) from None
        pixels = pydicom.dcmread(path).pixel_array.astype(np.float32)
        low, high = float(pixels.min()), float(pixels.max())
        return (pixels - low) / max(high - low, 1e-6)
    from PIL import Image

    try:
        with Image.open(path) as img:
            if img.mode in ("I;16", "I;16B", "I"):
                return np.asarray(img, dtype=np.float32) / 65535.0
            return np.asarray(img.convert("L"), dtype=np.float32) / 255.0
    except (OSError, ValueError) as exc:
        raise InputFileError(f"{path}: not a readable image ({exc})") from None


def augment(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Random horizontal flip, rotation (±10°), zoom (0.9-1.1) and contrast (0.8-1.2) of a
    ``(C, H, W)`` image in [0, 1]."""

    def uniform(low: float, high: float) -> float:
        return low + (high - low) * float(torch.rand((), generator=gen))

    if float(torch.rand((), generator=gen)) < 0.5:
        x = x.flip(-1)
    angle, scale = math.radians(uniform(-10, 10)), 1 / uniform(0.9, 1.1)
    theta = torch.tensor(
        [
            [scale * math.cos(angle), -scale * math.sin(angle), 0.0],
            [scale * math.sin(angle), scale * math.cos(angle), 0.0],
        ],
        dtype=x.dtype,
    )
    grid = F.affine_grid(theta[None], [1, *x.shape], align_corners=False)
    x = F.grid_sample(x[None], grid, padding_mode="border", align_corners=False)[0]
    mean = x.mean()
    return ((x - mean) * uniform(0.8, 1.2) + mean).clamp(0, 1)


class ImageDataset(torch.utils.data.Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Images resized to ``image_size``, scaled to [0, 1], augmented when ``train``, then
    normalised (``(x - mean) / std``) and repeated to ``channels``; targets keep NaN."""

    def __init__(
        self,
        table: ImageTable,
        *,
        image_size: int = 224,
        channels: int = 1,
        train: bool = False,
        mean: float = 0.5,
        std: float = 0.25,
        seed: int = 0,
    ) -> None:
        self.table = table
        self.image_size = image_size
        self.channels = channels
        self.train = train
        self.mean, self.std = mean, std
        self.gen = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.from_numpy(load_image(self.table.paths[i]))[None]
        if x.shape[-2:] != (self.image_size, self.image_size):
            size = (self.image_size, self.image_size)
            x = F.interpolate(x[None], size=size, mode="bilinear", antialias=True)[0]
        if self.train:
            x = augment(x, self.gen)
        x = ((x - self.mean) / self.std).repeat(self.channels, 1, 1)
        return x, torch.from_numpy(self.table.labels[i])


def table_from_report_labels(
    report_model: Any, reports: Sequence[str], images: Sequence[str | Path]
) -> ImageTable:
    """Training labels for an image model from its studies' reports: ``report_model`` (a fitted
    :class:`~reportfed.labeler.ReportLabeler`) labels each report at its stored thresholds, and
    the labels go to the image of the same study."""
    if len(reports) != len(images):
        raise ConfigError(f"{len(reports)} reports for {len(images)} images")
    labels = LabelSpace.of(list(report_model.classes_), allow_unknown=True)
    y = np.asarray(report_model.predict(list(reports)), dtype=np.float32)
    return ImageTable([Path(p) for p in images], y, labels, source="labelled from reports")
