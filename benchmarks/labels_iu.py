"""The default labelling recipe on IU reports it never saw, and how fast it labels.

Per seed: IU's fully annotated reports (14 labels, MeSH-derived) are split 80/20; the 80% train
a labeler the way the default model is built (two sites, sentence level, thresholds for F1 on
the sites' validation rows); on the 20%:

* ``auroc``: macro AUROC of the presence probabilities (calibrated with the mentions), and
  ``auroc_model`` of the model's scores before calibration;
* ``brier`` / ``ece``: macro Brier score and expected calibration error of the probabilities,
  and ``brier_model`` / ``ece_model`` of the model's scores;
* ``f1_model``: macro F1 of the positives at the model's thresholds alone;
* ``f1_states``: macro F1 of state 1 (the four states: the text's mentions first, then the model);
* ``f1_mentioned``: macro F1 of state 1 or -1 (the finding found at all, hedged or not);
* ``contradictions``: cells whose state and probability disagree (state 1 below 0.5, state 0
  above 0.5), of all cells with a state;
* ``recall_states``: per label, the share of positives whose state is 1.

Then labelling throughput (reports/s of ``predict_states``, embedding included) on 1,000 test
reports with a cold embedding cache, and again warm. Writes ``--out`` (JSON).

    python benchmarks/labels_iu.py [--seeds 0 1 2] [--out benchmarks/results/labels_iu.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from machine import machine
from sklearn.metrics import brier_score_loss, f1_score, roc_auc_score

from reportfed.core.files import atomic_write
from reportfed.core.labels import CHEXPERT_14
from reportfed.core.metrics import expected_calibration_error
from reportfed.data.iu import load_iu
from reportfed.embed import shared_embedder
from reportfed.labeler import ReportLabeler

RESULTS = Path(__file__).resolve().parent / "results" / "labels_iu.json"


def _macro(y: np.ndarray, score: np.ndarray, metric) -> float:  # type: ignore[no-untyped-def]
    """Mean of ``metric`` over the labels with both classes among the annotated rows."""
    values = []
    for j in range(y.shape[1]):
        known = ~np.isnan(y[:, j])
        if len(set(y[known, j])) == 2:
            values.append(metric(y[known, j], score[known, j]))
    return float(np.mean(values))


def _ece(y: np.ndarray, p: np.ndarray) -> float:
    return float(expected_calibration_error(y[:, None], p[:, None])[0])


def evaluate(seed: int) -> dict[str, object]:
    """Train on 80% of IU with ``seed``, score the other 20%."""
    table = load_iu().fully_annotated()
    order = np.random.default_rng(seed).permutation(len(table))
    cut = int(0.8 * len(table))
    train, test = table.subset(order[:cut]), table.subset(order[cut:])
    sites = [f"site{i % 2}" for i in range(len(train))]
    labeler = ReportLabeler(progress=False).fit(
        train.texts, train.labels, list(CHEXPERT_14), nodes=sites
    )
    names = list(labeler.classes_)
    y = test.labels[:, test.label_space.indices(names)]
    read = labeler.annotate(test.texts, evidence=False)
    proba, states, scores = read.proba, read.states, labeler.predict_scores(test.texts)
    model = (scores >= labeler.thresholds_).astype(float)
    positive = np.nan_to_num(states, nan=0.0) == 1
    mentioned = np.isin(states, (1.0, -1.0))
    contradicting = ((states == 1) & (proba < 0.5)) | ((states == 0) & (proba > 0.5))
    recall = {
        name: float(positive[y[:, j] == 1, j].mean())
        for j, name in enumerate(names)
        if (y[:, j] == 1).any()
    }
    return {
        "seed": seed,
        "test_reports": len(test),
        "auroc": _macro(y, proba, roc_auc_score),
        "auroc_model": _macro(y, scores, roc_auc_score),
        "brier": _macro(y, proba, brier_score_loss),
        "brier_model": _macro(y, scores, brier_score_loss),
        "ece": _macro(y, proba, _ece),
        "ece_model": _macro(y, scores, _ece),
        "f1_model": _macro(y, model, lambda t, p: f1_score(t, p, zero_division=0)),
        "f1_states": _macro(
            y, positive.astype(float), lambda t, p: f1_score(t, p, zero_division=0)
        ),
        "f1_mentioned": _macro(
            y, mentioned.astype(float), lambda t, p: f1_score(t, p, zero_division=0)
        ),
        "contradictions": float(contradicting.sum() / (~np.isnan(states)).sum()),
        "recall_states": recall,
        "labeler": labeler,
        "test": test,
    }


def throughput(labeler: ReportLabeler, texts: list[str]) -> dict[str, float]:
    """Reports/s of ``predict_states`` with a cold embedding cache, then warm."""
    with tempfile.TemporaryDirectory() as cache:
        labeler.cache_dir = cache
        out = {}
        for run in ("cold", "warm"):
            start = time.perf_counter()
            labeler.predict_states(texts)
            out[f"{run}_reports_per_s"] = len(texts) / (time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--throughput-reports", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    runs = [evaluate(seed) for seed in args.seeds]
    last = runs[-1]
    labeler: ReportLabeler = last["labeler"]  # type: ignore[assignment]
    speed = throughput(last["labeler"], last["test"].texts[: args.throughput_reports])  # type: ignore[union-attr,index]
    rows = [{k: v for k, v in r.items() if k not in ("labeler", "test")} for r in runs]
    summary = {
        key: [float(np.mean([r[key] for r in rows])), float(np.std([r[key] for r in rows], ddof=1))]
        for key in (
            "auroc",
            "auroc_model",
            "brier",
            "brier_model",
            "ece",
            "ece_model",
            "f1_model",
            "f1_states",
            "f1_mentioned",
            "contradictions",
        )
    }
    labels = rows[0]["recall_states"].keys()  # type: ignore[union-attr]
    recall = {name: float(np.mean([r["recall_states"][name] for r in rows])) for name in labels}  # type: ignore[index]
    result = {
        "machine": machine(),
        "embedder": shared_embedder(labeler.embedder, labeler.base_url).cache_key,
        "runs": rows,
        "mean_sd": summary,
        "recall_states": recall,
        "throughput": speed,
    }
    atomic_write(args.out, json.dumps(result, indent=1).encode())
    print(json.dumps({"mean_sd": summary, "recall_states": recall, "throughput": speed}, indent=1))


if __name__ == "__main__":
    main()
