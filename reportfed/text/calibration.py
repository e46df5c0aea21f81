"""A presence probability that has read the text: the model's score fused with the mentions.

A logistic regression (Platt scaling widened by the text's assertion) over five features of a
report and label:

* the model's logit (max pooled over sentences);
* four flags from the report's decisive mention of the label (:mod:`reportfed.text.assertion`):
  affirmed, negated, uncertain, and likely where an uncertain mention's hedge leans to present
  (:attr:`~reportfed.text.assertion.Mention.likely`: "atelectasis or scarring" against
  "cannot exclude pneumonia"; all 0 when the text does not name the finding).

It is fitted on the sites' validation rows (rows the model did not train on), over every
annotated (report, label) cell at once: the feature coefficients are shared by the labels
(a negation means the same for every finding) and each label has its own intercept, so that
rare labels, with a handful of validation positives, borrow strength from the others. The
``likely`` coefficient is fitted after the others, on the leaning cells alone, so that it moves
no probability but a leaning hedge's. A label
with no validation row keeps the model's score (the identity coefficients). A custom label has
no lexicon, so its flags are 0 and it is Platt-scaled.

Measured on IU (``benchmarks/labels_iu.py``, seeds 0-2, 306 validation reports): one regression
per label fitted its rare labels on a few positives and made the expected calibration error
worse than the model's (0.0128 against 0.0112); the shared regression improves macro AUROC
(0.963 to 0.970), Brier score (0.0219 to 0.0194) and ECE (0.0112 to 0.0107).

:func:`labelling_rules` chooses the labelling thresholds and fits this calibration, for the
in-process labeler and for each Flower node. A Flower federation fits one calibration per node on its held-out rows and the server averages
the coefficients over the nodes having the label, weighted by their annotated rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from reportfed.core.metrics import f1_thresholds, site_thresholds
from reportfed.text.assertion import Mention

#: the features, in coefficient order
FEATURES = ("logit", "affirmed", "negated", "uncertain", "likely")
#: a label's coefficients: one per feature, then the intercept
COEFFICIENTS = (*FEATURES, "intercept")
#: coefficients that return the model's score unchanged
IDENTITY = (1.0, 0.0, 0.0, 0.0, 0.0, 0.0)
#: annotated validation rows a label needs to be calibrated
MIN_ROWS = 20
#: L2 strength of the logistic fit (scikit-learn's ``C``; smaller is stronger)
C = 1.0
_FLAG = {"affirmed": 1, "negated": 2, "uncertain": 3}
_LIKELY = FEATURES.index("likely")
#: the largest ``likely`` coefficient fitted (a log-odds shift; within the bound a node may send)
_LEAN_BOUND = 10.0
_EPS = 1e-6


def identity_calibration(n_labels: int) -> np.ndarray:
    """``(n_labels, 6)`` coefficients that keep the model's scores."""
    return np.tile(np.asarray(IDENTITY), (n_labels, 1))


def calibration_features(
    scores: np.ndarray, mentions: Sequence[dict[str, Mention | None]], labels: Sequence[str]
) -> np.ndarray:
    """``(n, labels, 5)``: the logit of ``scores`` ``(n, labels)`` and each report's decisive
    mention flags (``mentions``: per report, label -> mention, as
    :func:`reportfed.text.assertion.decisive_mentions` gives them; a label absent is not mentioned)."""
    p = np.clip(np.asarray(scores, dtype=np.float64), _EPS, 1 - _EPS)
    out = np.zeros((*p.shape, len(FEATURES)))
    out[..., 0] = np.log(p / (1 - p))
    for i, found in enumerate(mentions):
        for c, name in enumerate(labels):
            mention = found.get(name)
            if mention is not None:
                out[i, c, _FLAG[mention.assertion]] = 1.0
                out[i, c, _LIKELY] = float(mention.likely)
    return out


def fit_calibration(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients ``(labels, 6)`` from features ``x`` ``(n, labels, 5)`` and truth ``y``
    ``(n, labels)`` (NaN = not annotated), and which labels were fitted (the others keep the
    identity: no annotated row, or fewer than :data:`MIN_ROWS` annotated cells or one class in
    all). One logistic regression over every annotated (report, label) cell: the feature
    coefficients are shared by the labels, the intercept is the label's own."""
    from sklearn.linear_model import LogisticRegression

    n_labels = y.shape[1]
    coef = identity_calibration(n_labels)
    known = ~np.isnan(y)
    fitted = known.any(axis=0)
    if known.sum() < MIN_ROWS or len(np.unique(y[known])) < 2:
        return coef, np.zeros(n_labels, dtype=bool)
    rows, labels = np.nonzero(known)
    cells, truth = x[rows, labels, :_LIKELY], y[rows, labels]
    model = LogisticRegression(C=C, max_iter=1000).fit(
        np.hstack([cells, np.eye(n_labels)[labels]]), truth
    )
    weights = model.coef_[0]
    coef[fitted, :_LIKELY] = weights[:_LIKELY]
    coef[fitted, -1] = model.intercept_[0] + weights[_LIKELY:][fitted]
    leaning = x[rows, labels, _LIKELY] == 1
    z = (cells[leaning] * coef[labels[leaning], :_LIKELY]).sum(axis=1) + coef[labels[leaning], -1]
    coef[fitted, _LIKELY] = _fit_lean(z, truth[leaning])
    return coef, fitted


def _fit_lean(z: np.ndarray, y: np.ndarray) -> float:
    """The ``likely`` coefficient: how far a leaning hedge's log-odds lie from an uncertain
    mention's, fitted (with the same L2 strength, :data:`C`) on the leaning cells' log-odds
    ``z`` under the other coefficients, which stay fixed: no probability but a leaning -1's
    moves, and no state reads a -1's probability. 0 without a leaning cell."""
    from scipy.optimize import minimize_scalar

    if not len(z):
        return 0.0
    sign = 2 * y - 1

    def loss(b: float) -> float:
        return float(np.logaddexp(0, -sign * (z + b)).sum() + b * b / (2 * C))

    return float(minimize_scalar(loss, bounds=(-_LEAN_BOUND, _LEAN_BOUND), method="bounded").x)


def calibrate(coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Calibrated probabilities ``(n, labels)`` (float32) of features ``x`` ``(n, labels, 5)``."""
    z = np.einsum("nlf,lf->nl", x, coef[:, :-1]) + coef[:, -1]
    return (1 / (1 + np.exp(-z))).astype(np.float32)


def labelling_thresholds(
    y: np.ndarray, p: np.ndarray, read: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """The thresholds a fitted model labels with, from its probabilities ``p`` on rows labelled
    ``y`` (NaN = not annotated): each label's best F1 over every annotated row; given ``read``
    (``y`` with the labels a site lacks as the text rules read its reports, and each row's
    site), each site's best on its own rows so labelled, averaged over the sites weighted by
    their positives (:func:`~reportfed.core.metrics.site_thresholds`). Each rule is
    docs/experiments.md's: the first raised leak-free F1 over the validation rows' thresholds at
    every number of sites, the second raised it over the first at 4, 6 and 8 sites that read
    and lowered it at none."""
    return f1_thresholds(y, p) if read is None else site_thresholds(read[0], p, read[1])


def labelling_rules(
    y: np.ndarray,
    p: np.ndarray,
    held: np.ndarray,
    mentions: Sequence[dict[str, Mention | None]] | None,
    labels: Sequence[str],
    read: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """What a fitted model labels with, from its probabilities ``p`` on rows labelled ``y``
    (NaN = not annotated): the thresholds (:func:`labelling_thresholds`, with ``read``) and the
    calibration fitted on the held-out rows ``held`` with their reports' ``mentions``
    (:func:`fit_calibration`, on what the sites annotate; ``None`` without mentions or held-out
    rows)."""
    thresholds = labelling_thresholds(y, p, read)
    if mentions is None or not len(held):
        return thresholds, None
    features = calibration_features(p[held], list(mentions), list(labels))
    return thresholds, fit_calibration(features, y[held])
