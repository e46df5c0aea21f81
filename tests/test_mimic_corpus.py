"""``reportfed corpus mimic`` on a MIMIC-CXR stand-in in PhysioNet's published layout
(tests/data/make_mimic_fixture.py; never real MIMIC text), as users type it, and the sections
the MIMIC-CXR authors' parser defines."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reportfed.core.labels import CHEXPERT_14
from reportfed.data.mimic import load_mimic, report_sections, section_text
from reportfed.data.table import read_table
from reportfed.text.lexicon import Lexicon
from tests.data.make_mimic_fixture import write_fixture

from .conftest import ROOT


def corpus(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``reportfed corpus mimic ...`` in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "reportfed", "corpus", "mimic", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )


@pytest.fixture(scope="module")
def fixture_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    root = tmp_path_factory.mktemp("mimic")
    return root, write_fixture(root, 60)


def test_corpus_mimic_writes_the_labelled_sections_and_their_states(
    processes: None, fixture_root: tuple[Path, dict], tmp_path: Path
) -> None:
    root, made = fixture_root
    done = corpus("--root", str(root), "--out", "mimic.csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    last = done.stderr.strip().splitlines()
    assert (
        "wrote 58 MIMIC-CXR reports (chexpert labels, labelled sections) to mimic.csv; left "
        "out: 2 reports without a label row, 3 labelled studies without a report, and it is a "
        "stand-in (STAND-IN.txt), not MIMIC-CXR" in done.stderr
    )
    assert any(line.split()[:2] == ["Pleural", "Effusion"] for line in last)
    frame = pd.read_csv(tmp_path / "mimic.csv", dtype={"id": str})
    assert list(frame.columns) == ["id", "Reports", *CHEXPERT_14]
    truth = {row["study_id"]: row for row in made["chexpert"]}
    for _, row in frame.iterrows():
        for name in CHEXPERT_14:
            want = truth[row["id"]][name]
            assert (np.isnan(row[name]) and want == "") or row[name] == float(want), (row, name)
    # the impression was read where there is one; the indication line never is
    assert not frame["Reports"].str.contains("//").any()
    states = frame[list(CHEXPERT_14)].to_numpy()
    assert set(np.unique(states[~np.isnan(states)])) == {1.0, 0.0, -1.0}
    # a site table the trainer reads as it reads any: -1 by --uncertain, blank by --blank
    table = read_table(tmp_path / "mimic.csv")
    assert len(table.texts) == 58 and not np.isnan(table.labels).any()


def test_corpus_mimic_adds_the_findings_a_hospital_defines_as_the_rules_read_them(
    processes: None, fixture_root: tuple[Path, dict], tmp_path: Path
) -> None:
    from reportfed.text.findings import read_findings
    from reportfed.text.states import rule_states

    root, _ = fixture_root
    example = ROOT / "examples" / "findings.toml"
    done = corpus("--root", str(root), "--out", "m.csv", "--labels", "Edema", "--findings",
                  str(example), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    frame = pd.read_csv(tmp_path / "m.csv", dtype={"id": str})
    found = read_findings(example)
    assert list(frame.columns) == ["id", "Reports", "Edema", *found.names]
    expected = rule_states(frame["Reports"].tolist(), list(found.names), Lexicon(found))
    np.testing.assert_array_equal(frame[list(found.names)].to_numpy(np.float32), expected)
    assert any(line.split()[:2] == ["Hiatal", "hernia"] for line in done.stderr.splitlines())


def test_split_labeler_sections_sample(
    processes: None, fixture_root: tuple[Path, dict], tmp_path: Path
) -> None:
    root, made = fixture_root
    test_studies = {r["study_id"] for r in made["split"] if r["split"] == "test"}
    done = corpus("--root", str(root), "--out", "t.csv", "--split", "test", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ids = set(pd.read_csv(tmp_path / "t.csv", dtype={"id": str})["id"])
    assert ids and ids <= test_studies and "reports of other splits" in done.stderr
    # NegBio's file, the whole report, and a reproducible draw of a few
    done = corpus(
        "--root", str(root), "--out", "n.parquet", "--labeler", "negbio", "--sections",
        "report", "--sample", "7", "--seed", "3", "--labels", "Edema,Pleural Effusion",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    frame = pd.read_parquet(tmp_path / "n.parquet")
    assert list(frame.columns) == ["id", "Reports", "Edema", "Pleural Effusion"]
    assert len(frame) == 7 and frame["Reports"].str.contains("FINAL REPORT").any()
    assert not (frame["Edema"] == -1.0).any()  # NegBio leaves the fixture's hedged edema blank
    again = corpus(
        "--root", str(root), "--out", "again.parquet", "--labeler", "negbio", "--sections",
        "report", "--sample", "7", "--seed", "3", "--labels", "Edema,Pleural Effusion",
        cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == 0
    pd.testing.assert_frame_equal(frame, pd.read_parquet(tmp_path / "again.parquet"))


def test_the_reports_zip_reads_as_the_tree(fixture_root: tuple[Path, dict], tmp_path: Path) -> None:
    root, _ = fixture_root
    zipped = tmp_path / "physionet" / "mimic-cxr"  # the files one folder below the root
    write_fixture(zipped, 60, as_zip=True)
    assert not (zipped / "files").exists()
    tree = load_mimic(root, sections="findings-impression")
    from_zip = load_mimic(tmp_path / "physionet", sections="findings-impression")
    assert tree.ids == from_zip.ids and tree.texts == from_zip.texts
    np.testing.assert_array_equal(tree.labels, from_zip.labels)
    assert any(t.startswith("FINDINGS: ") and "\n\nIMPRESSION: " in t for t in tree.texts)


def _error(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert lines[-1].startswith("reportfed: error: "), done.stderr
    return lines[-1]


def test_wrong_inputs_end_in_one_error_line(processes: None, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no mimic-cxr-2.0.0-chexpert.csv.gz" in _error(
        corpus("--root", str(empty), "--out", "x.csv", cwd=tmp_path)
    )
    assert "no such folder" in _error(
        corpus("--root", str(tmp_path / "nowhere"), "--out", "x.csv", cwd=tmp_path)
    )
    assert "needs --root" in _error(corpus("--out", "x.csv", cwd=tmp_path))
    # a label file without a column, and one that is not gzip
    broken = tmp_path / "broken"
    write_fixture(broken, 12)
    labels = broken / "mimic-cxr-2.0.0-chexpert.csv.gz"
    frame = pd.read_csv(labels, dtype=str)
    with gzip.open(labels, "wt") as f:
        frame.drop(columns="Edema").to_csv(f, index=False)
    assert "no column 'Edema'" in _error(
        corpus("--root", str(broken), "--out", "x.csv", cwd=tmp_path)
    )
    labels.write_text(frame.to_csv(index=False))
    assert "not a gzip file" in _error(
        corpus("--root", str(broken), "--out", "x.csv", cwd=tmp_path)
    )
    (broken / "mimic-cxr-2.0.0-chexpert.csv.gz").unlink()
    (broken / "mimic-cxr-2.0.0-split.csv.gz").unlink()
    broken_negbio = ("--labeler", "negbio", "--split", "test")
    assert "no mimic-cxr-2.0.0-split.csv.gz" in _error(
        corpus("--root", str(broken), "--out", "x.csv", *broken_negbio, cwd=tmp_path)
    )
    assert not (tmp_path / "x.csv").exists()  # outputs all or none


def test_sections_as_the_mimic_cxr_authors_parser_defines_them() -> None:
    report = (
        "FINAL REPORT\n EXAMINATION:  CHEST (PA AND LAT)\n \n INDICATION:  ___M with cough. // ?PNA\n"
        " \n FINDINGS:  No focal consolidation.\n \n IMPRESSIONS:  No acute process.\n"
    )
    found = report_sections(report)
    assert (
        found["impression"] == "No acute process."
        and found["findings"] == "No focal consolidation."
    )
    assert found["preamble"] == "FINAL REPORT" and found["indication"] == "___M with cough. // ?PNA"
    assert section_text(report) == "No acute process."
    assert section_text(report.replace("IMPRESSIONS:  No acute process.\n", "")) == (
        "No focal consolidation."
    )
    assert section_text("CONCLUSION: Small effusion.") == "Small effusion."
    # no header at all: the last paragraph, as the labels were read
    assert section_text("Heart normal.\n \nNo pneumothorax.") == "No pneumothorax."
    assert section_text("") == ""


def _fresh(tmp_path: Path) -> tuple[Path, dict]:  # type: ignore[type-arg]
    root = tmp_path / "mimic"
    return root, write_fixture(root, 30)


def _rewrite_labels(root: Path, edit) -> None:  # type: ignore[no-untyped-def]
    path = root / "mimic-cxr-2.0.0-chexpert.csv.gz"
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    edit(frame).to_csv(path, index=False, compression="gzip")


def test_a_study_labelled_twice_is_refused_naming_it_and_its_lines(
    processes: None, tmp_path: Path
) -> None:
    """A label file that repeats a study's row (concatenated, exported again) used to shift
    every later study's labels by one; the join is by study id, and a repeat is refused."""
    root, _ = _fresh(tmp_path)
    _rewrite_labels(root, lambda f: pd.concat([f.iloc[:5], f.iloc[[2]], f.iloc[5:]]))
    study = pd.read_csv(root / "mimic-cxr-2.0.0-chexpert.csv.gz", dtype=str)["study_id"][2]
    done = corpus("--root", str(root), "--out", "m.csv", cwd=tmp_path)
    assert done.returncode == 2 and not (tmp_path / "m.csv").exists()
    assert done.stderr.strip().splitlines()[-1] == (
        f"reportfed: error: {root / 'mimic-cxr-2.0.0-chexpert.csv.gz'}: study {study} is "
        "labelled twice (line 7, and line 4); one row a study: remove the repeated rows"
    )


def test_labels_join_their_reports_by_study_id_whatever_the_rows_order_or_s(
    tmp_path: Path,
) -> None:
    root, made = _fresh(tmp_path)
    _rewrite_labels(
        root,
        lambda f: f.iloc[::-1].assign(study_id=lambda g: "s" + g["study_id"]),
    )
    table = load_mimic(root)
    truth = {row["study_id"]: row for row in made["chexpert"]}  # type: ignore[index]
    for study, states in zip(table.ids, table.labels, strict=True):
        expected = [truth[study][c] for c in CHEXPERT_14]
        want = [1.0 if v == "1.0" else 0.0 for v in expected]  # zeros, negative: the defaults
        np.testing.assert_array_equal(states, want)


def test_a_linked_folder_an_oversized_and_an_unreadable_report_are_named_not_doubled(
    processes: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = _fresh(tmp_path)
    groups = sorted((root / "files").iterdir())
    (root / "files" / "p99").symlink_to(groups[0], target_is_directory=True)  # every study twice
    big = next(groups[-1].glob("*/*.txt"))
    with big.open("r+b") as f:
        f.truncate(2 << 20)  # a report of 2 MiB, mostly zeros: never read whole
    before = corpus("--root", str(root), "--out", "m.csv", cwd=tmp_path)
    assert before.returncode == 0, before.stderr
    assert "reports reached twice (a linked folder or a repeated id)" in before.stderr
    assert f"1 report files over 1 MiB (first: {big})" in before.stderr
    frame = pd.read_csv(tmp_path / "m.csv", dtype={"id": str})
    assert frame["id"].is_unique and big.stem[1:] not in set(frame["id"])
    # a report the reader may not open (root reads everything, so the failure is made here)
    from reportfed.data import mimic

    victim = next(p for p in sorted(groups[0].glob("*/*.txt")) if p != big)
    real = Path.read_text

    def refuse(path: Path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if path == victim:
            raise PermissionError(13, "Permission denied")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", refuse)
    counts = mimic.MimicCounts()
    kept = list(mimic.iter_mimic(root, counts=counts))
    assert counts.unreadable == 1 and counts.first_unreadable == f"{victim} (Permission denied)"
    assert victim.stem[1:] not in {study for study, _, _ in kept}


def test_an_empty_result_says_whether_the_ids_or_the_split_left_nothing(
    processes: None, tmp_path: Path
) -> None:
    root, _ = _fresh(tmp_path)
    _rewrite_labels(root, lambda f: f.assign(study_id=lambda g: "9" + g["study_id"]))
    done = corpus("--root", str(root), "--out", "m.csv", cwd=tmp_path)
    assert (
        done.stderr.strip().splitlines()[-1].startswith(f"reportfed: error: {root}: none of its ")
    )
    assert "study ids is in the label file" in done.stderr
    root2, _ = _fresh(tmp_path / "two")
    split = root2 / "mimic-cxr-2.0.0-split.csv.gz"
    frame = pd.read_csv(split, dtype=str)
    frame.assign(split="train").to_csv(split, index=False, compression="gzip")
    done = corpus("--root", str(root2), "--out", "m.csv", "--split", "test", cwd=tmp_path)
    assert done.stderr.strip().splitlines()[-1] == (
        f"reportfed: error: {root2}: no labelled report is in the test split "
        "(mimic-cxr-2.0.0-split.csv.gz)"
    )
