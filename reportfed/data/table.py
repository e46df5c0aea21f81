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

import contextlib
import csv
import gzip
import io
import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from reportfed.core.characters import as_read
from reportfed.core.config import Blank, Uncertain
from reportfed.core.errors import ConfigError, InputFileError, LabelError
from reportfed.core.labels import LabelledRows, LabelSpace, is_known
from reportfed.data import hf

TEXT_COLUMNS = ("Reports", "Report Impression", "REPORT", "report", "text")
_UNCERTAIN_VALUE = {"zeros": 0.0, "ones": 1.0, "ignore": np.nan}
_BLANK_VALUE = {"negative": 0.0, "ignore": np.nan}
#: report cells that stand for a missing value, not a report (compared case-insensitively)
MISSING_TEXT = frozenset({"nan", "na", "n/a", "null", "none", "<na>"})
#: a letter of any script: a cell without one (a number, punctuation) is no report
_WORD = re.compile(r"[^\W\d_]")
#: the longest CSV field read (Python's csv module stops at 131,072 characters by default)
FIELD_LIMIT = 2**31 - 1


#: the column of a review page's download that names, per report, the labels its reader
#: corrected (separated by ``;``): their cells are the reader's states
CORRECTED_COLUMN = "Corrected"
#: the columns ``reportfed corpus iu`` writes beside the report (IU's sections and MeSH terms):
#: context for a reader, neither labels nor columns a user should be told were ignored
CORPUS_COLUMNS = ("findings", "impression", "mesh_major")


@dataclass
class ReportTable(LabelledRows):
    """Report texts with a (possibly partial) label matrix.

    ``labels`` has shape ``(len(texts), len(label_space))``, float32, NaN = not annotated.
    ``corrected``: the cells a reader corrected on a review page (:data:`CORRECTED_COLUMN`),
    (row, label) -> the four-state value read (1, 0, -1; NaN blank), before the ``uncertain``
    and ``blank`` policies.
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
    corrected: Mapping[tuple[int, str], float] = field(default_factory=dict)
    #: each report's row in its source, counted from 0 (read in chunks: :func:`iter_reports`)
    positions: tuple[int, ...] = ()

    ROWS: ClassVar[str] = "texts"

    def _subset_fields(self, idx: np.ndarray) -> dict[str, Any]:
        new = {int(old): k for k, old in enumerate(idx)}
        return {
            **super()._subset_fields(idx),
            "ids": [self.ids[i] for i in idx.tolist()],
            "positions": tuple(self.positions[i] for i in idx.tolist()) if self.positions else (),
            "corrected": {(new[r], c): v for (r, c), v in self.corrected.items() if r in new},
        }

    def fully_annotated(self) -> ReportTable:
        """The rows with every label annotated (no NaN)."""
        return self.subset(np.flatnonzero(~np.isnan(self.labels).any(axis=1)))

    def select_labels(self, names: list[str] | LabelSpace) -> ReportTable:
        """The same rows restricted to the label columns ``names`` (in that order)."""
        space = names if isinstance(names, LabelSpace) else LabelSpace.of(names, allow_unknown=True)
        cols = self.label_space.indices(space)
        corrected = {(r, c): v for (r, c), v in self.corrected.items() if c in space}
        return ReportTable(
            self.texts, self.labels[:, cols], space, self.ids, self.source, corrected=corrected
        )


def read_frame(path: str | Path, names: Sequence[str], what: str) -> pd.DataFrame:
    """A table of any modality as reportfed reads every table: CSV (UTF-8, plain or gzipped; an
    encoding, quote or row-length error named with its line) or Parquet, a spreadsheet or zip
    refused saying what to do, duplicate columns refused, cells as strings. ``names``: the key
    columns, one of which its header names (by which a tab, semicolon or bar delimiter is
    recognised); ``what``: the table's kind, for messages ("an image table")."""
    frame, _ = _read_frame(_table_path(path, what), None, names)
    return frame


def _read_frame(
    path: Path, text_column: str | None, names: Sequence[str] = TEXT_COLUMNS
) -> tuple[pd.DataFrame, int]:
    """The table (string cells) and the file row of its first data row: 2 below a header, 1 in a
    headerless one-report-per-row CSV (the CheXpert labeler's input). CSV may be gzipped and
    separated by commas, or by tabs, semicolons or bars when its header names one of
    ``names``."""
    if _is_parquet(path):
        frame = _parquet_file(path).read().to_pandas()
        return _checked_parquet(path, frame, text_column, names), 2
    layout, rows = _csv_layout(path, text_column, names)
    return pd.DataFrame(list(rows), columns=layout.columns, dtype=object), layout.first_row


def _is_parquet(path: Path) -> bool:
    return path.suffix.lower() in (".parquet", ".pq")


def _parquet_file(path: Path) -> Any:
    """``path`` opened as a ``pyarrow.parquet.ParquetFile`` (its metadata read, no rows)."""
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(path)
        _no_duplicates(path, list(file.schema_arrow.names))
    except InputFileError:
        raise
    except Exception as exc:  # pyarrow raises several types for bad files
        raise InputFileError(f"{path}: cannot read as Parquet: {exc}") from None
    return file


def _checked_parquet(
    path: Path, frame: pd.DataFrame, text_column: str | None, names: Sequence[str] = TEXT_COLUMNS
) -> pd.DataFrame:
    """``frame``, read from Parquet, once its text (or other key) column is known to hold text,
    not numbers, booleans or dates."""
    column = _find_text_column(list(frame.columns), text_column, names)
    if column is not None and not _is_text(frame[column]):
        raise InputFileError(
            f"{path}: column {column!r} holds {frame[column].dtype} values, not report text"
        )
    return frame


@dataclass(frozen=True)
class _Layout:
    """How a CSV file is laid out: its column names (``[0]`` for one report per row, no header),
    the file row of its first data row and its delimiter."""

    columns: list[Any]
    first_row: int
    delimiter: str


def _open_text(path: Path) -> io.TextIOWrapper:
    """``path`` as UTF-8 text (a byte-order mark skipped), gunzipped when it is gzip."""
    try:
        raw: Any = open(path, "rb")  # noqa: SIM115 - handed to the wrapper, which closes it
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read ({exc.strerror})") from None
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        raw = gzip.GzipFile(fileobj=raw)
    else:
        raw.seek(0)
    return io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")


def _csv_layout(
    path: Path, text_column: str | None, names: Sequence[str] = TEXT_COLUMNS
) -> tuple[_Layout, Iterator[list[str]]]:
    """The layout of a CSV file and its data rows, read as they are needed (memory stays flat
    for any number of rows); every row is checked against the header."""
    with _reading(path), _open_text(path) as f:
        first_line = f.readline()
        if not first_line.strip() and not f.read().strip():
            raise InputFileError(f"{path}: the file is empty")
    delimiter = _delimiter(first_line.split("\n", 1)[0], names)
    rows = _csv_rows(path, delimiter)
    header = next(rows)
    headerless = text_column is None and _find_text_column(header, None, names) is None
    if headerless and len(header) <= 1:  # no recognisable header: one report per row
        return _Layout([0], 1, delimiter), _one_field_rows(path, header, rows, delimiter)
    _no_duplicates(path, header)
    return _Layout(header, 2, delimiter), _header_rows(path, header, rows, delimiter)


def _one_field_rows(
    path: Path, first: list[str], rows: Iterator[list[str]], delimiter: str
) -> Iterator[list[str]]:
    for i, row in enumerate(itertools.chain([first], rows)):
        if len(row) > 1:
            raise InputFileError(
                f"{path}: no header names a text column, so each row is one report, but row "
                f"{i + 1} has {len(row)} fields: quote reports that contain {delimiter!r}"
            )
        yield [row[0] if row else ""]


def _header_rows(
    path: Path, header: list[str], rows: Iterator[list[str]], delimiter: str
) -> Iterator[list[str]]:
    for i, row in enumerate(rows):
        if row and len(row) != len(header):
            raise InputFileError(
                f"{path}: row {i + 2} has {len(row)} fields but the header has {len(header)} "
                f"(a field with a {delimiter!r} in it must be quoted)"
            )
        yield row or [""] * len(header)


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[None]:
    """Turn a file that is not UTF-8 or a broken gzip into an :class:`InputFileError`."""
    try:
        yield
    except UnicodeDecodeError:
        raise InputFileError(_not_utf8(path)) from None
    except (OSError, EOFError) as exc:
        if isinstance(exc, (gzip.BadGzipFile, EOFError)):
            raise InputFileError(f"{path}: a broken gzip file ({exc})") from None
        raise InputFileError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _not_utf8(path: Path) -> str:
    """Where ``path`` stops being UTF-8: the byte and its line."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        return (
            f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at line {line}); "
            "re-save the file as UTF-8"
        )
    return f"{path}: not UTF-8 text; re-save the file as UTF-8"


def _csv_rows(path: Path, delimiter: str) -> Iterator[list[str]]:
    """The rows of CSV file ``path``, any field length, read as they are needed; a malformed file
    names the line it breaks on (for a quote never closed, the line where it opened)."""
    csv.field_size_limit(max(csv.field_size_limit(), FIELD_LIMIT))  # a long report is valid
    with _reading(path), _open_text(path) as f:
        reader = csv.reader(f, delimiter=delimiter, strict=True)
        rows = done = 0  # rows read; the last line of the last whole row
        try:
            for row in reader:
                yield row
                rows += 1
                done = reader.line_num
        except csv.Error as exc:
            if "unexpected end of data" in str(exc):
                raise InputFileError(
                    f"{path}: a quote opened on line {done + 1} (row {rows + 1}) is never closed"
                ) from None
            raise InputFileError(
                f"{path}: malformed CSV at line {reader.line_num}: {exc}"
            ) from None


def _delimiter(first_line: str, names: Sequence[str] = TEXT_COLUMNS) -> str:
    """``,``, or the tab / semicolon / bar that separates a header naming one of ``names``."""
    if "," not in first_line:
        for d in ("\t", ";", "|"):
            if d in first_line and _find_text_column(first_line.split(d), None, names) is not None:
                return d
    return ","


def _no_duplicates(path: Path, columns: list[str]) -> None:
    seen = [c for i, c in enumerate(columns) if c in columns[:i]]
    if seen:
        raise InputFileError(f"{path}: column {seen[0]!r} appears more than once")


def _find_text_column(
    columns: list[Any], text_column: str | None, names: Sequence[str] = TEXT_COLUMNS
) -> Any:
    """The text column among ``columns``: ``text_column``, else the first of ``names`` present
    (exact, then ignoring case); ``None`` if there is none."""
    if text_column is not None:
        return text_column if text_column in columns else None
    for name in names:
        if name in columns:
            return name
    folded = {str(c).strip().casefold(): c for c in columns}
    return next((folded[n.casefold()] for n in names if n.casefold() in folded), None)


def _cell(value: object) -> str:
    """A table cell as stripped text; "" for None and NaN."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    return str(value).strip()


def training_labels(states: np.ndarray, uncertain: Uncertain, blank: Blank) -> np.ndarray:
    """Four-state labels (1.0, 0.0, -1.0, NaN for blank) as a trainer reads them: -1 and blank
    by the ``uncertain`` and ``blank`` policies of :func:`read_table`."""
    out = np.array(states, dtype=np.float32, copy=True)
    out[np.isnan(states)] = _BLANK_VALUE[blank]
    out[states == -1.0] = _UNCERTAIN_VALUE[uncertain]
    return out


def parse_label_column(
    path: str | Path,
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


def read_table(
    path: str | Path,
    *,
    text_column: str | None = None,
    label_columns: list[str] | None = None,
    custom_labels: Sequence[str] = (),
    aliases: Mapping[str, str] | None = None,
    uncertain: Uncertain = "zeros",
    blank: Blank = "negative",
    require_labels: bool = False,
    split: str | None = None,
) -> ReportTable:
    """Read a reports table.

    Parameters
    ----------
    path:
        CSV (UTF-8) or Parquet. A headerless single-column CSV (the CheXpert labeler's input) is
        read as one report per row. Or a Hugging Face dataset (:mod:`reportfed.data.hf`): a
        ``save_to_disk`` folder, a folder of Arrow or Parquet shards, ``hf://datasets/OWNER/NAME``
        from the local hub cache; its ids are its ``id`` column, else each row's index.
    text_column:
        Name of the text column; by default the first of :data:`TEXT_COLUMNS` present.
    label_columns:
        Label columns to read (any spelling; names outside the built-in vocabularies are kept as
        custom labels). By default every column whose name is a known label or alias.
    custom_labels:
        With the default ``label_columns``: columns read as labels too, where the table has them
        (custom labels, outside the built-in vocabularies).
    aliases:
        With the default ``label_columns``: columns read as the labels they name, by column name
        in lower case (a hospital's defined findings and their other names,
        :meth:`reportfed.text.findings.Findings.columns`).
    uncertain:
        What ``-1`` becomes: ``"zeros"`` (default, as in the papers), ``"ones"`` or ``"ignore"``.
    blank:
        What a blank label cell means: ``"negative"`` (default: not mentioned, as in the CheXpert
        labeler's output and MIMIC-CXR's tables) or ``"ignore"`` (not annotated).
    require_labels:
        Raise if no label column is found (training tables).
    split:
        The split of a dataset with several (:func:`reportfed.data.hf.choose_split`).

    Empty report cells, cells such as ``NaN``, ``NA``, ``null`` that stand for a missing value,
    and cells without a word (``12345``) are skipped; their count is in ``ReportTable.skipped_empty``. An ``id`` column is kept
    in ``ReportTable.ids``; columns that are neither text, id, labels nor
    :data:`CORPUS_COLUMNS` are named in ``ReportTable.ignored_columns``.
    """
    if uncertain not in _UNCERTAIN_VALUE:
        raise ConfigError(f"uncertain must be one of {sorted(_UNCERTAIN_VALUE)}, got {uncertain!r}")
    if blank not in _BLANK_VALUE:
        raise ConfigError(f"blank must be one of {sorted(_BLANK_VALUE)}, got {blank!r}")
    if hf.is_dataset(path):
        data = _dataset(path, split)
        column = dataset_text_column(path, data, text_column)
        frame, first_row = data.to_pandas(), 0
    else:
        path = _table_path(path, split=split)
        frame, first_row = _read_frame(path, text_column)
        column = _text_column(path, list(frame.columns), text_column, first_row)
    if frame.empty:
        raise InputFileError(f"{path}: no rows")

    named = dict(aliases or {})
    if label_columns is None:
        custom = set(custom_labels)
        label_columns = [
            c
            for c in frame.columns
            if c != column
            and isinstance(c, str)
            and (is_known(c) or c in custom or c.casefold() in named)
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
        space = LabelSpace.of(
            [named.get(c.casefold(), c) for c in label_columns], allow_unknown=True
        )
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

    reports = _reports(path, frame, column, first_row)
    if not reports.texts:
        raise _no_usable_text(path, f"column {column!r}", len(frame))
    keep = np.array([report_text(t) != "" for t in frame[column].tolist()], dtype=bool)
    corrected = _corrected(path, frame, label_columns, space, first_row)
    kept_row = np.cumsum(keep) - 1
    return replace(
        reports,
        labels=labels[keep],
        label_space=space,
        ignored_columns=tuple(
            str(c)
            for c in frame.columns
            if c not in (column, "id", CORRECTED_COLUMN, *label_columns, *CORPUS_COLUMNS)
        ),
        blank_columns=tuple(space[label_columns.index(c)] for c in blank_columns),
        corrected={(int(kept_row[r]), c): v for (r, c), v in corrected.items() if keep[r]},
    )


def _corrected(
    path: str | Path, frame: pd.DataFrame, columns: list[str], space: LabelSpace, first_row: int
) -> dict[tuple[int, str], float]:
    """The cells :data:`CORRECTED_COLUMN` names, by frame row and label, with their four-state
    values; a name that is no label column of the table is an error naming its row."""
    if CORRECTED_COLUMN not in frame.columns:
        return {}
    label_of = {c.casefold(): (c, space[k]) for k, c in enumerate(columns)}
    out: dict[tuple[int, str], float] = {}
    for row, cell in enumerate(frame[CORRECTED_COLUMN].tolist()):
        for name in filter(None, (n.strip() for n in _cell(cell).split(";"))):
            if name.casefold() not in label_of:
                hint = (
                    " (a finding your hospital defines: train with its file, --findings)"
                    if name in frame.columns
                    else ""
                )
                raise InputFileError(
                    f"{path}: row {row + first_row}, column {CORRECTED_COLUMN!r}: {name!r} is "
                    f"not one of the table's label columns {columns}{hint}"
                )
            column, label = label_of[name.casefold()]
            value = _cell(frame[column].iloc[row])
            out[row, label] = float(value) if value else np.nan
    return out


#: reports read at once by :func:`iter_reports`
REPORT_CHUNK = 2048


def iter_reports(
    path: str | Path,
    *,
    text_column: str | None = None,
    split: str | None = None,
    rows: int = REPORT_CHUNK,
) -> Iterator[ReportTable]:
    """The reports of a table ``rows`` file rows at a time (texts and ids; labels are not read),
    so a table of any size is read in flat memory. Each chunk is a :class:`ReportTable` with its
    own ``skipped_empty`` and each report's ``positions``; ids are as :func:`read_table` gives
    them (``split``: as there). A malformed row raises when its chunk is read:
    :func:`count_reports` checks the whole file first."""
    if hf.is_dataset(path):
        yield from _dataset_reports(path, text_column, split, rows)
        return
    path = _table_path(path, split=split)
    if _is_parquet(path):
        file = _parquet_file(path)
        names = list(file.schema_arrow.names)
        column = _text_column(path, names, text_column, 2)
        wanted = _reports_columns(column, names)
        frames: Iterator[pd.DataFrame] = (
            batch.to_pandas() for batch in file.iter_batches(batch_size=rows, columns=wanted)
        )
        first_row = 2
        frames = (_checked_parquet(path, frame, column) for frame in frames)
    else:
        layout, records = _csv_layout(path, text_column)
        column = _text_column(path, layout.columns, text_column, layout.first_row)
        frames = (
            pd.DataFrame(list(batch), columns=layout.columns, dtype=object)
            for batch in _batched(records, rows)
        )
        first_row = layout.first_row
    start = 0
    for frame in frames:
        yield _reports(path, frame, column, first_row + start, start)
        start += len(frame)


def _dataset(path: str | Path, split: str | None) -> Any:
    """The dataset (one split) ``path`` names, memory-mapped (:mod:`reportfed.data.hf`)."""
    return hf.choose_split(hf.load(path), path, split)


def dataset_text_column(path: str | Path, data: Any, text_column: str | None) -> str:
    """The text column of the Hugging Face dataset ``data`` (read from ``path``): found as a
    table's (:func:`_text_column`), and a column of strings."""
    if data.column_names is None:
        raise InputFileError(
            f"{path}: its columns are not known before it is read (a streamed dataset without "
            "features): give its features, or load it as a Dataset"
        )
    column = _text_column(path, data.column_names, text_column, 0)
    if column not in hf.string_columns(data):
        raise InputFileError(
            f"{path}: column {column!r} holds {data.features[column]} values, not report text"
        )
    return str(column)


def _dataset_reports(
    path: str | Path, text_column: str | None, split: str | None, rows: int
) -> Iterator[ReportTable]:
    """:func:`iter_reports` of a Hugging Face dataset: its ids are its ``id`` column, else each
    row's index (from 0)."""
    data = _dataset(path, split)
    column = dataset_text_column(path, data, text_column)
    wanted = _reports_columns(column, data.column_names)
    start = 0
    for batch in hf.batches(data, wanted, rows):
        frame = pd.DataFrame(batch, columns=wanted, dtype=object)
        yield _reports(path, frame, column, start, start)
        start += len(frame)


def _reports_columns(column: Any, columns: Sequence[Any]) -> list[Any]:
    """The columns :func:`iter_reports` reads of a table with ``columns``: the text
    ``column``, and ``id`` where there is one."""
    return [column, *(["id"] if "id" in columns and column != "id" else [])]


def count_reports(
    path: str | Path, *, text_column: str | None = None, split: str | None = None
) -> tuple[int, int]:
    """``(usable, skipped)`` report counts of a table, read through once in flat memory: every
    row is checked, so a malformed row is found before long work starts (:func:`iter_reports`)."""
    usable = skipped = 0
    for chunk in iter_reports(path, text_column=text_column, split=split):
        usable += len(chunk)
        skipped += chunk.skipped_empty
    if not usable + skipped:
        raise InputFileError(f"{path}: no rows")
    if not usable:
        where = f"column {text_column!r}" if text_column else "its text column"
        raise _no_usable_text(path, where, skipped)
    return usable, skipped


def _batched(items: Iterator[list[str]], size: int) -> Iterator[list[list[str]]]:
    """``items`` in lists of ``size`` (the last may be shorter)."""
    while batch := list(itertools.islice(items, size)):
        yield batch


def _table_path(path: str | Path, what: str = "a reports table", split: str | None = None) -> Path:
    """``path`` as the path of a ``what``, or an :class:`InputFileError` saying why not
    (``split``: a dataset's, which a table has not)."""
    path = Path(path)
    if split is not None:
        raise InputFileError(f"{path}: a table has no splits; --split chooses a dataset's")
    if path.is_dir():
        raise InputFileError(f"{path}: is a directory, not {what}")
    if not path.is_file():
        raise InputFileError(f"{path}: no such file")
    kind = _container(path)
    if kind == "zip":
        raise InputFileError(
            f"{path}: is a zip archive; reportfed reads a CSV (plain or gzipped) or Parquet "
            "table: unzip it and give the table inside"
        )
    if kind == "spreadsheet" or (kind is None and path.suffix.lower() in SPREADSHEETS):
        raise InputFileError(
            f"{path}: is a spreadsheet; reportfed reads CSV or Parquet: save its sheet as CSV "
            "(Excel: File > Save As > CSV UTF-8; LibreOffice: File > Save As > Text CSV) and "
            "give that file"
        )
    return path


#: spreadsheet files, refused with how to export them (outputs may be written as .xlsx)
SPREADSHEETS = frozenset({".xlsx", ".xlsm", ".xls", ".ods"})


def _container(path: Path) -> str | None:
    """What a file's first bytes say it is, whatever its name: ``"spreadsheet"`` (an Office
    file: a zip holding an xlsx or ods workbook, or OLE2's xls), ``"zip"`` (any other zip
    archive), else ``None``; never a CSV, which would otherwise fail as text that is not UTF-8."""
    import zipfile

    with path.open("rb") as f:
        head = f.read(8)
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return "spreadsheet"
    if not head.startswith(b"PK\x03\x04"):
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return "zip"
    office = {"[Content_Types].xml", "mimetype"}
    return "spreadsheet" if names & office else "zip"


def _text_column(
    path: str | Path, columns: list[Any], text_column: str | None, first_row: int
) -> Any:
    """The text column of a table with ``columns`` (``0`` in a headerless one; see
    :func:`_read_frame`), or an :class:`InputFileError` naming the columns there are."""
    column = _find_text_column(columns, text_column) if first_row != 1 else 0
    if column is None:
        wanted = repr(text_column) if text_column else f"one of {list(TEXT_COLUMNS)}"
        raise InputFileError(f"{path}: no text column {wanted}; columns are {columns}")
    return column


def _no_usable_text(path: str | Path, where: str, rows: int) -> InputFileError:
    return InputFileError(
        f"{path}: no usable report text in {where} (all {rows} empty, missing or without a word)"
    )


def _reports(
    path: str | Path, frame: pd.DataFrame, column: Any, first_row: int, start: int = 0
) -> ReportTable:
    """The usable reports of ``frame`` (file row ``first_row`` first, ``start`` rows after the
    source's first) with their ids: the ``id`` column, else the file row."""
    texts = [report_text(t) for t in frame[column].tolist()]
    if "id" in frame.columns:
        ids = [str(x) for x in frame["id"].tolist()]
    else:
        ids = [str(i + first_row) for i in range(len(frame))]
    kept = [(t, i) for t, i in zip(texts, ids, strict=True) if t]
    return ReportTable(
        positions=tuple(start + k for k, t in enumerate(texts) if t),
        texts=[t for t, _ in kept],
        labels=np.zeros((len(kept), 0), dtype=np.float32),
        label_space=LabelSpace(()),
        ids=[i for _, i in kept],
        source=str(path),
        skipped_empty=len(texts) - len(kept),
        id_column="id" if "id" in frame.columns else None,
    )


def _is_text(column: pd.Series) -> bool:
    """Whether a Parquet column holds strings (or nothing), not numbers, booleans or dates."""
    return pd.api.types.is_string_dtype(column) or all(
        isinstance(v, str) or _cell(v) == "" for v in column.tolist()
    )


def report_text(value: object) -> str:
    """A report cell as text, as read (:func:`~reportfed.core.characters.as_read`); "" for a missing value (None, NaN, or a cell like ``NA``) and for
    a cell without a word (``12345``, ``3.14``, ``-1``: a number is no report)."""
    text = as_read(_cell(value))
    return "" if text.lower() in MISSING_TEXT or not _WORD.search(text) else text
