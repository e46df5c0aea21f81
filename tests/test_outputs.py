"""What the CLI writes: the format each output's suffix names, and all outputs or none."""

from __future__ import annotations

import errno
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.simulate import main as simulate
from reportfed.cli import main
from reportfed.core.config import FederationConfig
from reportfed.labeler import ReportLabeler

from .conftest import ROOT
from .test_cli import node_tables

REPORTS = str(ROOT / "examples" / "reports.csv")


@pytest.fixture(scope="module")
def model(iu_embedded, embeddings_cache, tmp_path_factory) -> str:  # type: ignore[no-untyped-def]
    """A small model on 600 IU reports (the default model takes longer to build)."""
    table, _ = iu_embedded
    sub = table.subset(np.arange(600))
    labeler = ReportLabeler(
        config=FederationConfig(rounds=3), cache_dir=embeddings_cache, progress=False
    ).fit(sub.texts, sub.labels, list(sub.label_space))
    return str(labeler.save(tmp_path_factory.mktemp("model") / "m.safetensors"))


def label(model: str, *args: str) -> int:
    return main(["label", "--reports", REPORTS, "--model", model, *args])


@pytest.fixture(autouse=True)
def _cache(monkeypatch, embeddings_cache, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The session's embedding cache; relative paths land in the test's own folder."""
    monkeypatch.setenv("REPORTFED_EMBEDDINGS_CACHE", str(embeddings_cache))
    monkeypatch.chdir(tmp_path)


def test_each_suffix_writes_its_format_and_an_unknown_one_is_refused(
    model: str, tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    assert label(model, "--out", str(tmp_path / "a.csv")) == 0
    want = pd.read_csv(tmp_path / "a.csv")
    readers = {
        "b.tsv": lambda p: pd.read_csv(p, sep="\t"),
        "c.csv.gz": lambda p: pd.read_csv(p, compression="gzip"),
        "d.parquet": pd.read_parquet,
        "e.xlsx": pd.read_excel,
        "f": pd.read_csv,  # no suffix: CSV
    }
    for name, read in readers.items():
        assert label(model, "--out", str(tmp_path / name)) == 0
        pd.testing.assert_frame_equal(read(tmp_path / name), want, check_dtype=False)
    assert (tmp_path / "c.csv.gz").read_bytes()[:2] == b"\x1f\x8b"
    capsys.readouterr()
    assert label(model, "--out", str(tmp_path / "a.csv"), "--evidence", "e.json") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("reportfed: error: --evidence e.json")
    assert "'.json'" in err[0] and not Path("e.json").exists()


def test_label_writes_every_output_or_none(model: str, tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """The last output's write fails (a full disk): the earlier ones are not replaced."""
    outputs = {
        flag: tmp_path / f"{flag[2:]}.csv" for flag in ("--out", "--probabilities", "--evidence")
    }
    for path in outputs.values():
        path.write_text("old\n")
    real = pd.DataFrame.to_csv

    def to_csv(frame, path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if Path(getattr(path, "name", path)).name.startswith(".evidence.csv"):  # path or file
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(frame, path, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_csv", to_csv)
    argv = [arg for flag, path in outputs.items() for arg in (flag, str(path))]
    assert label(model, *argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        err[-1]
        == f"reportfed: error: {outputs['--evidence']}: cannot write (No space left on device)"
    )
    assert all(path.read_text() == "old\n" for path in outputs.values())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in outputs.values())


def test_train_writes_model_and_metrics_or_neither(
    iu_embedded, tmp_path, monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    a, b = node_tables(tmp_path, iu_embedded)
    model, metrics = tmp_path / "m.safetensors", tmp_path / "metrics.json"
    model.write_bytes(b"old model")
    metrics.write_text("old metrics")
    real = Path.write_bytes

    def write_bytes(path: Path, data: bytes) -> int:
        if path.name.startswith(".metrics.json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    argv = ["train", "--node", str(a), "--node", str(b), "--rounds", "2"]
    assert main([*argv, "--out", str(model), "--metrics", str(metrics)]) == 2
    assert "metrics.json: cannot write (No space left on device)" in capsys.readouterr().err
    assert model.read_bytes() == b"old model" and metrics.read_text() == "old metrics"


def test_bad_options_and_inputs_end_in_one_line(model: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    cases = [
        (["simulate", "--nodes", "0"], "--nodes must be at least 1, got 0"),
        (["simulate", "--shared", "20"], "--shared must be in [0, 13] (the labels), got 20"),
        (["label", "--reports", REPORTS, "--model", str(tmp_path)], "is a directory, not a model"),
    ]
    for argv, message in cases:
        if argv[0] == "simulate":
            assert simulate([*argv[1:], "--out", str(tmp_path / "o.safetensors")]) == 2
        else:
            assert main([*argv, "--out", str(tmp_path / "o.csv")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("reportfed: error:") and message in err and err.count("\n") == 1
    numbers = tmp_path / "r.csv"
    numbers.write_text("id,Reports\nr1,12345\nr2,3.14\nr3,Small left pleural effusion.\n")
    assert main(["label", "--reports", str(numbers), "--model", model, "--out", "o.csv"]) == 0
    assert "skipped 2 reports that are empty, missing or without a word" in capsys.readouterr().err
    assert pd.read_csv("o.csv")["id"].tolist() == ["r3"]


def test_a_site_whose_label_is_always_1_is_warned_about(iu_embedded, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    a, b = node_tables(tmp_path, iu_embedded)
    frame = pd.read_csv(a)
    frame["Cardiomegaly"] = 1.0
    frame.to_csv(a, index=False)
    out = tmp_path / "m.safetensors"
    assert (
        main(["train", "--node", str(a), "--node", str(b), "--rounds", "1", "--out", str(out)]) == 0
    )
    err = capsys.readouterr().err
    assert (
        f"reportfed: warning: site 'node0:{a.name}' labels 'Cardiomegaly' 1 on all its 500" in err
    )


def test_a_cell_that_starts_like_a_formula_is_written_as_text(tmp_path: Path) -> None:
    """OWASP's rule against CSV injection, in every spreadsheet format reportfed writes: a text
    cell starting with =, +, -, @, a tab or a carriage return gets a leading ', a number such as
    -1 stays a number, and so do the column names."""
    import openpyxl

    from reportfed.core.files import table_data, write_together

    frame = pd.DataFrame({"id": ["a", "b", "c"], "Reports": ["=1+1", "- no effusion", "@SUM(A1)"],
                          "=Edema": [-1.0, 1.0, 0.0]})  # fmt: skip
    paths = [tmp_path / "t.csv", tmp_path / "t.tsv", tmp_path / "t.xlsx"]
    write_together([(p, table_data(frame, p)) for p in paths])
    back = pd.read_csv(paths[0])
    assert list(back.columns) == ["id", "Reports", "'=Edema"]
    assert list(back["Reports"]) == ["'=1+1", "'- no effusion", "'@SUM(A1)"]
    assert list(back["'=Edema"]) == [-1.0, 1.0, 0.0]
    assert list(pd.read_csv(paths[1], sep="\t")["Reports"]) == list(back["Reports"])
    sheet = openpyxl.load_workbook(paths[2]).active
    assert [c.value for c in sheet[2]] == ["a", "'=1+1", -1]
    assert all(c.data_type != "f" for row in sheet.iter_rows() for c in row)
