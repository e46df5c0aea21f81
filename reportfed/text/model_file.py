"""The model file: one safetensors file holding a global model's weights and what it takes to use
them (labels, thresholds, embedder, granularity, architecture) with a provenance record.

:class:`~reportfed.labeler.ReportLabeler` saves and loads it, and the Flower ServerApp writes and
resumes from it, so both read one format without importing each other. The metadata sits in the
safetensors header under ``reportfed``; a sha256 over the weights and every metadata field makes
an edited or truncated file an error instead of a different model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from reportfed import __version__
from reportfed.core.aggregation import GlobalState, flatten, unflatten
from reportfed.core.errors import ModelFileError, ReportfedError
from reportfed.core.files import atomic_write
from reportfed.core.labels import LabelSpace
from reportfed.text.calibration import COEFFICIENTS as CALIBRATION_COEFFICIENTS
from reportfed.text.corrections import Corrections

FORMAT = "reportfed-model/5"
#: formats :func:`read_model` reads: /2 stores the whole training config where /3 keeps the
#: architecture (training is provenance); /4 adds the calibration (/2 and /3 read as identity);
#: /5 adds its ``likely`` coefficient (/4's reads as 0: the probabilities it was fitted for)
READABLE = ("reportfed-model/2", "reportfed-model/3", "reportfed-model/4", FORMAT)
#: the format whose calibration lacks the ``likely`` coefficient, the last but one
_NO_LIKELY = "reportfed-model/4"
#: the format whose checksum covers the weights only (an edited label list cannot be detected)
UNCHECKED = "reportfed-model/1"


@dataclass
class ModelFile:
    """The contents of a model file. ``embedder`` holds ``spec``, ``base_url``, ``fingerprint``
    and ``dim``; ``architecture`` the architecture fields of
    :class:`~reportfed.core.config.FederationConfig`; ``provenance`` how the model was trained."""

    state: GlobalState
    thresholds: list[float]
    granularity: str
    embedder: dict[str, Any]
    architecture: dict[str, Any]
    provenance: dict[str, Any] = field(default_factory=dict)
    #: per-label calibration coefficients (:mod:`reportfed.text.calibration`); None is the identity
    calibration: list[list[float]] | None = None


def write_model(path: str | Path, model: ModelFile) -> Path:
    """Write ``model`` to ``path`` atomically."""
    return atomic_write(path, encode_model(model))


def encode_model(model: ModelFile) -> bytes:
    """The bytes of ``model``'s file (safetensors, metadata and checksum in its header); a
    :class:`ModelFileError` for a model :func:`read_model` would refuse (thresholds or
    calibration that are not one finite entry per label, definitions or corrections no file
    could hold), so no run writes a model that cannot label."""
    from safetensors.numpy import save

    try:
        _check_per_label(model)
        _check_provenance(model.provenance)
    except (KeyError, TypeError, ValueError, ReportfedError) as exc:
        raise ModelFileError(f"refusing to write a model that could not be read ({exc})") from None
    tensors = flatten(model.state.shared, model.state.task)
    meta: dict[str, Any] = {
        "format": FORMAT,
        "labels": list(model.state.labels),
        "thresholds": [float(t) for t in model.thresholds],
        "calibration": model.calibration,
        "granularity": model.granularity,
        "embedder": model.embedder,
        "architecture": model.architecture,
        "provenance": model.provenance,
    }
    meta["checksum"] = checksum(tensors, meta)
    return save(tensors, metadata={"reportfed": json.dumps(meta)})


def read_model(path: str | Path) -> ModelFile:
    """Read and verify a model file of any :data:`READABLE` format (a :class:`ModelFileError`
    for a missing, unreadable, edited or inconsistent file)."""
    from safetensors import safe_open

    path = Path(path)
    if path.is_dir():
        raise ModelFileError(f"{path}: is a directory, not a model file")
    if not path.is_file():
        raise ModelFileError(f"{path}: no such model file")
    try:
        with safe_open(str(path), framework="numpy") as f:
            meta = json.loads((f.metadata() or {}).get("reportfed", "{}"))
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open API
    except Exception as exc:  # truncated / not safetensors / bad header
        raise ModelFileError(f"{path}: not a readable reportfed model file ({exc})") from None
    if meta.get("format") == UNCHECKED:
        raise ModelFileError(
            f"{path}: a {UNCHECKED} file, whose checksum does not cover its labels and thresholds "
            f"(an edit cannot be detected); retrain it with reportfed {__version__} "
            "(reportfed train, or reportfed federation run)"
        )
    if meta.get("format") not in READABLE:
        raise ModelFileError(f"{path}: not a {FORMAT} file (format {meta.get('format')!r})")
    if checksum(tensors, meta) != meta.get("checksum"):
        raise ModelFileError(
            f"{path}: weights or metadata do not match their checksum (corrupted or edited)"
        )
    try:
        model = ModelFile(
            state=GlobalState(
                LabelSpace.of(meta["labels"], allow_unknown=True), *unflatten(tensors)
            ),
            thresholds=[float(t) for t in meta["thresholds"]],
            granularity=meta.get("granularity", "report"),
            embedder=_vector_space(dict(meta["embedder"])),
            architecture=dict(meta["architecture"] if "architecture" in meta else meta["config"]),
            provenance=dict(meta["provenance"]),
            calibration=_calibration(meta),
        )
        _check_per_label(model)
        _check_provenance(model.provenance)
    except (KeyError, TypeError, ValueError, ReportfedError) as exc:
        raise ModelFileError(f"{path}: inconsistent model metadata ({exc!r})") from None
    return model


def _calibration(meta: Mapping[str, Any]) -> list[list[float]] | None:
    """The calibration of a file's metadata, a /4 file's with the ``likely`` coefficient it
    lacks inserted as 0 before the intercept (the same probabilities)."""
    coef = meta.get("calibration")
    if coef is None or meta["format"] != _NO_LIKELY:
        return coef
    likely = CALIBRATION_COEFFICIENTS.index("likely")
    return [[*row[:likely], 0.0, *row[likely:]] for row in coef]


def _vector_space(embedder: dict[str, Any]) -> dict[str, Any]:
    """``embedder`` with its fingerprint naming the vector space only: files written by reportfed
    0.1.0 before this rule named the torch float precision of a local embedder in it
    (``st:MODEL:DIGEST:bf16``), and fp32 and bf16 vectors of the same weights are one space."""
    parts = str(embedder.get("fingerprint", "")).split(":")
    if parts[0] in ("st", "hf-mean") and len(parts) > 3 and parts[3] in ("fp32", "bf16"):
        del parts[3]
        return {**embedder, "fingerprint": ":".join(parts)}
    return embedder


def _check_per_label(model: ModelFile) -> None:
    """Raise ValueError unless the thresholds and calibration give one finite entry per label."""
    n = len(model.state.labels)
    if len(model.thresholds) != n or not np.isfinite(model.thresholds).all():
        raise ValueError(f"thresholds {model.thresholds} are not {n} finite numbers")
    if model.calibration is not None:
        coef = np.asarray(model.calibration, dtype=np.float64)
        if coef.shape != (n, len(CALIBRATION_COEFFICIENTS)) or not np.isfinite(coef).all():
            raise ValueError(f"calibration of shape {coef.shape} is not {n} rows of finite numbers")


def _check_provenance(provenance: Mapping[str, Any]) -> None:
    """Raise unless the definitions and corrections a model reads with pass the checks a
    findings file and a review page's download pass."""
    from reportfed.text.findings import Findings

    if "findings" in provenance:
        Findings.from_record(provenance["findings"], origin="its findings")
    Corrections.from_record(provenance.get("corrections", []))


def checksum(tensors: dict[str, np.ndarray], meta: dict[str, Any]) -> str:
    """sha256 over the weights and every metadata field but the checksum."""
    h = hashlib.sha256()
    for key in sorted(tensors):
        h.update(key.encode())
        h.update(np.ascontiguousarray(tensors[key]).tobytes())
    covered = {k: v for k, v in meta.items() if k != "checksum"}
    h.update(json.dumps(covered, sort_keys=True).encode())
    return h.hexdigest()


def beyond_lexicon(provenance: Mapping[str, Any]) -> list[str]:
    """What a model's ``provenance`` says it reads beyond the lexicon, a line each: the findings
    a hospital defined, with their file's SHA-256, and the phrasings its readers corrected."""
    lines = []
    if defined := provenance.get("findings"):
        names = ", ".join(str(f["name"]) for f in defined["findings"])
        files = defined.get("files", [defined["checksum"]])
        where = "a file" if len(files) == 1 else f"{len(files)} files"
        lines.append(f"findings defined in {where} of SHA-256 {', '.join(files)}: {names}")
    for c in Corrections.from_record(provenance.get("corrections", [])).corrections:
        lines.append(f"a corrected phrasing ({c.reports} report(s)): {c.describe()}")
    return lines
