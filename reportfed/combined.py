"""Combining a report model with an image model into one predictor over the union of their labels.

For each study (a report, an image, or both) and each label of the union (aliases merged):

* both models know the label and both inputs are present -> **fused**: ``w * p_report +
  (1 - w) * p_image`` with ``w = 0.5`` (the mean) unless :meth:`CombinedLabeler.fit_weights` chose a
  per-label weight on validation studies (the AUROC-best of 0, 0.1, ..., 1);
* otherwise the probability of the one model that knows the label and has its input;
* no model can answer -> NaN with source ``""``.

Every probability comes with its source: ``"fused"``, ``"report"`` or ``"image"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from reportfed.core.errors import ConfigError
from reportfed.core.labels import LabelSpace
from reportfed.core.metrics import auroc


class Predictor(Protocol):
    """What :func:`combine` needs of a model: label names and probabilities for inputs."""

    classes_: Any

    def predict_proba(self, inputs: Sequence[Any]) -> np.ndarray: ...


@dataclass
class CombinedPrediction:
    """Per-study, per-label probabilities and where each came from."""

    probabilities: pd.DataFrame
    source: pd.DataFrame


class CombinedLabeler:
    """A report model and an image model behind one ``predict_proba`` (see module docstring)."""

    def __init__(
        self,
        report_model: Predictor,
        image_model: Predictor,
        weights: dict[str, float] | None = None,
    ) -> None:
        self.report_model = report_model
        self.image_model = image_model
        self.report_labels = LabelSpace.of(list(report_model.classes_), allow_unknown=True)
        self.image_labels = LabelSpace.of(list(image_model.classes_), allow_unknown=True)
        self.classes_ = LabelSpace.union([self.report_labels, self.image_labels])
        self.weights = dict(weights or {})

    @property
    def shared_labels(self) -> list[str]:
        """Labels both models predict."""
        return [c for c in self.classes_ if c in self.report_labels and c in self.image_labels]

    def _per_model(
        self, model: Predictor, space: LabelSpace, inputs: Sequence[Any] | None, n: int
    ) -> np.ndarray:
        """``(n, len(classes_))`` with the model's probabilities where its input is present."""
        out = np.full((n, len(self.classes_)), np.nan)
        if inputs is None:
            return out
        if len(inputs) != n:
            raise ConfigError(f"{len(inputs)} inputs for {n} studies")
        rows = np.array([i for i, v in enumerate(inputs) if v is not None], dtype=np.intp)
        if len(rows):
            proba = model.predict_proba([inputs[i] for i in rows])
            out[np.ix_(rows, self.classes_.indices(space))] = proba
        return out

    def predict_proba(
        self,
        reports: Sequence[str | None] | None = None,
        images: Sequence[Any | None] | None = None,
    ) -> CombinedPrediction:
        """Probabilities for studies given as parallel lists (``None`` = modality missing)."""
        n = len(reports) if reports is not None else len(images or [])
        pr = self._per_model(self.report_model, self.report_labels, reports, n)
        pi = self._per_model(self.image_model, self.image_labels, images, n)
        w = np.array([self.weights.get(c, 0.5) for c in self.classes_])
        both = ~np.isnan(pr) & ~np.isnan(pi)
        fused = np.where(both, w * np.nan_to_num(pr) + (1 - w) * np.nan_to_num(pi), np.nan)
        proba = np.where(both, fused, np.where(np.isnan(pr), pi, pr))
        source = np.where(
            both, "fused", np.where(~np.isnan(pr), "report", np.where(~np.isnan(pi), "image", ""))
        )
        names = list(self.classes_)
        return CombinedPrediction(
            pd.DataFrame(proba, columns=names), pd.DataFrame(source, columns=names)
        )

    def fit_weights(
        self,
        reports: Sequence[str],
        images: Sequence[Any],
        y: np.ndarray,
        labels: Sequence[str],
    ) -> CombinedLabeler:
        """Choose each shared label's report weight on validation studies with both inputs
        (``y``: ``(n, len(labels))``, NaN = not annotated)."""
        space = LabelSpace.of(labels, allow_unknown=True)
        n = len(reports)
        pr = self._per_model(self.report_model, self.report_labels, reports, n)
        pi = self._per_model(self.image_model, self.image_labels, images, n)
        grid = np.round(np.linspace(0, 1, 11), 2)
        for label in self.shared_labels:
            if label not in space:
                continue
            c, truth = self.classes_.index(label), y[:, [space.index(label)]]
            scores = [auroc(truth, (w * pr[:, c] + (1 - w) * pi[:, c])[:, None])[0] for w in grid]
            if not np.isnan(scores).all():
                self.weights[label] = float(grid[int(np.nanargmax(scores))])
        return self


def combine(
    report_model: Predictor, image_model: Predictor, weights: dict[str, float] | None = None
) -> CombinedLabeler:
    """One predictor over the union of a report model's and an image model's labels."""
    return CombinedLabeler(report_model, image_model, weights)
