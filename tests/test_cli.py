import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.simulate import main as simulate
from reportfed.cli import main
from reportfed.core.labels import CHEXPERT_14
from reportfed.data.table import CORPUS_COLUMNS, read_table

from .browser import render
from .conftest import ROOT


@pytest.fixture()
def env(monkeypatch, embeddings_cache, iu_embedded):  # type: ignore[no-untyped-def]
    """CLI runs share the session's embedding cache (IU embedded once)."""
    monkeypatch.setenv("REPORTFED_EMBEDDINGS_CACHE", str(embeddings_cache))
    return iu_embedded


def node_tables(tmp_path, iu_embedded):  # type: ignore[no-untyped-def]
    """Two sites: CheXpert spellings on one, NIH spellings (with an alias) on the other."""
    table, _ = iu_embedded
    cols = {n: i for i, n in enumerate(table.label_space)}
    a = pd.DataFrame(
        {
            "Reports": table.texts[:500],
            "Cardiomegaly": table.labels[:500, cols["Cardiomegaly"]],
            "Pleural Effusion": table.labels[:500, cols["Pleural Effusion"]],
        }
    )
    b = pd.DataFrame(
        {
            "text": table.texts[500:1000],
            "Effusion": table.labels[500:1000, cols["Pleural Effusion"]],
            "Atelectasis": table.labels[500:1000, cols["Atelectasis"]],
        }
    )
    a.to_csv(tmp_path / "a.csv", index=False)
    b.to_parquet(tmp_path / "b.parquet")
    return tmp_path / "a.csv", tmp_path / "b.parquet"


def test_corpus_iu_writes_table_and_counts(tmp_path, capsys, iu_archive) -> None:
    assert main(["corpus", "iu", "--out", str(tmp_path / "iu.csv")]) == 0
    frame = pd.read_csv(tmp_path / "iu.csv")
    # the 95 reports IU never indexed have no labels: left out, not written as blank cells
    # that --blank negative would train as negatives
    assert len(frame) == 3927 - 95 and list(frame.columns[-14:]) == list(CHEXPERT_14)
    assert frame[list(CHEXPERT_14)].notna().any(axis=1).all()
    err = capsys.readouterr().err
    assert "wrote 3832 IU reports" in err and "left out the 95 that IU never indexed" in err
    assert "Cardiomegaly" in err
    # its context columns are read as context by the table reader, not named as ignored
    table = read_table(tmp_path / "iu.csv")
    assert list(frame.columns[2:5]) == list(CORPUS_COLUMNS) and table.ignored_columns == ()


def test_embed_prints_throughput_of_new_texts_only(tmp_path, capsys, env) -> None:
    argv = [
        "embed",
        "--reports",
        str(ROOT / "examples" / "reports.csv"),
        "--cache-dir",
        str(tmp_path),
    ]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "6 reports -> 384-dim embeddings" in err
    assert "13 distinct sentences embedded" in err and "0 from the cache" in err
    assert main(argv) == 0  # warm: no throughput claimed over cache hits
    err = capsys.readouterr().err
    assert "0 distinct sentences embedded (nothing new to embed), 13 from the cache" in err


def test_train_from_node_tables_then_label_headerless_input(
    processes: None, tmp_path, capsys, env
) -> None:
    a, b = node_tables(tmp_path, env)
    model, metrics = tmp_path / "m.safetensors", tmp_path / "m.json"
    assert (
        main(
            [
                "train",
                "--node",
                str(a),
                "--node",
                str(b),
                "--rounds",
                "3",
                "--out",
                str(model),
                "--metrics",
                str(metrics),
                "--report",
                str(tmp_path / "report.html"),
            ]
        )
        == 0
    )
    summary = json.loads(metrics.read_text())
    assert summary["labels"] == ["Cardiomegaly", "Atelectasis", "Pleural Effusion"]
    # the run report, in a real browser: validation AUROC of every label by round, no console
    dom, console = render(tmp_path / "report.html", tmp_path / "report.png")
    assert console == [] and dom.count("<svg") == 3 and dom.count("<polyline") == 3
    assert "3 round(s)" in dom and all(f"{name}</td>" in dom for name in summary["labels"])
    err = capsys.readouterr().err
    assert "warning" not in err
    # the held-out quality, printed and stored
    assert "held-out rows" in err and "AUROC" in err
    held_out = summary["held_out"]
    assert list(held_out) == summary["labels"]
    assert "F1 at a threshold chosen on the training rows alone" in err
    for q in held_out.values():
        assert q["rows"] > 0 and 0 < q["positives"] < q["rows"] and 0.5 < q["auroc"] <= 1
        assert f"{q['auroc']:.3f}" in err and 0 <= q["f1_training_threshold"] <= 1
        # a figure resting on a handful of positives says so, in the JSON and the terminal
        assert (q["caveat"] is not None) == (q["positives"] < 10)
        assert q["caveat"] is None or q["caveat"] in err
    out = tmp_path / "labeled.csv"
    sample = tmp_path / "headerless.csv"  # the CheXpert labeler's input: one report per row
    sample.write_text(
        "Heart size is normal. No effusion\n"
        '"1. Small left effusion.\n\n2. Cardiomegaly."\n'
        '"Streaky bibasilar opacities, may reflect atelectasis or consolidation."\n'
        "Stable mild cardiomegaly.\n"
    )
    assert (
        main(
            [
                "label",
                "--reports",
                str(sample),
                "--model",
                str(model),
                "--out",
                str(out),
                "--probabilities",
                str(tmp_path / "p.csv"),
            ]
        )
        == 0
    )
    labeled = pd.read_csv(out)
    assert list(labeled.columns) == ["Reports", "Cardiomegaly", "Atelectasis", "Pleural Effusion"]
    states = labeled.iloc[:, 1:].to_numpy()
    assert len(labeled) == 4 and set(states[~np.isnan(states)]) <= {1.0, 0.0, -1.0}
    # "may reflect atelectasis or consolidation": uncertain, whatever the 3-round model says
    assert labeled.loc[2, "Atelectasis"] == -1.0 and np.isnan(labeled.loc[0, "Atelectasis"])
    probs = pd.read_csv(tmp_path / "p.csv")
    assert probs.iloc[:, 1:].to_numpy().max() <= 1.0


def test_reports_that_share_an_id_are_warned_about_and_told_apart(
    tmp_path, capsys, env, default_model
) -> None:  # type: ignore[no-untyped-def]
    reports = tmp_path / "r.csv"
    texts = ["Moderate cardiomegaly.", "No pneumothorax.", "Small left pleural effusion."]
    pd.DataFrame({"id": ["a", "b", "a"], "Reports": texts}).to_csv(reports, index=False)
    evidence = tmp_path / "e.csv"
    argv = ["label", "--reports", str(reports), "--out", str(tmp_path / "l.csv")]
    assert main([*argv, "--evidence", str(evidence)]) == 0
    err = capsys.readouterr().err
    assert "reportfed: warning: 1 report(s) share their id with another report" in err
    rows = pd.read_csv(evidence, keep_default_na=False)
    mentioned = rows[rows["source"] == "text"].set_index("label")
    assert mentioned.loc["Cardiomegaly", ["id", "row"]].tolist() == ["a", 1]
    assert mentioned.loc["Pleural Effusion", ["id", "row"]].tolist() == ["a", 3]
    # --no-text: ids and states only, in the outputs that copy the reports
    argv = ["label", "--reports", str(reports), "--out", str(tmp_path / "n.parquet"), "--no-text"]
    assert main([*argv, "--probabilities", str(tmp_path / "p.csv")]) == 0
    states, proba = pd.read_parquet(tmp_path / "n.parquet"), pd.read_csv(tmp_path / "p.csv")
    for table in (states, proba):
        assert "Reports" not in table and list(table.columns[:2]) == ["id", "No Finding"]
    with_text = pd.read_csv(tmp_path / "l.csv").drop(columns="Reports")
    pd.testing.assert_frame_equal(states, with_text, check_dtype=False)
    # an input without ids: each row of a --no-text output names its row in the input file
    # (the empty report of row 3 is skipped)
    pd.DataFrame({"Reports": [texts[0], "", *texts[1:]]}).to_csv(reports, index=False)
    argv = ["label", "--reports", str(reports), "--out", str(tmp_path / "rows.csv"), "--no-text"]
    assert main(argv) == 0
    assert pd.read_csv(tmp_path / "rows.csv")["file_row"].tolist() == [2, 4, 5]


def test_tiny_sites_are_warned_about_with_their_counts(tmp_path, capsys, env) -> None:
    """Two sites of four reports, every one labelled Edema 1: no negative to learn from. Their
    Pneumothorax column is blank on every row: left out, and said so once, not warned about."""
    texts = ["Mild pulmonary edema.", "No acute disease.", "Heart size normal.", "Clear lungs."]
    for name in ("a", "b"):
        pd.DataFrame({"Reports": texts, "Edema": [1.0] * 4, "Pneumothorax": [None] * 4}).to_csv(
            tmp_path / f"{name}.csv", index=False
        )
    out = ["--out", str(tmp_path / "m.safetensors"), "--metrics", str(tmp_path / "m.json")]
    nodes = ["--node", str(tmp_path / "a.csv"), "--node", str(tmp_path / "b.csv")]
    assert main(["train", *nodes, "--rounds", "1", *out]) == 0
    err = capsys.readouterr().err
    assert "'Edema' has 8 positive and 0 negative annotated rows" in err
    assert "not annotated on any row (left out): ['Pneumothorax']" in err
    assert "'Pneumothorax' has" not in err


def test_a_learning_rate_that_wrecks_training_is_warned_about(tmp_path, capsys, env) -> None:
    a, _ = node_tables(tmp_path, env)
    out = ["--out", str(tmp_path / "m.safetensors"), "--metrics", str(tmp_path / "m.json")]
    assert main(["train", "--node", str(a), "--rounds", "2", "--lr", "1e6", *out]) == 0
    err = capsys.readouterr().err
    assert "reportfed: warning: training did not converge" in err and "1e+06" in err
    assert "reportfed: warning: scores saturated" in err


def test_train_iu_simulation_writes_metrics(tmp_path, env) -> None:
    metrics = tmp_path / "m.json"
    assert (
        simulate(
            [
                "--nodes",
                "3",
                "--shared",
                "1",
                "--rounds",
                "2",
                "--out",
                str(tmp_path / "m.safetensors"),
                "--metrics",
                str(metrics),
            ]
        )
        == 0
    )
    summary = json.loads(metrics.read_text())
    assert summary["protocol"]["nodes"] == 3 and len(summary["node_labels"]) == 3
    # the papers' protocol: whole reports, their settings, recorded beside the metrics
    assert summary["protocol"]["granularity"] == "report" and summary["config"]["rounds"] == 2
    assert summary["config"]["local_epochs"] == 1 and summary["config"]["read"] is False
    assert 0.5 < summary["test_metrics"]["auroc"] <= 1.0
    assert "leakfree_accuracy" in summary["test_metrics"]


def test_label_with_the_default_model_built_on_first_use(
    processes: None, tmp_path, capsys, monkeypatch
) -> None:
    # an empty embedding cache, as on a user's first use: fp32 vectors depend slightly on the
    # texts they were batched with, so vectors other tests cached would move the scores
    monkeypatch.setenv("REPORTFED_EMBEDDINGS_CACHE", str(tmp_path / "embeddings"))
    out, evidence = tmp_path / "labeled.csv", tmp_path / "evidence.csv"
    reports = str(ROOT / "examples" / "reports.csv")
    # fp32 pinned: examples/evidence.csv was built in fp32, and "auto" picks bf16 on a CPU
    # with native bf16, whose model scores differ from fp32's by up to ~0.07
    command = ["label", "--reports", reports, "--out", str(out), "--evidence", str(evidence)]
    assert main([*command, "--precision", "fp32"]) == 0
    err = capsys.readouterr().err
    assert "building the default model" in err
    labeled = pd.read_csv(out)
    assert list(labeled.columns) == ["id", "Reports", *CHEXPERT_14] and len(labeled) == 6
    # the README's example: every report and every label right (four CheXpert states)
    expected = pd.read_csv(ROOT / "examples" / "labeled_reports.csv")
    pd.testing.assert_frame_equal(labeled, expected)
    # ... and the evidence the README shows for it; probabilities and scores move by up to ~0.03
    # between builds of the default model (vectors depend slightly on which texts are batched
    # together)
    got = pd.read_csv(evidence, keep_default_na=False)
    want = pd.read_csv(ROOT / "examples" / "evidence.csv", keep_default_na=False)
    numbers = ["probability", "score"]
    pd.testing.assert_frame_equal(got.drop(columns=numbers), want.drop(columns=numbers))
    np.testing.assert_allclose(got[numbers], want[numbers], atol=0.06)
    assert (
        main(["label", "--reports", str(ROOT / "examples" / "reports.csv"), "--out", str(out)]) == 0
    )
    assert "building" not in capsys.readouterr().err  # reused from the user cache
    # labelling, as a user starts it, imports neither torch nor scikit-learn (seconds of start-up)
    started = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "reportfed", *command, "--precision", "fp32"],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in started.stderr.splitlines()}
    assert "reportfed.reader" in imported and not imported & {"torch", "sklearn"}
    pd.testing.assert_frame_equal(pd.read_csv(out), expected)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"id,notes\n1,x\n", "no text column"),
        (b"", "the file is empty"),
        (b"text\n\xff\xfe report\n", "not UTF-8"),
        (b'text\n""\n', "no usable report text"),
    ],
)
def test_label_bad_reports_fail_cleanly(tmp_path, capsys, content: bytes, message: str) -> None:
    reports, out = tmp_path / "r.csv", tmp_path / "out.csv"
    reports.write_bytes(content)
    assert (
        main(
            [
                "label",
                "--reports",
                str(reports),
                "--model",
                str(tmp_path / "none"),
                "--out",
                str(out),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("reportfed: error:") and message in err[0]
    assert not out.exists()


def test_truncated_model_and_unusable_node_tables_fail_cleanly(tmp_path, capsys) -> None:
    (tmp_path / "m.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}")
    out = tmp_path / "out.csv"
    assert (
        main(
            [
                "label",
                "--reports",
                str(ROOT / "examples" / "reports.csv"),
                "--model",
                str(tmp_path / "m.safetensors"),
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert "not a" in capsys.readouterr().err and not out.exists()
    (tmp_path / "n.csv").write_text("text,Foo,Bar\nsome report,1,0\n")
    model = tmp_path / "new.safetensors"
    assert main(["train", "--node", str(tmp_path / "n.csv"), "--out", str(model)]) == 2
    assert "no label column matches a CheXpert or NIH-14 label" in capsys.readouterr().err
    assert not model.exists()


def test_outputs_that_would_clobber_inputs_or_a_directory_are_refused(tmp_path, capsys) -> None:
    reports = tmp_path / "in.csv"
    reports.write_text("id,Reports\nr1,No effusion.\n")
    (tmp_path / "dir").mkdir()
    cases = [
        (["label", "--reports", str(reports), "--out", str(reports)], "same file"),
        (["label", "--reports", str(reports), "--out", str(tmp_path / "dir")], "is a directory"),
        (
            ["label", "--reports", str(reports), "--out", "o.csv", "--probabilities", "./o.csv"],
            "same file",
        ),
        (["simulate", "--metrics", str(tmp_path / "dir")], "is a directory"),
        (["simulate", "--rounds", "0"], "rounds must be an integer >= 1"),
        (["simulate", "--val-fraction", "-0.5"], "val_fraction must be in [0, 1)"),
    ]
    for argv, message in cases:
        run = simulate if argv[0] == "simulate" else main
        assert run(argv[1:] if argv[0] == "simulate" else argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("reportfed: error:") and message in err and err.count("\n") == 1
    assert reports.read_text() == "id,Reports\nr1,No effusion.\n"


def test_a_replaced_output_keeps_its_mode_and_a_symlink_its_target(tmp_path) -> None:
    from reportfed.core.files import atomic_write

    private = tmp_path / "labels.csv"
    private.write_text("old")
    private.chmod(0o600)
    atomic_write(private, b"new")
    assert private.read_bytes() == b"new" and private.stat().st_mode & 0o777 == 0o600
    link = tmp_path / "link.csv"
    link.symlink_to(private)
    atomic_write(link, b"through the link")
    assert link.is_symlink() and private.read_bytes() == b"through the link"


def test_numerics_flags_are_arguments_and_the_environment_the_users_setting(
    tmp_path, monkeypatch
) -> None:
    """--precision/--backend travel as arguments: a command leaves the environment as it found
    it (main() called in process, as tests and notebooks do); $REPORTFED_PRECISION and
    $REPORTFED_BACKEND are the user's settings, which an argument overrides."""
    from reportfed.embed import shared_embedder
    from reportfed.reader import ReportReader

    monkeypatch.delenv("REPORTFED_PRECISION", raising=False)
    monkeypatch.setenv("REPORTFED_BACKEND", "torch")
    before = dict(os.environ)
    missing = ["label", "--reports", str(tmp_path / "none.csv"), "--out", str(tmp_path / "o.csv")]
    assert main([*missing, "--precision", "fp32", "--backend", "onnx"]) == 2
    assert dict(os.environ) == before
    monkeypatch.setenv("REPORTFED_PRECISION", "fp32")
    fp32 = shared_embedder()
    assert fp32.cache_key.endswith(":fp32")
    monkeypatch.setenv("REPORTFED_PRECISION", "bf16")
    assert shared_embedder() is not fp32 and shared_embedder().cache_key.endswith(":bf16")
    asked = ReportReader(precision="fp32")._embedder()  # the argument over the setting
    assert asked is fp32


def test_a_first_label_run_writes_only_where_the_readme_says(
    processes: None, tmp_path: Path
) -> None:
    """Real process, fresh HOME, no REPORTFED_CACHE_DIR: the README's first label command
    (building the default model) writes its output and the user cache (``~/.cache/reportfed``)
    and nothing else under HOME or the working folder: no library's telemetry (OpenVINO's
    ``~/intel``, onnxruntime's ``~/.cache/Microsoft``), nothing of Hugging Face's."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    (work / "examples").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "reports.csv", work / "examples")
    env = {k: v for k, v in os.environ.items() if k != "REPORTFED_CACHE_DIR"}
    env.update(HOME=str(home), REPORTFED_EMBEDDINGS_CACHE=str(tmp_path / "embeddings"))
    done = subprocess.run(
        ["reportfed", "label", "--reports", "examples/reports.csv"],
        cwd=work, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    written = sorted(
        str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
        if p.is_file() and not p.is_relative_to(tmp_path / "embeddings")
    )  # fmt: skip
    elsewhere = [
        p for p in written
        if not p.startswith("home/.cache/reportfed/")
        and p not in ("work/examples/reports.csv", "work/labeled_reports.csv")
    ]  # fmt: skip
    assert elsewhere == [], elsewhere
    assert "work/labeled_reports.csv" in written


def test_the_run_report_names_the_labels_it_cannot_draw(processes: None, tmp_path: Path) -> None:
    """A label whose validation rows hold one class has no AUROC to draw: the page says so
    instead of leaving it out without a word (in a real browser)."""
    from reportfed.pages.run_report import write_report

    history = [
        {
            "round": r,
            "seconds": 1.0,
            "bytes": {},
            "evaluation": {"auroc/Cardiomegaly": 0.8 + r / 100},
        }
        for r in (1, 2)
    ]
    provenance = {"federation": {"nodes": {"a": ["Cardiomegaly", "Edema"]}, "round": 2}}
    page = write_report(tmp_path / "run.html", history, provenance)
    dom, console = render(page, tmp_path / "run.png")
    assert console == [] and dom.count("<polyline") == 1
    assert "Not drawn: Edema. Their validation rows hold one class only" in dom
