"""Hugging Face datasets in and out (reportfed.data.hf), as users type it: ``reportfed label``
reading a ``save_to_disk`` folder, a folder of Parquet shards and a dataset of the local hub
cache, writing one back (``--format hf``), ``corpus iu|mimic --format hf`` and
``label_dataset``; every process offline (``HF_DATASETS_OFFLINE=1``, ``HF_HUB_OFFLINE=1``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reportfed.data.hf import datasets_cache
from reportfed.data.table import iter_reports, read_table
from tests.data.make_mimic_fixture import write_fixture

from .conftest import ROOT

datasets = pytest.importorskip("datasets")

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
#: reports of examples/reports.csv and two a table skips (empty, a number)
REPORTS = pd.read_csv(ROOT / "examples" / "reports.csv")


def reportfed(*argv: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``reportfed ...`` in its own process, offline."""
    return subprocess.run(
        [sys.executable, "-m", "reportfed", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **OFFLINE, **env},
        timeout=600,
    )


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    return done.stderr.strip().splitlines()[-1]


def two_splits() -> datasets.DatasetDict:
    """examples/reports.csv as a DatasetDict: four reports to train, two and a blank to test,
    with a column of the hospital's own beside the report."""
    frame = REPORTS.assign(site=["north"] * 3 + ["south"] * 3)
    blank = pd.DataFrame({"id": ["r7"], "Reports": ["12345"], "site": ["south"]})
    return datasets.DatasetDict(
        train=datasets.Dataset.from_pandas(frame.iloc[:4], preserve_index=False),
        test=datasets.Dataset.from_pandas(pd.concat([frame.iloc[4:], blank]), preserve_index=False),
    )


def states_of(frame: pd.DataFrame, names: list[str]) -> np.ndarray:
    return frame[names].to_numpy(dtype=np.float64)


def test_label_reads_a_saved_dataset_and_writes_one_whose_labels_are_the_tables(
    processes: None, default_model: Path, tmp_path: Path
) -> None:
    two_splits().save_to_disk(str(tmp_path / "reports"))
    done = reportfed("label", "--reports", "reports", "--out", "labels.csv", cwd=tmp_path)
    assert done.returncode == 2
    assert last_line(done) == (
        "reportfed: error: reports: a dataset with splits ['train', 'test']: choose one (--split)"
    )
    tables = {}
    for split in ("train", "test"):
        done = reportfed(
            "label", "--reports", "reports", "--split", split, "--out", f"{split}.csv", cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        tables[split] = pd.read_csv(tmp_path / f"{split}.csv")
    done = reportfed(
        "label", "--reports", "reports", "--format", "hf", "--out", "labelled", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "-> labelled (a Hugging Face dataset, splits train, test)" in last_line(done)
    labelled = datasets.load_from_disk(str(tmp_path / "labelled"))
    names = [c for c in tables["train"].columns if c not in ("id", "Reports")]
    assert list(labelled) == ["train", "test"]
    for split, table in tables.items():
        part = labelled[split]
        assert part.column_names == ["id", "Reports", "site", *names]  # the input's columns kept
        assert all(part.features[n] == datasets.Value("float32") for n in names)
        frame = part.to_pandas()
        kept = frame[frame["Reports"] != "12345"]  # the table skips a report without a word
        assert kept["id"].tolist() == table["id"].tolist()
        assert np.array_equal(states_of(kept, names), states_of(table, names), equal_nan=True)
    assert labelled["test"].to_pandas().set_index("id").loc["r7", names].isna().all()
    embedded = reportfed("embed", "--reports", "reports", "--split", "test", cwd=tmp_path)
    assert embedded.returncode == 0, embedded.stderr
    assert last_line(embedded).startswith("2 reports -> 384-dim embeddings")
    assert "skipped 1 empty or wordless reports" in last_line(embedded)
    # the same labels as the committed example output, the README's table
    expected = pd.read_csv(ROOT / "examples" / "labeled_reports.csv")
    both = pd.concat([labelled[s].to_pandas() for s in ("train", "test")])
    both = both[both["id"] != "r7"].reset_index(drop=True)
    assert np.array_equal(states_of(both, names), states_of(expected, names), equal_nan=True)


def test_a_dataset_with_columns_named_as_findings_takes_a_prefix_and_outputs_stay_apart(
    processes: None, default_model: Path, tmp_path: Path
) -> None:
    reports = datasets.Dataset.from_pandas(REPORTS.assign(Edema=[0.0] * 6), preserve_index=False)
    reports.save_to_disk(str(tmp_path / "reports"))
    done = reportfed("label", "--reports", "reports", "--format", "hf", "--out", "x", cwd=tmp_path)
    assert done.returncode == 2 and last_line(done).startswith(
        "reportfed: error: the dataset has columns named as the model's findings (Edema): "
        "put the label columns under a prefix"
    )
    assert not (tmp_path / "x").exists()
    inside = reportfed(
        "label", "--reports", "reports", "--format", "hf", "--out", "reports/out", cwd=tmp_path
    )
    assert last_line(inside) == (
        "reportfed: error: --out reports/out would write over or inside --reports"
    )
    over = reportfed("label", "--reports", "reports", "--format", "hf", "--out", ".", cwd=tmp_path)
    assert "would write over or inside --reports" in last_line(over)
    table = reportfed(
        "label", "--reports", "reports", "--split", "test", "--out", "y.csv", cwd=tmp_path
    )
    assert last_line(table) == (
        "reportfed: error: reports: one dataset without splits; leave out --split"
    )
    done = reportfed(
        "label", "--reports", "reports", "--format", "hf", "--prefix", "reportfed ", "--out",
        "labelled", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    labelled = datasets.load_from_disk(str(tmp_path / "labelled"))
    assert labelled["Edema"] == [0.0] * 6  # the input's column, untouched
    assert labelled["reportfed Edema"][5] == 1.0  # r6: "Diffuse interstitial edema"


def test_parquet_shards_and_the_hub_cache_are_read_offline_and_never_fetched(
    processes: None, default_model: Path, tmp_path: Path
) -> None:
    """A folder of Parquet shards named by split, the same files as a dataset of the local hub
    cache (``hf://datasets/OWNER/NAME``), and a hub dataset that is not there: a clear error,
    no download. What ``datasets`` prepares goes to reportfed's cache, not ~/.cache."""
    shards = tmp_path / "shards" / "data"
    shards.mkdir(parents=True)
    parts = two_splits()
    parts["train"].to_parquet(str(shards / "train-00000-of-00001.parquet"))
    parts["test"].to_parquet(str(shards / "test-00000-of-00001.parquet"))
    hub = tmp_path / "hub"
    repo = hub / "datasets--hospital--reports"
    commit = "0123456789abcdef0123456789abcdef01234567"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "data").symlink_to(shards)
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "HF_HUB_CACHE": str(hub)}
    for source in ("shards", "hf://datasets/hospital/reports"):
        out = f"{source.rsplit('/', 1)[-1]}.csv"
        done = reportfed(
            "label", "--reports", source, "--split", "test", "--out", out, cwd=tmp_path, **env
        )
        assert done.returncode == 0, done.stderr
        labels = pd.read_csv(tmp_path / out)
        assert labels["id"].tolist() == ["r5", "r6"]
        assert labels["Fracture"].tolist()[0] == 1.0
    missing = reportfed(
        "label", "--reports", "hf://datasets/hospital/absent", "--out", "z.csv", cwd=tmp_path, **env
    )
    assert missing.returncode == 2
    assert last_line(missing) == (
        f"reportfed: error: hf://datasets/hospital/absent: not in the local Hugging Face hub "
        f"cache ({hub}); reportfed never downloads a dataset: fetch it first (hf download "
        "--repo-type dataset hospital/absent), or give the folder it was saved to"
    )
    assert list(home.rglob("*")) == []  # nothing under HOME: the cache is reportfed's
    prepared = datasets_cache()  # the test's REPORTFED_CACHE_DIR/datasets
    assert prepared is not None and prepared.parent == Path(os.environ["REPORTFED_CACHE_DIR"])
    assert any(p.suffix == ".arrow" for p in prepared.rglob("*"))


def test_a_text_column_that_holds_numbers_and_a_folder_that_is_no_dataset(
    processes: None, tmp_path: Path
) -> None:
    datasets.Dataset.from_dict({"id": ["a"], "report": [3.5]}).save_to_disk(str(tmp_path / "n"))
    done = reportfed("label", "--reports", "n", "--out", "n.csv", cwd=tmp_path)
    assert last_line(done) == (
        "reportfed: error: n: column 'report' holds Value('float64') values, not report text"
    )
    (tmp_path / "empty").mkdir()
    done = reportfed("label", "--reports", "empty", "--out", "e.csv", cwd=tmp_path)
    assert last_line(done) == "reportfed: error: empty: is a directory, not a reports table"
    (tmp_path / "labels.csv").write_text("x\n")
    table = tmp_path / "reports.csv"
    REPORTS.to_csv(table, index=False)
    done = reportfed(
        "label", "--reports", "reports.csv", "--format", "hf", "--out", "o", cwd=tmp_path
    )
    assert last_line(done).startswith(
        "reportfed: error: --format hf writes the input dataset's rows with label columns"
    )


def test_read_table_and_iter_reports_read_a_dataset_as_its_table(tmp_path: Path) -> None:
    """Training reads a dataset's label columns as a table's; chunks carry each report's row."""
    frame = REPORTS.assign(Cardiomegaly=[0.0, 1.0, None, None, None, 1.0])
    frame.to_csv(tmp_path / "t.csv", index=False)
    datasets.Dataset.from_pandas(frame, preserve_index=False).save_to_disk(str(tmp_path / "d"))
    table, dataset = read_table(tmp_path / "t.csv"), read_table(tmp_path / "d")
    assert dataset.ids == table.ids and dataset.texts == table.texts
    assert np.array_equal(dataset.labels, table.labels, equal_nan=True)
    assert list(dataset.label_space) == ["Cardiomegaly"]
    chunks = list(iter_reports(tmp_path / "d", rows=4))
    assert [c.positions for c in chunks] == [(0, 1, 2, 3), (4, 5)]


def test_label_dataset_gives_predict_states_in_one_process_several_or_streamed(
    processes: None, default_labeler, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from reportfed.data.iu import load_iu

    texts = load_iu().texts[:300]
    reports = datasets.Dataset.from_dict(
        {"id": [str(i) for i in range(len(texts) + 1)], "text": [*texts, ""]}
    )
    names = list(default_labeler.classes_)
    expected = default_labeler.predict_states(texts)
    for num_proc in (None, 2):
        labelled = default_labeler.label_dataset(reports, num_proc=num_proc, batch_size=64)
        assert labelled.column_names == ["id", "text", *names]
        got = labelled.to_pandas()[names].to_numpy(dtype=np.float32)
        assert np.array_equal(got[:-1], expected, equal_nan=True), num_proc
        assert np.isnan(got[-1]).all()  # an empty report has no state
    streamed = default_labeler.label_dataset(reports.to_iterable_dataset(), batch_size=64)
    rows = [[np.nan if row[n] is None else row[n] for n in names] for row in streamed]
    assert np.array_equal(np.array(rows[:-1], np.float32), expected, equal_nan=True)
    both = default_labeler.label_dataset(datasets.DatasetDict(a=reports.select(range(5))))
    assert list(both) == ["a"] and both["a"].column_names[-len(names) :] == names
    assert list(tmp_path.iterdir()) == [] and reports.cache_files == []


def test_corpus_iu_as_a_dataset_has_the_tables_rows_split_as_the_experiments_split(
    processes: None, iu_archive: Path, tmp_path: Path
) -> None:
    from reportfed.data.partition import TEST_FRACTION, split_rows

    done = reportfed(
        "corpus", "iu", "--format", "hf", "--out", "iu", "--sample", "200", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "as a Hugging Face dataset (160 train, 40 test: seed 0)" in done.stderr
    trained = reportfed(
        "train", "--node", "iu", "--split", "train", "--out", "m.safetensors", cwd=tmp_path
    )
    assert trained.returncode == 0, trained.stderr
    assert "node iu: 160 reports" in trained.stderr and (tmp_path / "m.safetensors").is_file()
    assert (
        reportfed("corpus", "iu", "--out", "iu.csv", "--sample", "200", cwd=tmp_path).returncode
        == 0
    )
    table = pd.read_csv(tmp_path / "iu.csv", keep_default_na=False, na_values=[""])
    corpus = datasets.load_from_disk(str(tmp_path / "iu"))
    train, test = split_rows(len(table), TEST_FRACTION, np.random.default_rng(0))
    labels = [
        c
        for c in table.columns
        if c not in ("id", "Reports", "findings", "impression", "mesh_major")
    ]
    for split, rows in (("train", train), ("test", test)):
        part = corpus[split]
        assert all(part.features[n] == datasets.Value("float32") for n in labels)
        frame = part.to_pandas()
        assert frame["id"].tolist() == table["id"].iloc[rows].tolist()
        assert np.array_equal(
            states_of(frame, labels), states_of(table.iloc[rows], labels), equal_nan=True
        )


def test_corpus_mimic_as_a_dataset_puts_each_study_in_its_official_split(
    processes: None, tmp_path: Path
) -> None:
    root = tmp_path / "mimic"
    write_fixture(root, 40)
    done = reportfed(
        "corpus", "mimic", "--root", str(root), "--format", "hf", "--out", "m", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    corpus = datasets.load_from_disk(str(tmp_path / "m"))
    assert list(corpus) == ["train", "validate", "test"]
    official = pd.read_csv(next(root.rglob("mimic-cxr-2.0.0-split.csv.gz")), dtype=str)
    split_of = dict(zip(official["study_id"], official["split"], strict=False))
    for split, part in corpus.items():
        assert part.num_rows and {split_of[i] for i in part["id"]} == {split}
    done = reportfed("corpus", "mimic", "--root", str(root), "--out", "m.csv", cwd=tmp_path)
    assert done.returncode == 0
    assert sum(p.num_rows for p in corpus.values()) == len(pd.read_csv(tmp_path / "m.csv"))


def test_the_docs_block_writes_only_where_the_readme_says(
    processes: None, default_model: Path, iu_archive: Path, embeddings_cache: Path, tmp_path: Path
) -> None:
    """docs/datasets.md's block, run as written with a fresh HOME and no REPORTFED_CACHE_DIR:
    its outputs in the working folder and reportfed's user cache (the model, the datasets
    cache) and nothing else under HOME: nothing of Hugging Face's."""
    from reportfed.core.paths import cache_dir

    from .test_readme import _run_bash, _split, blocks

    (block,) = [b for b in blocks(ROOT / "docs" / "datasets.md") if b.language == "bash"]
    home, work = tmp_path / "home", tmp_path / "work"
    model = home / ".cache" / "reportfed" / default_model.relative_to(cache_dir())
    model.parent.mkdir(parents=True)
    model.write_bytes(default_model.read_bytes())
    work.mkdir()
    with pytest.MonkeyPatch.context() as patch:  # _run_bash runs with this process's environment
        patch.delenv("REPORTFED_CACHE_DIR")
        for name, value in dict(HOME=str(home), **OFFLINE).items():
            patch.setenv(name, value)
        patch.setenv("REPORTFED_EMBEDDINGS_CACHE", str(embeddings_cache))
        done = _run_bash(_split(block.code)[0], work, timeout=540)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "test reports: the dataset's label columns are the table's" in done.stdout
    elsewhere = [
        str(p.relative_to(home)) for p in home.rglob("*")
        if p.is_file() and not p.is_relative_to(home / ".cache" / "reportfed")
    ]  # fmt: skip
    assert elsewhere == []
    assert {p.name for p in work.iterdir()} == {
        "iu_dataset", "iu_labelled", "iu_test_labels.csv", "block.log"
    }  # fmt: skip
