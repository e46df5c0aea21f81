"""The default model on reports it never saw: the behaviour suite (tests/data/behaviour.csv,
written for reportfed), the CheXpert labeler's own samples, and long reports."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reportfed.labeler import ReportLabeler

from .conftest import shared_file

SUITE = Path(__file__).with_name("data") / "behaviour.csv"
#: share of right states per category, set from what the default model reaches (all 1.0 on
#: 2026-11-22) with room for a few reports
FLOORS = {
    "affirmed": 0.97,
    "negated": 0.97,
    "uncertain": 0.97,
    "not mentioned": 0.97,
    "opposite polarity": 0.97,
    "long, finding in impression": 0.97,
}


@pytest.fixture(scope="module")
def default_labeler(embeddings_cache) -> ReportLabeler:  # type: ignore[no-untyped-def]
    from reportfed.default_model import load_default_model

    labeler = load_default_model(cache_dir=embeddings_cache, say=lambda _: None)
    labeler.progress = False
    return labeler


def _same(got: float, want: str) -> bool:
    return bool(np.isnan(got)) if want == "" else got == float(want)


def test_behaviour_suite_floors(default_labeler: ReportLabeler) -> None:
    suite = pd.read_csv(SUITE, keep_default_na=False)
    assert len(suite) >= 400 and set(suite["category"]) == set(FLOORS)
    states = default_labeler.predict_states(list(suite["report"]))
    names = list(default_labeler.classes_)
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for i, (category, expected) in enumerate(
        zip(suite["category"], suite["expected"], strict=True)
    ):
        for pair in expected.split(";"):
            label, want = pair.split("=")
            right[category] += _same(states[i, names.index(label)], want)
            total[category] += 1
    shares = {c: right[c] / total[c] for c in total}
    assert all(shares[c] >= FLOORS[c] for c in FLOORS), shares


def test_the_chexpert_labelers_own_samples(default_labeler: ReportLabeler) -> None:
    expected = pd.read_csv(shared_file("chexpert-labeler-format", "labeled_reports.csv"))
    got = default_labeler.predict_states(list(expected["Reports"]))
    names = list(default_labeler.classes_)
    want = expected[names].to_numpy(dtype=float)
    np.testing.assert_array_equal(got, want)


def test_a_finding_late_in_a_long_report_is_read(default_labeler: ReportLabeler) -> None:
    filler = "The trachea is midline and the visualized osseous structures are unremarkable. "
    head = filler * 25  # ~300 word pieces before the impression
    short = default_labeler.predict_proba([head + "IMPRESSION: No pneumothorax."])
    long = default_labeler.predict_proba([head + "IMPRESSION: Large right pneumothorax."])
    col = list(default_labeler.classes_).index("Pneumothorax")
    assert long[0, col] > 0.5 > short[0, col]
    states = default_labeler.predict_states([head + "IMPRESSION: Large right pneumothorax."])
    assert states[0, col] == 1.0
