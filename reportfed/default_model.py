"""The model ``reportfed label`` uses when given none: built once from the IU corpus, then reused.

It is a federated run of two simulated IID sites sharing all 14 CheXpert labels on the IU
reports with every label annotated (MeSH-derived labels, :func:`~reportfed.data.iu.load_iu`),
sentence-level, with the default embedder and the paper's hyperparameters
(:data:`~reportfed.core.config.PAPER`: two sites holding every label need neither knowledge
transfer nor template sentences, and it builds in seconds on first use), cached in the user
cache directory. Its thresholds are each label's best F1 over every annotated row, its
calibration is fitted on the sites' held-out rows with the text rules' mentions
(:func:`~reportfed.text.calibration.labelling_rules`).

``reportfed label`` reads it with :class:`~reportfed.reader.ReportReader` (no torch, no
scikit-learn); :func:`load_default_model` gives the :class:`~reportfed.labeler.ReportLabeler`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from reportfed import __version__
from reportfed.core.config import PAPER
from reportfed.core.errors import ModelFileError
from reportfed.core.labels import CHEXPERT_14
from reportfed.core.paths import cache_dir
from reportfed.reader import ReportReader
from reportfed.text.lexicon import BUILTIN
from reportfed.text.model_file import FORMAT

if TYPE_CHECKING:
    from reportfed.labeler import ReportLabeler

_log = logging.getLogger(__name__)
SITES = 2
Model = TypeVar("Model", bound=ReportReader)
#: raised whenever what the default model learns from changes (the mapping of IU's index terms
#: to labels, its sites or settings), so that a model cached by an older recipe is built again
RECIPE = 4


def default_model_path() -> Path:
    """Where the default model is cached: one file per reportfed version, model-file format,
    :data:`RECIPE` and lexicon (its calibration is fitted with the text rules' mentions), so a
    model of an older format, recipe or lexicon is built again."""
    fmt = FORMAT.rsplit("/", 1)[-1]
    lexicon = BUILTIN.checksum[:8]
    name = f"iu-minilm-sentence-{__version__}-f{fmt}-r{RECIPE}-l{lexicon}.safetensors"
    return cache_dir() / "models" / name


def default_model_file(
    *, cache_dir: str | Path | None = None, backend: str | None = None, precision: str | None = None
) -> Path:
    """The cached default model's file, built first if it is missing or unusable (``cache_dir``:
    the embedding cache the build uses; ``backend``, ``precision``: how its embedder computes,
    :mod:`reportfed.embed`)."""
    _load(ReportReader, cache_dir, backend, precision)
    return default_model_path()


def load_default_reader(
    *, cache_dir: str | Path | None = None, backend: str | None = None, precision: str | None = None
) -> ReportReader:
    """The cached default model as a :class:`~reportfed.reader.ReportReader` (no torch, no
    scikit-learn: what ``reportfed label`` reads it with), built first if it is missing or
    unusable, read once."""
    return _load(ReportReader, cache_dir, backend, precision)


def load_default_model(
    *, cache_dir: str | Path | None = None, backend: str | None = None, precision: str | None = None
) -> ReportLabeler:
    """The cached default model as a :class:`~reportfed.labeler.ReportLabeler`, built first if it
    is missing or unusable."""
    from reportfed.labeler import ReportLabeler

    return _load(ReportLabeler, cache_dir, backend, precision)


def _load(
    kind: type[Model], cache_dir: str | Path | None, backend: str | None, precision: str | None
) -> Model:
    """The default model read as ``kind``; a file that is missing or unusable is built again."""
    path = default_model_path()
    if path.is_file():
        try:
            return kind.load(path, cache_dir=cache_dir, backend=backend, precision=precision)
        except ModelFileError as exc:
            _log.warning("default model %s is unusable (%s); rebuilding it", path, exc)
    _build(path, cache_dir=cache_dir, backend=backend, precision=precision)
    return kind.load(path, cache_dir=cache_dir, backend=backend, precision=precision)


def _build(
    path: Path, *, cache_dir: str | Path | None, backend: str | None, precision: str | None
) -> None:
    """Train the default model on IU and save it to ``path``."""
    from reportfed.data.iu import load_iu
    from reportfed.labeler import ReportLabeler

    table = load_iu().fully_annotated()
    _log.info(
        "building the default model (first use): %d simulated sites on the IU corpus, 14 CheXpert "
        "labels, all-MiniLM-L6-v2, sentence-level; this embeds the sentences of its %s reports "
        "once (cached) and trains",
        SITES,
        f"{len(table):,}",
    )
    sites = [f"site{i % SITES}" for i in np.random.default_rng(0).permutation(len(table))]
    labeler = ReportLabeler(
        config=PAPER, cache_dir=cache_dir, backend=backend, precision=precision
    ).fit(table.texts, table.labels, list(CHEXPERT_14), nodes=sites)
    labeler.save(path)
    _log.info("default model saved to %s", path)
