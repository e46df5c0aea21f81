"""Per-label and macro metrics, the paper's metric and its leak-free counterpart.

All functions take ``y`` with NaN for not-annotated entries (masked per label) and probabilities
``p`` of the same shape. A label whose evaluated entries are all one class has NaN AUROC and is
left out of macro averages (``nanmean``).

* **paper**: per label, the threshold maximising Youden's J on the evaluated set itself, accuracy at
  that threshold, averaged over labels (the metric of the papers' code; it sees the test labels).
* **leak-free**: per-label thresholds chosen for F1 on a validation split
  (:func:`f1_thresholds`, the thresholds a labeler labels with), then applied to the test set.
* **prevalence**: accuracy of always predicting each label's majority class on the test set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from reportfed.core.errors import ConfigError

# sklearn is imported where it is used: importing it costs ~0.7 s of CPU, which a Flower node
# would pay in every ClientApp process (one a message), most of which evaluate nothing


#: held-out positives below which a label's AUROC and F1 say little: shown with a caveat
FEW_POSITIVES = 10


def _columns(y: np.ndarray, p: np.ndarray):
    if y.shape != p.shape:
        raise ConfigError(f"labels {y.shape} and probabilities {p.shape} differ in shape")
    for c in range(y.shape[1]):
        keep = ~np.isnan(y[:, c])
        yield y[keep, c], p[keep, c]


def _two_classes(y: np.ndarray) -> bool:
    return y.size > 0 and 0 < y.sum() < y.size


def auroc(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Per-label AUROC (NaN where a label has one class only)."""
    from sklearn.metrics import roc_auc_score

    return np.array(
        [roc_auc_score(yc, pc) if _two_classes(yc) else np.nan for yc, pc in _columns(y, p)]
    )


def youden_thresholds(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Per-label threshold maximising sensitivity + specificity - 1 (0.5 where undefined)."""
    from sklearn.metrics import roc_curve

    out = []
    for yc, pc in _columns(y, p):
        if not _two_classes(yc):
            out.append(0.5)
            continue
        fpr, tpr, thr = roc_curve(yc, pc)
        out.append(float(min(thr[int(np.argmax(tpr - fpr))], 1.0)))
    return np.array(out)


def f1_thresholds(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Per-label threshold maximising F1 of ``p >= threshold`` (the labelling thresholds):
    halfway between the lowest score called positive and the next one; 0.5 for a label without
    positives."""
    out = []
    for yc, pc in _columns(y, p):
        if not (yc == 1).any():
            out.append(0.5)
            continue
        order = np.argsort(-pc, kind="stable")
        scores, hits = pc[order], np.cumsum(yc[order] == 1)
        f1 = 2 * hits / (np.arange(1, len(pc) + 1) + hits[-1])
        k = int(np.argmax(f1))
        nxt = scores[k + 1] if k + 1 < len(scores) else scores[k] / 2
        out.append(float((scores[k] + nxt) / 2))
    return np.array(out)


def matched_thresholds(p: np.ndarray, prevalence: np.ndarray) -> np.ndarray:
    """Per-label threshold calling the share ``prevalence`` of the rows of ``p`` positive, so a
    label's rate of positive calls matches its prevalence (no label of ``p``'s rows is needed):
    halfway between the lowest score called positive and the next one."""
    out = []
    for pc, q in zip(np.asarray(p).T, prevalence, strict=True):
        scores = np.sort(pc)[::-1]
        k = round(float(q) * len(scores))
        if k == 0:  # none called: just above the highest score
            out.append(float(np.nextafter(scores[0], np.inf)) if len(scores) else 0.5)
        elif k >= len(scores):
            out.append(float(scores[-1]) / 2)
        else:
            out.append(float(scores[k - 1] + scores[k]) / 2)
    return np.array(out)


def accuracy_at(y: np.ndarray, p: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Per-label accuracy of ``p >= threshold``."""
    return np.array(
        [
            np.mean((pc >= t) == (yc == 1)) if yc.size else np.nan
            for (yc, pc), t in zip(_columns(y, p), thresholds, strict=True)
        ]
    )


def f1_at(y: np.ndarray, p: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Per-label F1 of ``p >= threshold`` (NaN where a label has no positives)."""
    out = []
    for (yc, pc), t in zip(_columns(y, p), thresholds, strict=True):
        pos = yc == 1
        if not pos.any():
            out.append(np.nan)
            continue
        pred = pc >= t
        tp = float(np.sum(pred & pos))
        out.append(2 * tp / (pred.sum() + pos.sum()))
    return np.array(out)


#: equal-width probability bins of :func:`expected_calibration_error`
ECE_BINS = 10


def expected_calibration_error(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Per-label ECE: over :data:`ECE_BINS` equal-width bins of ``p``, the row-weighted mean of
    ``|mean(p) - share of positives|`` in each bin."""
    out = []
    for yc, pc in _columns(y, p):
        if not yc.size:
            out.append(np.nan)
            continue
        bins = np.minimum((pc * ECE_BINS).astype(int), ECE_BINS - 1)
        gap = sum(
            abs(pc[bins == b].mean() - yc[bins == b].mean()) * np.sum(bins == b)
            for b in np.unique(bins)
        )
        out.append(gap / yc.size)
    return np.array(out)


def prevalence_accuracy(y: np.ndarray) -> np.ndarray:
    """Per-label accuracy of always predicting the majority class."""
    return np.array(
        [max(yc.mean(), 1 - yc.mean()) if yc.size else np.nan for yc, _ in _columns(y, y)]
    )


def label_metrics(
    y_test: np.ndarray,
    p_test: np.ndarray,
    *,
    thresholds: np.ndarray | None = None,
    rules: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Per-label metrics (arrays over the columns): ``paper_accuracy``, ``auroc``,
    ``prevalence_accuracy``, ``f1_ceiling`` (F1 at the thresholds best on the test rows
    themselves: what no threshold chosen elsewhere can beat, so the gap between it and
    ``leakfree_f1`` is what better thresholds could buy) and, given validation ``thresholds``,
    ``leakfree_accuracy`` and ``leakfree_f1``; ``rules`` names more thresholds (other ways of
    choosing them, e.g. :func:`matched_thresholds`), each giving ``<name>_f1``. Every metric is
    NaN for a label that has one class only in ``y_test``."""
    auc = auroc(y_test, p_test)
    valid = ~np.isnan(auc)
    out = {
        "paper_accuracy": accuracy_at(y_test, p_test, youden_thresholds(y_test, p_test)),
        "auroc": auc,
        "prevalence_accuracy": prevalence_accuracy(y_test),
        "f1_ceiling": f1_at(y_test, p_test, f1_thresholds(y_test, p_test)),
    }
    if thresholds is not None:
        out["leakfree_accuracy"] = accuracy_at(y_test, p_test, thresholds)
        out["leakfree_f1"] = f1_at(y_test, p_test, thresholds)
    for name, rule in (rules or {}).items():
        out[f"{name}_f1"] = f1_at(y_test, p_test, rule)
    return {k: np.where(valid, v, np.nan) for k, v in out.items()}


def evaluate(
    y_test: np.ndarray, p_test: np.ndarray, *, thresholds: np.ndarray | None = None
) -> dict[str, float]:
    """Macro averages of :func:`label_metrics` over the labels that have both classes in
    ``y_test``: the paper's metrics and, given validation ``thresholds``, the leak-free ones."""
    per_label = label_metrics(y_test, p_test, thresholds=thresholds)
    return {k: float(np.nanmean(v)) for k, v in per_label.items()}


def node_mean(
    per_node: Iterable[tuple[str, float, np.ndarray]],
) -> dict[str, tuple[float, np.ndarray]]:
    """Per label, the nodes' values averaged weighted by their rows (the Flower engine's
    statistic for AUROC, thresholds and calibrations: no node's scores leave it). Each item is
    one node's ``(label, rows, values)``; items with no rows or a value that is not finite are
    left out. Returns label -> (total rows, weighted mean of the values)."""
    sums: dict[str, tuple[float, np.ndarray]] = {}
    for label, rows, values in per_node:
        values = np.asarray(values, dtype=np.float64)
        if rows <= 0 or not np.isfinite(values).all():
            continue
        n, total = sums.get(label, (0.0, np.zeros_like(values)))
        sums[label] = (n + rows, total + rows * values)
    return {label: (n, total / n) for label, (n, total) in sums.items()}


def site_thresholds(y: np.ndarray, p: np.ndarray, sites: np.ndarray) -> np.ndarray:
    """Per label, each site's best-F1 threshold on its own rows (:func:`f1_thresholds` of ``y``
    and ``p``; each row's site in ``sites``), averaged over the sites weighted by the site's
    positives of the label (:func:`node_mean`: what a Flower node sends its server, a threshold
    and a count); 0.5 where no site has a positive."""
    per_site = []
    for site in np.unique(sites):
        mine = sites == site
        positives = (y[mine] == 1).sum(axis=0)
        chosen = f1_thresholds(y[mine], p[mine])
        per_site += [(str(c), float(positives[c]), chosen[c : c + 1]) for c in range(y.shape[1])]
    means = node_mean(per_site)
    return np.array([means[str(c)][1][0] if str(c) in means else 0.5 for c in range(y.shape[1])])
