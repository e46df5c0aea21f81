"""Every yardstick of the text rules, for one engine, in one table: NegBio's OpenI gold standard
(real IU reports, expert labels; ``openi_gold.py``) and the three suites written for reportfed
(``tests/data``: behaviour, layouts, MIMIC-style), each on all its reports and on each half by
a fixed hash of the report's id (:func:`openi_gold.half`): rules are decided on half A, and
half B says whether a change generalizes.

An engine turns reports into the four states of the 13 CheXpert findings the rules read (No
Finding is derived from them, and left out here). ``rules`` is reportfed's; ``context`` is
medspaCy's ConText driven by reportfed's lexicon (``context_engine.py``), which runs only where
medspaCy installs (Python 3.11 pins it to spaCy 3.7 and NumPy 1, beside which pandas 3 cannot
install: a separate environment). On the suites the score is the share of cells right where the
rules decide (a cell the suite expects from the model alone, a finding the text does not name,
is wrong for every engine alike); on OpenI, F1 of state 1 against the gold's 1.

    python benchmarks/yardsticks.py [--engine rules] [--out benchmarks/results/yardsticks_rules.json]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from openi_gold import MAPPED, gold_reports, half, score

SUITES = Path(__file__).resolve().parents[1] / "tests" / "data"
SUITE_NAMES = ("behaviour", "layouts", "mimic_style")
RESULTS = Path(__file__).resolve().parent / "results"
#: the findings the rules read (CheXpert's 14 but No Finding)
FINDINGS = (
    "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion", "Edema",
    "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion",
    "Pleural Other", "Fracture", "Support Devices",
)  # fmt: skip
Engine = Callable[[Sequence[str]], np.ndarray]


def rules_engine(texts: Sequence[str]) -> np.ndarray:
    """reportfed's text rules: :func:`reportfed.text.states.rule_states`."""
    from reportfed.text.states import rule_states

    return rule_states(list(texts), list(FINDINGS))


def _text(state: float) -> str:
    return "" if np.isnan(state) else str(int(state))


def suite_scores(engine: Engine, name: str) -> dict[str, Any]:
    """Share of the suite's cells of :data:`FINDINGS` the engine gets right, all and per half,
    and the wrong cells."""
    suite = pd.read_csv(SUITES / f"{name}.csv", keep_default_na=False)
    states = engine(suite["report"].tolist())
    right = {"all": [0, 0], "A": [0, 0], "B": [0, 0]}
    wrong = []
    for i, (uid, expected) in enumerate(zip(suite["id"], suite["expected"], strict=True)):
        for cell in expected.split(";"):
            label, want = cell.split("=")
            if label not in FINDINGS:
                continue
            got = _text(states[i, FINDINGS.index(label)])
            for key in ("all", half(uid)):
                right[key][0] += got == want
                right[key][1] += 1
            if got != want:
                wrong.append(f"{uid} {label}: {want or 'blank'} -> {got or 'blank'}")
    return {
        **{k: {"right": r, "cells": n, "accuracy": r / n} for k, (r, n) in right.items()},
        "wrong": wrong,
    }


def openi_scores(engine: Engine, gold: pd.DataFrame) -> dict[str, Any]:
    """F1 of state 1 (and of 1 or -1) against the gold's 1, all and per half."""
    states = engine(gold["text"].tolist())
    mapped = states[:, [FINDINGS.index(c) for c in MAPPED]]
    out = {"all": score(mapped, gold)}
    for h in ("A", "B"):
        rows = (gold["half"] == h).to_numpy()
        out[h] = score(mapped[rows], gold[rows])
    return out


def yardsticks(engine: Engine) -> dict[str, Any]:
    """Every yardstick for ``engine``."""
    found: dict[str, Any] = {"openi": openi_scores(engine, gold_reports())}
    for name in SUITE_NAMES:
        found[name] = suite_scores(engine, name)
    return found


def table(results: dict[str, dict[str, Any]]) -> str:
    """One markdown table: a row per yardstick and half, a column per engine."""
    engines = list(results)
    lines = ["| yardstick | " + " | ".join(engines) + " |", "|---|" + "---:|" * len(engines)]
    for part in ("all", "A", "B"):
        cells = [f"{r['openi'][part]['macro F1 (state 1)']:.3f}" for r in results.values()]
        lines.append(f"| OpenI gold, macro F1 of state 1 ({part}) | " + " | ".join(cells) + " |")
    for name in SUITE_NAMES:
        for part in ("all", "A", "B"):
            cells = [f"{r[name][part]['accuracy']:.3f}" for r in results.values()]
            lines.append(f"| {name}, cells right ({part}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default="rules", choices=["rules", "context"])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.engine == "context":
        from context_engine import context_engine as engine
    else:
        engine = rules_engine
    found = yardsticks(engine)
    out = Path(args.out) if args.out else RESULTS / f"yardsticks_{args.engine}.json"
    out.write_text(json.dumps(found, indent=2) + "\n")
    print(table({args.engine: found}))


if __name__ == "__main__":
    main()
