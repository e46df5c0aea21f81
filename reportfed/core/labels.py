"""Label vocabularies, aliases and the ordered :class:`LabelSpace`.

Every label name that enters reportfed goes through :func:`canonical`, so that spellings from
different vocabularies ("Effusion", "pleural_effusion", "Enlarged Cardiom.") never split a class.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self, overload

import numpy as np

from reportfed.core.errors import ConfigError, LabelError, warn

#: The CheXpert labeler's 14 observations, in its output column order.
CHEXPERT_14: tuple[str, ...] = (
    "No Finding",
    "Enlarged Cardiomediastinum",
    "Cardiomegaly",
    "Lung Lesion",
    "Lung Opacity",
    "Edema",
    "Consolidation",
    "Pneumonia",
    "Atelectasis",
    "Pneumothorax",
    "Pleural Effusion",
    "Pleural Other",
    "Fracture",
    "Support Devices",
)
#: The 13 CheXpert findings (CheXpert-14 without "No Finding"), as used by the papers.
CHEXPERT_13: tuple[str, ...] = CHEXPERT_14[1:]

#: NIH ChestX-ray14 labels, in canonical spelling (aliases map the NIH spellings onto these).
NIH_14: tuple[str, ...] = (
    "Atelectasis",
    "Cardiomegaly",
    "Pleural Effusion",
    "Infiltration",
    "Mass",
    "Nodule",
    "Pneumonia",
    "Pneumothorax",
    "Consolidation",
    "Edema",
    "Emphysema",
    "Fibrosis",
    "Pleural Thickening",
    "Hernia",
)

#: Every built-in canonical label, in the order used for unions (CheXpert first, then NIH-only).
KNOWN_LABELS: tuple[str, ...] = CHEXPERT_14 + tuple(n for n in NIH_14 if n not in CHEXPERT_14)

# Alias spellings (after normalisation) -> canonical name. Canonical names map to themselves.
_ALIASES: dict[str, str] = {
    "effusion": "Pleural Effusion",
    "pleural effusions": "Pleural Effusion",
    "enlarged cardiom": "Enlarged Cardiomediastinum",
    "enlarged cardiom.": "Enlarged Cardiomediastinum",
    "airspace opacity": "Lung Opacity",
    "opacity": "Lung Opacity",
    "normal": "No Finding",
    "no findings": "No Finding",
    "support device": "Support Devices",
    "pleural thickening": "Pleural Thickening",
    "infiltrate": "Infiltration",
    "fractures": "Fracture",
}


def _normalise(name: str) -> str:
    """Lower-case, underscores and hyphens to spaces, collapse whitespace."""
    return re.sub(r"\s+", " ", name.replace("_", " ").replace("-", " ")).strip().lower()


_LOOKUP: dict[str, str] = {_normalise(n): n for n in KNOWN_LABELS}
_LOOKUP.update({_normalise(k): v for k, v in _ALIASES.items()})


def canonical(name: str, *, allow_unknown: bool = False) -> str:
    """Return the canonical spelling of a label name.

    Parameters
    ----------
    name:
        Any spelling: case, whitespace, underscores and known aliases are accepted.
    allow_unknown:
        Keep a name outside the built-in vocabularies (whitespace-normalised) instead of raising.
    """
    if not isinstance(name, str) or not name.strip():
        raise LabelError(f"label name must be a non-empty string, got {name!r}")
    key = _normalise(name)
    if key in _LOOKUP:
        return _LOOKUP[key]
    if key.endswith(".") and key[:-1] in _LOOKUP:
        return _LOOKUP[key[:-1]]
    if allow_unknown:
        return re.sub(r"\s+", " ", name).strip()
    raise LabelError(
        f"unknown label {name!r}: not a CheXpert or NIH-14 label or alias "
        "(pass allow_unknown=True / --custom-label to keep it as your own label)"
    )


def is_known(name: str) -> bool:
    """Whether ``name`` is a built-in label or one of its aliases."""
    try:
        canonical(name)
    except LabelError:
        return False
    return True


def _order_key(name: str) -> tuple[int, str]:
    try:
        return (KNOWN_LABELS.index(name), "")
    except ValueError:
        return (len(KNOWN_LABELS), name.lower())


@dataclass(frozen=True)
class LabelSpace:
    """An ordered, duplicate-free tuple of canonical label names.

    Construct with :meth:`of`, which canonicalises names and rejects duplicates (two aliases of
    the same label count as a duplicate).
    """

    names: tuple[str, ...]

    @classmethod
    def of(cls, names: Iterable[str], *, allow_unknown: bool = False) -> LabelSpace:
        """Canonicalise ``names`` (keeping their order) and reject duplicates."""
        raw = list(names)
        canon = [canonical(n, allow_unknown=allow_unknown) for n in raw]
        seen: dict[str, str] = {}
        for original, c in zip(raw, canon, strict=True):
            if c in seen:
                raise LabelError(f"duplicate label: {seen[c]!r} and {original!r} are both {c!r}")
            seen[c] = original
        return cls(tuple(canon))

    @classmethod
    def union(cls, spaces: Iterable[Iterable[str]]) -> LabelSpace:
        """Union of label spaces in a deterministic order (independent of the input order)."""
        names = {n for space in spaces for n in space}
        return cls(tuple(sorted(names, key=_order_key)))

    def index(self, name: str) -> int:
        """Position of ``name`` (any spelling) in this space."""
        c = canonical(name, allow_unknown=True)
        try:
            return self.names.index(c)
        except ValueError:
            raise LabelError(
                f"label {name!r} is not in this label space {list(self.names)}"
            ) from None

    def indices(self, names: Iterable[str]) -> np.ndarray:
        """Positions of several names, as an integer array."""
        return np.array([self.index(n) for n in names], dtype=np.intp)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            return canonical(name, allow_unknown=True) in self.names
        except LabelError:
            return False

    @overload
    def __getitem__(self, i: int | np.integer) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[str, ...]: ...

    def __getitem__(self, i: int | np.integer | slice) -> str | tuple[str, ...]:
        return self.names[i] if isinstance(i, slice) else self.names[int(i)]

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __repr__(self) -> str:
        return f"LabelSpace({list(self.names)!r})"


def check_label_matrix(y: np.ndarray, rows: int, labels: LabelSpace, what: str) -> None:
    """Refuse a label matrix ``y`` that is not ``(rows, len(labels))`` (a ``ValueError`` naming
    ``what`` holds it): the one shape rule of every labelled-rows type (reports, nodes, images)."""
    if y.shape != (rows, len(labels)):
        raise ConfigError(f"{what}: labels shape {y.shape} != ({rows}, {len(labels)})")


class LabelledRows:
    """What the tables of both modalities share (reports, images): a label matrix ``labels``
    ``(len(self), len(label_space))``, float32, NaN = not annotated, checked when one is made,
    and :meth:`subset`. A subclass is a dataclass with fields ``labels``, ``label_space`` and
    ``source``, whose field named :attr:`ROWS` holds its items (texts, paths)."""

    ROWS: ClassVar[str]
    labels: np.ndarray
    label_space: LabelSpace
    source: str

    def __post_init__(self) -> None:
        check_label_matrix(self.labels, len(self), self.label_space, self.source or self.ROWS)

    def __len__(self) -> int:
        return len(getattr(self, self.ROWS))

    def subset(self, rows: np.ndarray | Sequence[int]) -> Self:
        """Rows ``rows`` of this table (its label space and source kept)."""
        return dataclasses.replace(self, **self._subset_fields(np.asarray(rows, dtype=int)))  # type: ignore[type-var]

    def _subset_fields(self, idx: np.ndarray) -> dict[str, Any]:
        """The fields :meth:`subset` replaces: the items and labels of rows ``idx``."""
        items = getattr(self, self.ROWS)
        return {self.ROWS: [items[i] for i in idx.tolist()], "labels": self.labels[idx]}


#: annotated rows from which a label that is never 0 is worth a warning
ALL_POSITIVE_ROWS = 10


def warn_if_all_positive(site: str, y: np.ndarray, labels: LabelSpace) -> None:
    """Warn when ``site`` annotates a label 1 on every one of at least
    :data:`ALL_POSITIVE_ROWS` rows of ``y``: with no negative example the model learns to call
    it present on every report, normal ones included."""
    for c, name in enumerate(labels):
        known = y[~np.isnan(y[:, c]), c]
        if len(known) >= ALL_POSITIVE_ROWS and (known == 1).all():
            warn(
                f"site {site!r} labels {name!r} 1 on all its {len(known)} annotated rows (no "
                "negative example): the model will call it present on every report; check the "
                "column, or leave it blank where a report does not say"
            )


#: positive and negative annotated rows a label needs before the model can learn it
MIN_EXAMPLES = 5


def warn_if_too_few(y: np.ndarray, labels: LabelSpace) -> None:
    """Warn, with the counts, for each label of ``y`` (all the sites' rows) with fewer than
    :data:`MIN_EXAMPLES` positive or negative annotated rows: the model cannot learn it from
    reports, and may call it on reports that never mention it (or never call it). A label no
    row annotates is left out of training, not warned about."""
    for c, name in enumerate(labels):
        known = y[~np.isnan(y[:, c]), c]
        if not len(known):
            continue
        positives = int((known == 1).sum())
        negatives = len(known) - positives
        if positives < MIN_EXAMPLES or negatives < MIN_EXAMPLES:
            warn(
                f"{name!r} has {positives} positive and {negatives} negative annotated rows in "
                f"all the sites together: with fewer than {MIN_EXAMPLES} of each, its labels rest "
                "on the template sentences alone and will say little"
            )
