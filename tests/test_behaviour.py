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
LAYOUTS = Path(__file__).with_name("data") / "layouts.csv"
#: share of right states per layout (tests/data/make_layout_suite.py), set from what the default
#: model reaches (all 1.0 on 2026-11-24; before section scope followed the layout, "mimic
#: paragraphs" was 0.0) with room for a few reports
LAYOUT_FLOOR = 0.95
#: share of right states per category: the categories of templates, set from what the default
#: model reaches (all 1.0) with room for a few reports, and the families of phrasings, which the
#: text decides, at all of them
FLOORS = {
    "affirmed": 0.97,
    "negated": 0.97,
    "uncertain": 0.97,
    "not mentioned": 0.97,
    "opposite polarity": 0.97,
    "long, finding in impression": 0.97,
    "lesion phrasings": 1.0,
    "pneumothorax phrasings": 1.0,
    "pleural other phrasings": 1.0,
    "hedges after the finding": 1.0,
    "alternatives": 1.0,
    "devices removed": 1.0,
    "structured fields": 1.0,
    "addenda": 1.0,
    "vascular prominence": 1.0,
    "mediastinal prominence": 1.0,
    "partial resolution": 1.0,
    "densities": 1.0,
    "invisible characters": 1.0,
    "coordinated clauses": 1.0,
    "other languages": 1.0,
    "history is not a finding": 1.0,
    "if any": 1.0,
    "caveat after a negation": 1.0,
    "seen finding, hedged cause": 1.0,
    "normal-range size": 1.0,
    "lesions and collapse by other names": 1.0,
    "hardware is not a fracture": 1.0,
    "no finding named": 1.0,
    "invisible characters, round three": 1.0,
    "ideographic stops": 1.0,
    "telegraphic English": 1.0,
    "bilingual reports": 1.0,
}


def _same(got: float, want: str) -> bool:
    return bool(np.isnan(got)) if want == "" else got == float(want)


def test_behaviour_suite_floors(default_labeler: ReportLabeler) -> None:
    suite = pd.read_csv(SUITE, keep_default_na=False)
    assert len(suite) >= 400 and set(suite["category"]) == set(FLOORS)
    shares = _shares(default_labeler, suite, "category")
    assert all(shares[c] >= FLOORS[c] for c in FLOORS), shares


def _shares(labeler: ReportLabeler, suite: pd.DataFrame, group: str) -> dict[str, float]:
    """Per group, the share of judged (report, label) states the labeler gets right."""
    states = labeler.predict_states(list(suite["report"]))
    names = list(labeler.classes_)
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for i, (key, expected) in enumerate(zip(suite[group], suite["expected"], strict=True)):
        for pair in expected.split(";"):
            label, want = pair.split("=")
            right[key] += _same(states[i, names.index(label)], want)
            total[key] += 1
    return {k: right[k] / total[k] for k in total}


def test_layout_suite_floors(default_labeler: ReportLabeler) -> None:
    suite = pd.read_csv(LAYOUTS, keep_default_na=False)
    assert len(suite) >= 200 and suite["layout"].nunique() >= 10
    shares = _shares(default_labeler, suite, "layout")
    assert all(v >= LAYOUT_FLOOR for v in shares.values()), shares


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        (
            "FINAL REPORT\nPORTABLE CHEST\n\nREASON FOR EXAM: Shortness of breath.\n\n"
            "Moderate left pleural effusion has increased. No pneumothorax. The heart is enlarged.",
            {"Pleural Effusion": 1.0, "Pneumothorax": 0.0, "Cardiomegaly": 1.0},
        ),
        (
            "REASON FOR EXAMINATION: Assess for effusion.\n\nNo evidence of pleural effusion. "
            "Heart size top normal.",
            {"Pleural Effusion": 0.0, "Cardiomegaly": 0.0},
        ),
        ("INDICATION: Assess for effusion.", {"Pleural Effusion": np.nan}),
    ],
)
def test_findings_after_a_context_paragraph_are_read(
    default_labeler: ReportLabeler, report: str, expected: dict[str, float]
) -> None:
    states = default_labeler.predict_states([report])[0]
    names = list(default_labeler.classes_)
    got = {label: states[names.index(label)] for label in expected}
    np.testing.assert_array_equal(list(got.values()), list(expected.values()))


def test_evidence_names_the_sentence_and_cue_behind_each_state(
    default_labeler: ReportLabeler,
) -> None:
    reports = [
        "FINDINGS: Heart size is normal. The left costophrenic angle is blunted, possibly from a "
        "small effusion.\n\nIMPRESSION: No pneumothorax.",
        "Increased density in the lingula.",
    ]
    evidence = default_labeler.predict_evidence(reports, ids=["a", "b"])
    states = default_labeler.predict_states(reports)
    names = list(default_labeler.classes_)
    # one row per report and non-blank state, in report then label order, equal to the states
    expected = [(rid, n) for rid, row in zip("ab", states, strict=True)
                for n, v in zip(names, row, strict=True) if not np.isnan(v)]  # fmt: skip
    assert list(zip(evidence["id"], evidence["label"], strict=True)) == expected
    rows = evidence.set_index(["id", "label"])
    assert tuple(rows.loc[("a", "Cardiomegaly"), ["state", "cue", "source"]]) == (
        0.0,
        "normal",
        "text",
    )
    effusion = rows.loc[("a", "Pleural Effusion")]
    assert (effusion["state"], effusion["cue"]) == (-1.0, "possibly")
    assert effusion["sentence"].startswith("The left costophrenic angle is blunted")
    assert tuple(rows.loc[("a", "Pneumothorax"), ["state", "cue"]]) == (0.0, "No")
    proba = default_labeler.predict_proba(reports)
    np.testing.assert_allclose(
        [rows.loc[(r, n), "probability"] for r, n in expected],
        [proba["ab".index(r), names.index(n)] for r, n in expected],
        rtol=1e-6,
    )
    model_rows = evidence[evidence["source"] == "model"]
    assert set(model_rows["sentence"]) <= {"Increased density in the lingula."}


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


def test_a_report_of_50000_sentences_is_labelled(default_labeler: ReportLabeler) -> None:
    """Scale: a 50,000-sentence report (the splitter was quadratic; such a report never
    finished) is labelled, its one positive finding and one negation read where they stand."""
    filler = [
        "The trachea is midline.",
        "Heart size is normal.",
        "The visualized osseous structures are unremarkable, Dr. Smith noted approx. 3.5 cm.",
        "No focal airspace consolidation.",
    ]
    body = " ".join(filler[i % len(filler)] for i in range(49_998))
    report = f"FINDINGS: {body} Small left pleural effusion. No pneumothorax."
    names = list(default_labeler.classes_)
    (states,) = default_labeler.predict_states([report])
    got = {name: states[names.index(name)] for name in ("Pleural Effusion", "Pneumothorax")}
    assert got == {"Pleural Effusion": 1.0, "Pneumothorax": 0.0}


def test_states_never_contradict_their_probability(
    default_labeler: ReportLabeler, iu_archive
) -> None:  # type: ignore[no-untyped-def]
    """On every report of both suites and of IU: a state 1 has probability >= 0.5 (also where
    the model alone called it, and No Finding's), a state 0 has probability <= 0.5."""
    from reportfed.data.iu import load_iu

    texts = [
        *pd.read_csv(SUITE, keep_default_na=False)["report"],
        *pd.read_csv(LAYOUTS, keep_default_na=False)["report"],
        *load_iu(iu_archive).texts,
    ]
    read = default_labeler.annotate(texts, evidence=True)
    assert read.evidence is not None and len(texts) > 4000
    assert not ((read.states == 1) & (read.proba < 0.5)).any()
    assert not ((read.states == 0) & (read.proba > 0.5)).any()
    model = read.evidence[read.evidence["source"].isin(["model", "rule"])]
    assert len(model) and (model.loc[model["state"] == 1, "probability"] >= 0.5).all()


def test_a_report_with_nothing_to_read_gets_no_state(
    default_labeler: ReportLabeler, tmp_path, capsys, monkeypatch, embeddings_cache
) -> None:  # type: ignore[no-untyped-def]
    """Headers alone, and a report in another language, are not called No Finding: they get no
    state, and ``reportfed label`` names them in one warning."""
    from reportfed.cli import main

    texts = [
        "FINDINGS:\n\nIMPRESSION:",
        "Derrame pleural derecho moderado. No hay neumotórax.",
        "Heart size is normal. The lungs are clear.",
    ]
    read = default_labeler.annotate(texts, evidence=False)
    assert read.unreadable == [0, 1]
    assert np.isnan(read.states[:2]).all()
    assert read.states[2, list(default_labeler.classes_).index("No Finding")] == 1
    reports, model = tmp_path / "r.csv", default_labeler.save(tmp_path / "m.safetensors")
    pd.DataFrame({"id": ["h", "es", "en"], "Reports": texts}).to_csv(reports, index=False)
    monkeypatch.setenv("REPORTFED_EMBEDDINGS_CACHE", str(embeddings_cache))
    argv = ["label", "--reports", str(reports), "--model", str(model)]
    assert main([*argv, "--out", str(tmp_path / "out.csv")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-2] == (
        "reportfed: warning: 2 report(s) say nothing the labeler can read (only section "
        "headers, or not English), so they have no state (ids h, es)"
    )
    assert err[-1].startswith("labelled 3 reports in ")
