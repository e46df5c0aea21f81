"""The rule that ties a state to its probability, on and off, on the same fitted labelers.

Per seed, the default recipe is trained on 80% of IU (``labels_iu.evaluate``) and the other 20%
are labelled twice from the same scores and mentions: without the rule (a finding the text does
not mention is 1 at ``score >= max(threshold, 0.5)``, the calibrated probability written as it
is) and with it (:mod:`reportfed.text.states`: the calibrated probability must be >= 0.5 too, and
the probability sits on its state's side of 0.5). Paired by construction: the arms differ only in
the rule.

    python benchmarks/states_rule.py [--seeds 0 1 2]

Writes ``benchmarks/results/states_rule.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from labels_iu import _macro, evaluate
from machine import machine, save_result
from sklearn.metrics import f1_score

from reportfed.text.calibration import calibrate, calibration_features
from reportfed.text.states import chexpert_states, consistent_proba, report_mentions

RESULTS = Path(__file__).resolve().parent / "results" / "states_rule.json"


def _f1(truth: np.ndarray, called: np.ndarray) -> float:
    return _macro(truth, called.astype(float), lambda t, p: f1_score(t, p, zero_division=0))


def arms(seed: int) -> dict[str, object]:
    """Both arms' metrics for one seed."""
    run = evaluate(seed)
    labeler, test = run["labeler"], run["test"]
    names = list(labeler.classes_)  # type: ignore[attr-defined]
    y = test.labels[:, test.label_space.indices(names)]  # type: ignore[attr-defined]
    scores = labeler.predict_scores(test.texts)  # type: ignore[attr-defined]
    found = report_mentions(test.texts, names)  # type: ignore[attr-defined]
    calibrated = calibrate(labeler.calibration_, calibration_features(scores, found, names))  # type: ignore[attr-defined]
    unmentioned = np.array([[f.get(n) is None for n in names] for f in found])
    row: dict[str, object] = {"seed": seed}
    for arm, gate in (("off", None), ("on", calibrated)):
        states = chexpert_states(
            test.texts,  # type: ignore[attr-defined]
            scores,
            names,
            labeler.thresholds_,  # type: ignore[attr-defined]
            found,
            gate,
        )
        proba = calibrated if gate is None else consistent_proba(calibrated, states)
        called = np.nan_to_num(states, nan=0.0) == 1
        wrong = ((states == 1) & (proba < 0.5)) | ((states == 0) & (proba > 0.5))
        row[arm] = {
            "f1_states": _f1(y, called),
            "contradictions": float(wrong.sum() / (~np.isnan(states)).sum()),
            "unmentioned_negatives_called_1": float(
                (called & unmentioned & (y == 0)).sum() / (unmentioned & (y == 0)).sum()
            ),
            "recall_states": {
                n: float(called[y[:, j] == 1, j].mean())
                for j, n in enumerate(names)
                if (y[:, j] == 1).any()
            },
        }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows = [arms(seed) for seed in args.seeds]
    for row in rows:
        print(json.dumps({k: v for k, v in row.items()}, indent=None)[:400], flush=True)
    result = {"machine": machine(), "rows": rows}
    save_result(args.out, result)


if __name__ == "__main__":
    main()
