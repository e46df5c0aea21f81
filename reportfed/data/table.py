"""Reports tables: CSV or Parquet with a text column and optional label columns.

Label values follow the CheXpert labeler's convention: ``1`` positive, ``0`` mentioned and
negated, ``-1`` uncertain (mapped by ``uncertain=``: ``"zeros"`` as in the papers, ``"ones"``, or
``"ignore"`` = not annotated), blank = **not mentioned**, a negative for presence (``blank=
"negative"``, the default). Tables whose blanks mean *not annotated* read with ``blank="ignore"``
(NaN, masked out of the loss). A label a site does not annotate at all is a column it does not
have; a column without any annotated cell is treated so (NaN) and listed in
``ReportTable.blank_columns``.
Label columns may use any vocabulary spelling; they are canonicalised.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reportfed.core.config import Blank, Uncertain
from reportfed.core.errors import ConfigError, InputFileError, LabelError
from reportfed.core.labels import LabelSpace, check_label_matrix, is_known

TEXT_COLUMNS = ("Reports", "Report Impression", "REPORT", "report", "text")
_UNCERTAIN_VALUE = {"zeros": 0.0, "ones": 1.0, "ignore": np.nan}
_BLANK_VALUE = {"negative": 0.0, "ignore": np.nan}
#: report cells that stand for a missing value, not a report (compared case-insensitively)
MISSING_TEXT = frozenset({"nan", "na", "n/a", "null", "none", "<na>"})
#: a letter of any script: a cell without one (a number, punctuation) is no report
_WORD = re.compile(r"[^\W\d_]")
#: the longest CSV field read (Python's csv module stops at 131,072 characters by default)
FIELD_LIMIT = 2**31 - 1


@dataclass
class ReportTable:
    """Report texts with a (possibly partial) label matrix.

    ``labels`` has shape ``(len(texts), len(label_space))``, float32, NaN = not annotated.
    """

    texts: list[str]
    labels: np.ndarray
    label_space: LabelSpace
    ids: list[str]
    source: str = ""
    skipped_empty: int = 0
    id_column: str | None = None
    blank_columns: tuple[str, ...] = ()
    ignored_columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_label_matrix(self.labels, len(self.texts), self.label_space, self.source or "reports")

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, rows: np.ndarray | list[int]) -> ReportTable:
        """Rows ``rows`` of this table (same label space, id column and source)."""
        idx = np.asarray(rows, dtype=int)
        return replace(
            self,
            texts=[self.texts[i] for i in idx],
            labels=self.labels[idx],
            ids=[self.ids[i] for i in idx],
        )

    def fully_annotated(self) -> ReportTable:
        """The rows with every label annotated (no NaN)."""
        return self.subset(np.flatnonzero(~np.isnan(self.labels).any(axis=1)))

    def select_labels(self, names: list[str] | LabelSpace) -> ReportTable:
        """The same rows restricted to the label columns ``names`` (in that order)."""
        space = names if isinstance(names, LabelSpace) else LabelSpace.of(names, allow_unknown=True)
        cols = self.label_space.indices(space)
        return ReportTable(self.texts, self.labels[:, cols], space, self.ids, self.source)


def _decode(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputFileError(
            f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at line {line}); "
            "re-save the file as UTF-8"
        ) from None


def _read_frame(path: Path, text_column: str | None) -> tuple[pd.DataFrame, int]:
    """The table (string cells) and the file row of its first data row: 2 below a header, 1 in a
    headerless one-report-per-row CSV (the CheXpert labeler's input). CSV may be gzipped and
    separated by commas, or by tabs, semicolons or bars when its header says so."""
    if path.suffix.lower() in (".parquet", ".pq"):
        try:
            frame = pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises several types for bad files
            raise InputFileError(f"{path}: cannot read as Parquet: {exc}") from None
        _no_duplicates(path, [str(c) for c in frame.columns])
        column = _find_text_column(list(frame.columns), text_column)
        if column is not None and not _is_text(frame[column]):
            raise InputFileError(
                f"{path}: column {column!r} holds {frame[column].dtype} values, not report text"
            )
        return frame, 2
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read ({exc.strerror})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise InputFileError(f"{path}: a broken gzip file ({exc})") from None
    text = _decode(path, raw)
    if not text.strip():
        raise InputFileError(f"{path}: the file is empty")
    delimiter = _delimiter(text.split("\n", 1)[0])
    rows = _csv_rows(path, text, delimiter)
    header = rows[0]
    headerless = text_column is None and _find_text_column(header, None) is None
    if headerless and len(header) <= 1:  # no recognisable header: one report per row
        wide = next((i for i, r in enumerate(rows) if len(r) > 1), None)
        if wide is not None:
            raise InputFileError(
                f"{path}: no header names a text column, so each row is one report, but row "
                f"{wide + 1} has {len(rows[wide])} fields: quote reports that contain {delimiter!r}"
            )
        return pd.DataFrame({0: [r[0] if r else "" for r in rows]}, dtype=object), 1
    for i, row in enumerate(rows[1:]):
        if row and len(row) != len(header):
            raise InputFileError(
                f"{path}: row {i + 2} has {len(row)} fields but the header has {len(header)} "
                f"(a field with a {delimiter!r} in it must be quoted)"
            )
    _no_duplicates(path, header)
    data = [r or [""] * len(header) for r in rows[1:]]
    return pd.DataFrame(data, columns=header, dtype=object), 2


def _csv_rows(path: Path, text: str, delimiter: str) -> list[list[str]]:
    """The rows of CSV ``text``, any field length; a malformed file names the line it breaks on
    (for a quote never closed, the line where it opened)."""
    csv.field_size_limit(max(csv.field_size_limit(), FIELD_LIMIT))  # a long report is valid
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    rows: list[list[str]] = []
    done = 0  # the last line of the last whole row
    try:
        for row in reader:
            rows.append(row)
            done = reader.line_num
    except csv.Error as exc:
        if "unexpected end of data" in str(exc):
            raise InputFileError(
                f"{path}: a quote opened on line {done + 1} (row {len(rows) + 1}) is never closed"
            ) from None
        raise InputFileError(f"{path}: malformed CSV at line {reader.line_num}: {exc}") from None
    return rows


def _delimiter(first_line: str) -> str:
    """``,``, or the tab / semicolon / bar that separates a header naming a text column."""
    if "," not in first_line:
        for d in ("\t", ";", "|"):
            if d in first_line and _find_text_column(first_line.split(d), None) is not None:
                return d
    return ","


def _no_duplicates(path: Path, columns: list[str]) -> None:
    seen = [c for i, c in enumerate(columns) if c in columns[:i]]
    if seen:
        raise InputFileError(f"{path}: column {seen[0]!r} appears more than once")


def _find_text_column(columns: list[Any], text_column: str | None) -> Any:
    """The text column among ``columns``: ``text_column``, else the first of
    :data:`TEXT_COLUMNS` present (exact, then ignoring case); ``None`` if there is none."""
    if text_column is not None:
        return text_column if text_column in columns else None
    for name in TEXT_COLUMNS:
        if name in columns:
            return name
    folded = {str(c).strip().casefold(): c for c in columns}
    return next((folded[n.casefold()] for n in TEXT_COLUMNS if n.casefold() in folded), None)


def _cell(value: object) -> str:
    """A table cell as stripped text; "" for None and NaN."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    return str(value).strip()


def parse_label_column(
    path: Path,
    column: str,
    values: pd.Series,
    uncertain: Uncertain,
    first_row: int,
    blank: Blank,
) -> np.ndarray:
    """Parse one label column (1 / 0 / -1 / blank) to float32; blank becomes 0 (``blank=
    "negative"``: not mentioned) or NaN (``"ignore"``: not annotated).

    ``first_row`` is the file line of the first value, for error messages.
    """
    out = np.empty(len(values), dtype=np.float32)
    for i, v in enumerate(values.tolist()):
        s = _cell(v)
        if s == "":
            out[i] = _BLANK_VALUE[blank]
            continue
        try:
            x = float(s)
        except ValueError:
            x = np.inf
        if x == 1.0 or x == 0.0:
            out[i] = x
        elif x == -1.0:
            out[i] = _UNCERTAIN_VALUE[uncertain]
        else:
            raise InputFileError(
                f"{path}: row {i + first_row}, column {column!r}: value {s!r} is not 1, 0, -1 or blank"
            )
    return out


def read_reports(
    path: str | Path,
    *,
    text_column: str | None = None,
    label_columns: list[str] | None = None,
    custom_labels: Sequence[str] = (),
    uncertain: Uncertain = "zeros",
    blank: Blank = "negative",
    require_labels: bool = False,
) -> ReportTable:
    """Read a reports table.

    Parameters
    ----------
    path:
        CSV (UTF-8) or Parquet. A headerless single-column CSV (the CheXpert labeler's input) is
        read as one report per row.
    text_column:
        Name of the text column; by default the first of :data:`TEXT_COLUMNS` present.
    label_columns:
        Label columns to read (any spelling; names outside the built-in vocabularies are kept as
        custom labels). By default every column whose name is a known label or alias.
    custom_labels:
        With the default ``label_columns``: columns read as labels too, where the table has them
        (custom labels, outside the built-in vocabularies).
    uncertain:
        What ``-1`` becomes: ``"zeros"`` (default, as in the papers), ``"ones"`` or ``"ignore"``.
    blank:
        What a blank label cell means: ``"negative"`` (default: not mentioned, as in the CheXpert
        labeler's output and MIMIC-CXR's tables) or ``"ignore"`` (not annotated).
    require_labels:
        Raise if no label column is found (training tables).

    Empty report cells, cells such as ``NaN``, ``NA``, ``null`` that stand for a missing value,
    and cells without a word (``12345``) are skipped; their count is in ``ReportTable.skipped_empty``. An ``id`` column is kept
    in ``ReportTable.ids``; columns that are neither text, id nor labels are named in
    ``ReportTable.ignored_columns``.
    """
    path = Path(path)
    if path.is_dir():
        raise InputFileError(f"{path}: is a directory, not a reports table")
    if not path.is_file():
        raise InputFileError(f"{path}: no such file")
    if uncertain not in _UNCERTAIN_VALUE:
        raise ConfigError(f"uncertain must be one of {sorted(_UNCERTAIN_VALUE)}, got {uncertain!r}")
    if blank not in _BLANK_VALUE:
        raise ConfigError(f"blank must be one of {sorted(_BLANK_VALUE)}, got {blank!r}")
    frame, first_row = _read_frame(path, text_column)
    column = _find_text_column(list(frame.columns), text_column) if first_row == 2 else 0
    if column is None:
        wanted = repr(text_column) if text_column else f"one of {list(TEXT_COLUMNS)}"
        raise InputFileError(f"{path}: no text column {wanted}; columns are {list(frame.columns)}")
    if frame.empty:
        raise InputFileError(f"{path}: no rows")

    if label_columns is None:
        custom = set(custom_labels)
        label_columns = [
            c
            for c in frame.columns
            if c != column and isinstance(c, str) and (is_known(c) or c in custom)
        ]
    else:
        absent = [c for c in label_columns if c not in frame.columns]
        if absent:
            raise InputFileError(
                f"{path}: label columns {absent} not found; columns are {list(frame.columns)}"
            )
    if require_labels and not label_columns:
        others = [c for c in frame.columns if c != column]
        raise InputFileError(
            f"{path}: no label column matches a CheXpert or NIH-14 label or alias "
            f"(other columns: {others}); name custom label columns explicitly "
            "(reportfed train --custom-labels)"
        )
    try:
        space = LabelSpace.of(label_columns, allow_unknown=True)
    except LabelError as exc:
        raise InputFileError(f"{path}: {exc}") from None
    labels = (
        np.stack(
            [
                parse_label_column(path, c, frame[c], uncertain, first_row, blank)
                for c in label_columns
            ],
            axis=1,
        )
        if label_columns
        else np.zeros((len(frame), 0), dtype=np.float32)
    )
    # a column with no annotated cell on any row is one this table does not annotate
    blank_columns = [
        c
        for i, c in enumerate(label_columns)
        if all(_cell(v) == "" for v in frame[c].tolist()) or np.isnan(labels[:, i]).all()
    ]
    labels[:, [label_columns.index(c) for c in blank_columns]] = np.nan

    texts = [_report_text(t) for t in frame[column].tolist()]
    keep = np.array([bool(t) for t in texts], dtype=bool)
    if not keep.any():
        raise InputFileError(
            f"{path}: no usable report text in column {column!r} (all {len(texts)} empty, "
            "missing or without a word)"
        )
    if "id" in frame.columns:
        ids = [str(x) for x in frame["id"].tolist()]
    else:
        ids = [str(i + first_row) for i in range(len(frame))]
    return ReportTable(
        texts=[t for t, k in zip(texts, keep, strict=True) if k],
        labels=labels[keep],
        label_space=space,
        ids=[i for i, k in zip(ids, keep, strict=True) if k],
        source=str(path),
        skipped_empty=int((~keep).sum()),
        id_column="id" if "id" in frame.columns else None,
        ignored_columns=tuple(
            str(c) for c in frame.columns if c not in (column, "id", *label_columns)
        ),
        blank_columns=tuple(space[label_columns.index(c)] for c in blank_columns),
    )


def _is_text(column: pd.Series) -> bool:
    """Whether a Parquet column holds strings (or nothing), not numbers, booleans or dates."""
    return pd.api.types.is_string_dtype(column) or all(
        isinstance(v, str) or _cell(v) == "" for v in column.tolist()
    )


def _report_text(value: object) -> str:
    """A report cell as text; "" for a missing value (None, NaN, or a cell like ``NA``) and for
    a cell without a word (``12345``, ``3.14``, ``-1``: a number is no report)."""
    text = _cell(value)
    return "" if text.lower() in MISSING_TEXT or not _WORD.search(text) else text
