"""What decides each cell of a label: the text rules, a hospital's correction, or the model.

``reportfed label`` reads every finding a sentence names by the text rules and lets the model
decide the rest: a finding no sentence names becomes 1 where the model's calibrated score is
high enough (docs/labels.md, "State"). This counts, per yardstick and finding, the cells each
source decides and how many of them are right, and then the ablation: the text rules alone
(the model never calls a finding), the model alone (state 1 where its score reaches the stored
threshold, blank elsewhere) and both as shipped, each as macro F1 of state 1 over the findings
with a reference positive.

Labelers (``ARMS``):

* ``default``: the model ``reportfed label`` uses. It is trained on every IU report, so on the
  two IU yardsticks it has read the text (never the OpenI gold labels);
* ``K=1``, ``K=3``, ``K=10``: the shipped labeler (``ReportLabeler``'s defaults, as ``reportfed
  train`` and a federation build it) trained on IU's fully annotated reports of half A
  (:func:`openi_gold.half`), split as the experiments split them: IID rows, the 14 labels
  dealt out over the sites with none shared (:func:`~reportfed.data.partition.split_labels`,
  seed 0; each site reads the labels it lacks from its text), ``K=1`` one site with every row
  and label.

Yardsticks, each scored on text the ``K`` labelers never trained on:

* ``openi``: NegBio's OpenI gold standard on half B (the 8 mapped findings, gold 1 against
  anything else);
* ``mesh``: IU's MeSH-derived labels of half B's fully annotated reports (13 findings);
* ``behaviour``, ``layouts``, ``mimic_style``: the suites of ``tests/data`` (their expected
  four-state cells; the rules were written to them, so they say little of generalizing).

A cell is right when its state 1 matches a reference 1 (OpenI, MeSH) or its four-state value
matches the suite's. Writes ``--out`` (JSON; no report text).

    python benchmarks/decision_sources.py [--arms default K=1 K=3 K=10] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from machine import machine
from openi_gold import MAPPED, gold_reports, half
from yardsticks import FINDINGS, SUITE_NAMES, SUITES

from reportfed.core.files import atomic_write
from reportfed.core.labels import CHEXPERT_14, LabelSpace
from reportfed.data.iu import load_iu
from reportfed.data.partition import iid_rows, split_labels
from reportfed.labeler import ReportLabeler
from reportfed.text.states import rule_states

RESULTS = Path(__file__).resolve().parent / "results" / "decision_sources.json"
ARMS = ("default", "K=1", "K=3", "K=10")
SOURCES = ("text", "correction", "model")


@dataclass
class Yardstick:
    """Reports and their reference: ``truth`` holds, per finding of ``findings``, 1.0/0.0
    (``binary``) or the suite's four-state text (``""`` blank, NaN where the suite says
    nothing of the cell)."""

    name: str
    texts: list[str]
    findings: list[str]
    truth: np.ndarray
    binary: bool

    @property
    def positive(self) -> np.ndarray:
        """Per cell, whether the reference says 1."""
        return np.asarray(self.truth == (1 if self.binary else "1"), dtype=bool)


def iu_halves() -> tuple[Any, Any]:
    """IU's fully annotated reports: (half A, half B)."""
    table = load_iu().fully_annotated()
    halves = np.array([half(uid) for uid in table.ids])
    return table.subset(np.flatnonzero(halves == "A")), table.subset(np.flatnonzero(halves == "B"))


def yardsticks(test: Any) -> list[Yardstick]:
    """Every yardstick of the module docstring (``test``: IU's half B)."""
    gold = gold_reports()
    gold = gold[gold["half"] == "B"]
    found = [
        Yardstick(
            "openi",
            gold["text"].tolist(),
            list(MAPPED),
            gold[list(MAPPED)].to_numpy(dtype=np.float32),
            True,
        )
    ]
    names = [f for f in FINDINGS if f in test.label_space]
    y = test.labels[:, test.label_space.indices(names)]
    found.append(Yardstick("mesh", list(test.texts), names, y, True))
    for name in SUITE_NAMES:
        suite = pd.read_csv(SUITES / f"{name}.csv", keep_default_na=False)
        truth = np.full((len(suite), len(FINDINGS)), np.nan, dtype=object)
        for i, expected in enumerate(suite["expected"]):
            for cell in expected.split(";"):
                label, want = cell.split("=")
                if label in FINDINGS:
                    truth[i, FINDINGS.index(label)] = want
        found.append(Yardstick(name, suite["report"].tolist(), list(FINDINGS), truth, False))
    return found


def _text(state: float) -> str:
    return "" if np.isnan(state) else str(int(state))


def _right(states: np.ndarray, stick: Yardstick) -> np.ndarray:
    """Per cell: whether ``states`` matches the reference (False where there is none)."""
    if stick.binary:
        return (np.nan_to_num(states, nan=0.0) == 1) == stick.positive
    text = np.vectorize(_text, otypes=[object])(states)
    return np.array(text == stick.truth, dtype=bool)


def _scored(stick: Yardstick) -> np.ndarray:
    """The cells the yardstick says something of."""
    if stick.binary:
        return np.ones(stick.truth.shape, dtype=bool)
    return np.array([[isinstance(v, str) for v in row] for row in stick.truth], dtype=bool)


def macro_f1(states: np.ndarray, stick: Yardstick) -> float:
    """Macro F1 of state 1 against the reference's 1, over the findings with a positive."""
    scored, called = _scored(stick), np.nan_to_num(states, nan=0.0) == 1
    positive = stick.positive
    f1s = []
    for j in range(len(stick.findings)):
        rows, truth = scored[:, j], positive[:, j]
        tp = int((called[rows, j] & truth[rows]).sum())
        if not truth[rows].any():
            continue
        wrong = int((called[rows, j] != truth[rows]).sum())
        f1s.append(2 * tp / (2 * tp + wrong))
    return float(np.mean(f1s))


def _sources(
    labeler: ReportLabeler, texts: Sequence[str], findings: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """The shipped states of ``findings`` and each cell's source (``""`` blank)."""
    names = list(labeler.classes_)
    read = labeler.annotate(texts, evidence=True)
    assert read.evidence is not None
    source = np.full((len(texts), len(names)), "", dtype=object)
    evidence = read.evidence
    source[evidence["row"].to_numpy() - 1, [names.index(n) for n in evidence["label"]]] = evidence[
        "source"
    ].to_numpy()
    cols = [names.index(f) for f in findings]
    return read.states[:, cols], source[:, cols]


def measure(labeler: ReportLabeler, stick: Yardstick) -> dict[str, Any]:
    """Decision sources and the ablation of ``labeler`` on ``stick``."""
    names = list(labeler.classes_)
    cols = [names.index(f) for f in stick.findings]
    shipped, source = _sources(labeler, stick.texts, stick.findings)
    rules = rule_states(stick.texts, stick.findings, labeler.lexicon_)
    alone = labeler.predict(stick.texts)[:, cols]
    model = np.where(alone == 1, np.float32(1.0), np.float32(np.nan))
    right, scored, positives = _right(shipped, stick), _scored(stick), stick.positive
    per: dict[str, Any] = {}
    for j, finding in enumerate(stick.findings):
        rows = scored[:, j]
        counts: dict[str, Any] = {
            "scored": int(rows.sum()),
            "positives": int(positives[rows, j].sum()),
        }
        for name in (*SOURCES, ""):
            cells = rows & (source[:, j] == name)
            counts[name or "blank"] = {
                "cells": int(cells.sum()),
                "right": int((cells & right[:, j]).sum()),
                "called 1": int((cells & (shipped[:, j] == 1)).sum()),
            }
        per[finding] = counts
    return {
        "reports": len(stick.texts),
        "states": shipped,
        "findings": per,
        "macro F1 (state 1)": {
            "rules alone": macro_f1(rules, stick),
            "model alone": macro_f1(model, stick),
            "shipped": macro_f1(shipped, stick),
        },
    }


def trained(k: int, train: Any) -> ReportLabeler:
    """The shipped labeler trained on ``train`` split over ``k`` sites (module docstring)."""
    rng = np.random.default_rng(0)
    labels = LabelSpace(tuple(CHEXPERT_14))
    site = np.empty(len(train), dtype=int)
    for s, rows in enumerate(iid_rows(len(train), k, rng)):
        site[rows] = s
    spaces = split_labels(labels, k, 0, rng) if k > 1 else [labels]
    y = np.full(train.labels.shape, np.nan, dtype=np.float32)
    for s, space in enumerate(spaces):
        rows, cols = np.flatnonzero(site == s), labels.indices(space)
        y[np.ix_(rows, cols)] = train.labels[np.ix_(rows, cols)]
    nodes = [f"site{s}" for s in site]
    return ReportLabeler(progress=False).fit(train.texts, y, list(labels), nodes=nodes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    train, test = iu_halves()
    sticks = yardsticks(test)
    arms: dict[str, Any] = {}
    for arm in args.arms:
        start = time.perf_counter()
        if arm == "default":
            from reportfed.default_model import load_default_model

            labeler = load_default_model().set_params(progress=False)
        else:
            labeler = trained(int(arm.split("=")[1]), train)
        found = {stick.name: measure(labeler, stick) for stick in sticks}
        arms[arm] = {"seconds": time.perf_counter() - start, "yardsticks": found}
        print(arm, json.dumps({s: v["macro F1 (state 1)"] for s, v in found.items()}))
    if "K=1" in arms:  # what federating changes in the cells a user receives
        for found in arms.values():
            for name, one in found["yardsticks"].items():
                base = arms["K=1"]["yardsticks"][name]["states"]
                same = (one["states"] == base) | (np.isnan(one["states"]) & np.isnan(base))
                one["cells differing from K=1"] = int((~same).sum())
    for found in arms.values():
        for one in found["yardsticks"].values():
            del one["states"]
    result = {
        "machine": machine(),
        "train reports": len(train),
        "test reports": len(test),
        "arms": arms,
    }
    atomic_write(args.out, json.dumps(result, indent=1).encode())


if __name__ == "__main__":
    main()
