"""read_table on random tables: never a traceback, every refusal a ReportfedError, and every
accepted table keeps its row count (skipped rows counted) and its ids."""

from __future__ import annotations

import csv
import io
import string
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reportfed.core.errors import ReportfedError
from reportfed.data.table import TEXT_COLUMNS, read_table

CELLS = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=string.ascii_letters + " .,;|\t\"'\n\r", max_size=40),
    st.integers(-(10**6), 10**6).map(str),
    st.floats(allow_nan=True).map(str),
    st.sampled_from(["", "NA", "null", "1", "0", "-1", "1.0", "yes"]),
    st.integers(150_000, 300_000).map(lambda n: "x" * n),  # over the csv module's field limit
)
HEADERS = st.lists(
    st.sampled_from(["Reports", "text", "id", "Edema", "Cardiomegaly", "notes", "Foo"]),
    min_size=1,
    max_size=4,
)


@st.composite
def tables(draw: st.DrawFn) -> tuple[bytes, str, list[str] | None]:
    """A table as bytes, its suffix and its rows' ids (None: not known exactly, because the
    text was re-encoded or a reader sees no header: no column named for text, so one report a
    line, the CheXpert labeler's input)."""
    header = draw(HEADERS)
    rows = draw(st.lists(st.lists(CELLS, min_size=len(header), max_size=len(header)), max_size=6))
    delimiter = draw(st.sampled_from([",", ";", "\t", "|"]))
    quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONNUMERIC]))
    encoding = draw(st.sampled_from(["utf-8", "utf-8-sig", "latin-1", "utf-16"]))
    if draw(st.booleans()) and len(set(header)) == len(header):
        buffer = io.BytesIO()
        pd.DataFrame(rows, columns=header, dtype=object).to_parquet(buffer)
        return buffer.getvalue(), ".parquet", _ids(header, rows)
    text = io.StringIO()
    csv.writer(text, delimiter=delimiter, quoting=quoting).writerows([header, *rows])
    named = any(h.casefold() in {c.casefold() for c in TEXT_COLUMNS} for h in header)
    headerless = not named and (len(header) == 1 or delimiter != ",")
    ids = _ids(header, rows) if encoding.startswith("utf-8") and not headerless else None
    return text.getvalue().encode(encoding, errors="replace"), ".csv", ids


def _ids(header: list[str], rows: list[list[str]]) -> list[str]:
    """The ids read_table gives: the ``id`` column, else the file row numbers."""
    if "id" in header:
        return [row[header.index("id")] for row in rows]
    return [str(i + 2) for i in range(len(rows))]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(drawn=tables())
def test_read_reports_refuses_cleanly_or_keeps_rows_and_ids(tmp_path: Path, drawn) -> None:  # type: ignore[no-untyped-def]
    data, suffix, ids = drawn
    path = tmp_path / f"r{suffix}"
    path.write_bytes(data)
    try:
        table = read_table(path)
    except ReportfedError:
        return  # a refusal: one clear line in the CLI
    assert all(isinstance(t, str) and t.strip() for t in table.texts)
    assert len(table.ids) == len(table)
    if ids is not None:
        assert len(table) + table.skipped_empty == len(ids)
        remaining = iter(ids)  # the kept rows' ids, in file order: a subsequence of ids
        assert all(any(i == j for j in remaining) for i in table.ids)
