"""The default model on the MIMIC-style suite (``tests/data/mimic_style.csv``, written for
reportfed): the share of the 14 CheXpert cells of each report it gets right, overall and per
family of idioms, the wrong cells, and F1 of each of the four states over every cell (a state's
F1 treats it as the positive class among the four). ``tests/test_mimic_style.py`` holds the
families' floors with the same :func:`judge`; docs/labels.md renders the committed results.

    python benchmarks/mimic_style.py [--out benchmarks/results/mimic_style.json]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

SUITE = Path(__file__).resolve().parents[1] / "tests" / "data" / "mimic_style.csv"
#: the four states as the suite writes them: positive, negated, uncertain, not mentioned
STATES = ("1", "0", "-1", "")


def _text(state: float) -> str:
    return "" if np.isnan(state) else str(int(state))


def judge(labeler: Any, suite: pd.DataFrame) -> dict[str, Any]:
    """Cell accuracy per family and overall, the wrong cells and F1 of each state."""
    states = labeler.predict_states(list(suite["report"]))
    names = list(labeler.classes_)
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    pairs: list[tuple[str, str]] = []
    for i, (family, expected) in enumerate(zip(suite["family"], suite["expected"], strict=True)):
        for cell in expected.split(";"):
            label, want = cell.split("=")
            got = _text(states[i, names.index(label)])
            pairs.append((want, got))
            right[family] += got == want
            total[family] += 1
    f1 = {}
    for s in STATES:
        tp = sum(w == s and g == s for w, g in pairs)
        wrong_either = sum((w == s) != (g == s) for w, g in pairs)
        f1[s or "blank"] = 2 * tp / (2 * tp + wrong_either) if tp + wrong_either else 1.0
    wrong = sum(w != g for w, g in pairs)
    return {
        "reports": len(suite),
        "cells": len(pairs),
        "wrong": wrong,
        "accuracy": 1 - wrong / len(pairs),
        "f1": f1,
        "families": {k: right[k] / total[k] for k in total},
    }


def main() -> None:
    from machine import machine

    from reportfed.core.files import atomic_write
    from reportfed.default_model import load_default_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="benchmarks/results/mimic_style.json")
    args = parser.parse_args()
    labeler = load_default_model()
    labeler.progress = False
    found = {"machine": machine(), **judge(labeler, pd.read_csv(SUITE, keep_default_na=False))}
    atomic_write(args.out, (json.dumps(found, indent=2) + "\n").encode())
    print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
