"""Tables of any size in flat memory: reports read, labelled and written a chunk at a time give
what reading, labelling and writing the whole table at once gives."""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reportfed.cli import main
from reportfed.core.errors import InputFileError, OutputFileError
from reportfed.core.files import StagedTables, atomic_write, table_data
from reportfed.data.table import ReportTable, count_reports, iter_reports, read_table
from reportfed.reader import _padded_groups

ROWS = [
    ("r1", "No pleural effusion."),
    ("r2", ""),
    ("r3", "12345"),
    ("r4", "Mild cardiomegaly.\nNo edema."),
    ("r5", 'Right "basilar" atelectasis, stable.'),
    ("r6", "NA"),
    ("r7", "The lungs are clear."),
]


def _tables(tmp_path: Path) -> list[Path]:
    frame = pd.DataFrame(ROWS, columns=["id", "Reports"])
    frame["Edema"] = [0, "", 1, "", -1, "", 1]
    plain = tmp_path / "t.csv"
    frame.to_csv(plain, index=False)
    zipped = tmp_path / "t.csv.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    parquet = tmp_path / "t.parquet"
    frame.astype(str).to_parquet(parquet, index=False)
    bare = tmp_path / "bare.csv"
    pd.DataFrame({"x": [t for _, t in ROWS]}).to_csv(bare, index=False, header=False)
    return [plain, zipped, parquet, bare]


@pytest.mark.parametrize("rows", [1, 2, 3, 100])
def test_chunks_read_what_the_whole_table_reads(tmp_path: Path, rows: int) -> None:
    for path in _tables(tmp_path):
        whole = read_table(path)
        chunks = list(iter_reports(path, rows=rows))
        assert len(chunks) == -(-len(ROWS) // rows)
        assert [t for c in chunks for t in c.texts] == whole.texts
        assert [i for c in chunks for i in c.ids] == whole.ids
        assert sum(c.skipped_empty for c in chunks) == whole.skipped_empty == 3
        assert {c.id_column for c in chunks} == {whole.id_column}
        assert count_reports(path) == (4, 3)


def test_a_bad_row_anywhere_is_found_by_counting_before_any_work(tmp_path: Path) -> None:
    lines = ["id,Reports", *(f"r{i},Report {i}." for i in range(5000)), 'r,"never closed']
    path = tmp_path / "bad.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputFileError, match=r"line 5002 \(row 5002\) is never closed"):
        count_reports(path)
    wide = tmp_path / "wide.csv"
    wide.write_text("\n".join([*lines[:-1], "r,a,b"]) + "\n")
    with pytest.raises(InputFileError, match="row 5002 has 3 fields but the header has 2"):
        count_reports(wide)
    empty = tmp_path / "empty.csv"
    empty.write_text("id,Reports\nr1,\nr2,NA\n")
    with pytest.raises(InputFileError, match="no usable report text"):
        count_reports(empty)


@pytest.mark.parametrize("name", ["t.csv", "t.tsv.gz", "t.parquet", "t.xlsx"])
def test_staged_chunks_write_the_table_the_whole_frame_writes(tmp_path: Path, name: str) -> None:
    frame = pd.DataFrame(
        {"id": [f"r{i}" for i in range(7)], "Reports": [f"Report {i}." for i in range(7)]}
    )
    frame["Edema"] = [1.0, np.nan, 0.0, -1.0, np.nan, 1.0, 0.0]
    whole, chunked = tmp_path / "whole", tmp_path / "chunked"
    atomic_write(whole / name, table_data(frame, whole / name))
    with StagedTables([chunked / name]) as staged:
        for lo in range(0, 7, 3):
            staged.append(chunked / name, frame.iloc[lo : lo + 3])
        staged.append(chunked / name, frame.iloc[:0])  # an empty chunk adds nothing
    read = pd.read_parquet if name.endswith("parquet") else pd.read_excel
    if ".csv" in name or ".tsv" in name:
        sep = "\t" if ".tsv" in name else ","
        read = lambda p: pd.read_csv(p, sep=sep)  # noqa: E731
    pd.testing.assert_frame_equal(read(chunked / name), read(whole / name))
    pd.testing.assert_frame_equal(read(chunked / name), frame, check_dtype=False)


def test_staged_tables_are_written_all_or_none(tmp_path: Path) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.parquet"
    a.write_text("old\n")
    frame = pd.DataFrame({"x": [1.0, 2.0]})
    with pytest.raises(RuntimeError), StagedTables([a, b]) as staged:
        staged.append(a, frame)
        staged.append(b, frame)
        raise RuntimeError("the labelling failed half way")
    assert a.read_text() == "old\n" and not b.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv"]  # no temporary file left
    with (
        pytest.raises(OutputFileError, match="no table was written"),
        StagedTables([a, b]) as staged,
    ):
        staged.append(a, frame)
    assert a.read_text() == "old\n" and not b.exists()


@pytest.mark.parametrize("writer", ["write_together", "StagedTables"])
def test_outputs_stay_all_or_none_when_a_later_move_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    """The first output is in place when the second's move fails (a full disk, a file made
    read-only meanwhile): the first is moved back, so both are the old ones, and no temporary
    or kept file is left."""
    from reportfed.core import files

    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    a.write_text("old a\n")
    b.write_text("old b\n")
    real, calls = os.replace, []

    def second_fails(src: object, dst: object) -> None:
        calls.append(dst)
        if str(src).endswith(".tmp") and len([d for d in calls if Path(str(d)).exists()]) == 2:
            raise OSError(28, "No space left on device")
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(files.os, "replace", second_fails)
    frame = pd.DataFrame({"x": [1.0]})
    with pytest.raises(OutputFileError, match="No space left on device"):
        if writer == "write_together":
            files.write_together([(a, b"new a\n"), (b, b"new b\n"), (c, b"new c\n")])
        else:
            with StagedTables([a, b, c]) as staged:
                for path in (a, b, c):
                    staged.append(path, frame)
    assert a.read_text() == "old a\n" and b.read_text() == "old b\n" and not c.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv"]


def test_padded_groups_keep_a_long_report_apart() -> None:
    counts = [3, 4, 5000, 2, 2, 6]
    groups = list(_padded_groups(counts, 100))
    assert groups == [(0, 2), (2, 3), (3, 6)]
    assert all((hi - lo) * max(counts[lo:hi]) <= 100 or hi - lo == 1 for lo, hi in groups)
    assert list(_padded_groups([], 100)) == []


def test_label_over_several_chunks_gives_the_one_pass_labels(
    iu_embedded, embeddings_cache, default_model, tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """800 IU reports read 300 at a time (three of ``reportfed label``'s chunks, the last one
    short) and one long report among them: the states, probabilities and evidence are those of
    one ``annotate`` over the whole table."""
    from reportfed.data import table as table_module
    from reportfed.default_model import load_default_model

    read: list[int] = []

    def small_chunks(
        path: Path, *, text_column: str | None = None, split: str | None = None
    ) -> Iterator[ReportTable]:
        for chunk in iter_reports(path, text_column=text_column, split=split, rows=300):
            read.append(len(chunk))
            yield chunk

    monkeypatch.setattr(table_module, "iter_reports", small_chunks)
    table, _ = iu_embedded
    texts = table.texts[:800]
    texts[400] = " ".join(table.texts[:300])  # a long report among short ones
    ids = [f"iu{i}" for i in range(len(texts))]
    reports = tmp_path / "reports.csv"
    pd.DataFrame({"id": ids, "Reports": texts}).to_csv(reports, index=False)
    monkeypatch.setenv("REPORTFED_EMBEDDINGS_CACHE", str(embeddings_cache))
    monkeypatch.setenv("REPORTFED_PRECISION", "fp32")
    out, proba, evidence = (tmp_path / n for n in ("s.csv", "p.parquet", "e.csv.gz"))
    argv = ["label", "--reports", str(reports), "--out", str(out)]
    assert main([*argv, "--probabilities", str(proba), "--evidence", str(evidence)]) == 0
    assert read == [300, 300, 200] * 2  # counted (every row checked first), then labelled
    labeler = load_default_model(cache_dir=embeddings_cache)
    labeler.set_params(progress=False)
    whole = labeler.annotate(pd.read_csv(reports)["Reports"].tolist(), ids)
    names = list(labeler.classes_)
    np.testing.assert_array_equal(pd.read_csv(out)[names].to_numpy(), whole.states)
    np.testing.assert_allclose(pd.read_parquet(proba)[names].to_numpy(), whole.proba, atol=1e-6)
    assert whole.evidence is not None
    pd.testing.assert_frame_equal(
        pd.read_csv(evidence, keep_default_na=False, dtype={"id": str}),
        pd.read_csv(_csv(whole.evidence, tmp_path), keep_default_na=False, dtype={"id": str}),
    )


def _csv(frame: pd.DataFrame, tmp_path: Path) -> Path:
    path = tmp_path / "whole_evidence.csv"
    atomic_write(path, table_data(frame, path))
    return path
