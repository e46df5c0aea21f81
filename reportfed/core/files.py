"""Atomic file output: a reader sees the old file or the whole new one, never half of one, and
several outputs of one command are written all or none.

A replaced file keeps its permissions (a 0600 file of patient text stays 0600); a path that is a
symbolic link has the file it points to replaced, and the link stays.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reportfed.core.errors import OutputFileError

if TYPE_CHECKING:
    import pandas as pd


def file_signature(path: str | Path) -> tuple[int, int, int]:
    """What tells whether a file changed since it was read: its inode, size and modification
    time (``OSError`` when it is gone). A file replaced atomically gets a new inode."""
    stat = Path(path).stat()
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def check_writable(path: str | Path) -> Path:
    """``path`` as a file :func:`atomic_write` can write (following a symbolic link), or a
    :class:`OutputFileError` saying why not: call it before long work whose output goes there."""
    path = Path(path)
    target = path.resolve() if path.is_symlink() else path
    if target.is_dir():
        raise OutputFileError(f"{path}: is a directory, not a file")
    parent = next((p for p in target.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise OutputFileError(f"{path}: {parent} is a file, not a directory")
    if parent is not None and not os.access(parent, os.W_OK | os.X_OK):
        raise OutputFileError(f"{path}: no permission to write in {parent}")
    return target


#: what an output is: its bytes, or a function that writes them to a given (temporary) path
Data = bytes | Callable[[Path], None]


def atomic_write(path: str | Path, data: Data) -> Path:
    """Write ``data`` to ``path`` atomically."""
    return write_together([(path, data)])[0]


def write_together(outputs: Sequence[tuple[str | Path, Data]]) -> list[Path]:
    """Write several outputs all or none: each goes to a temporary file beside it, and only when
    every one is written are they moved into place (:func:`_move_all`)."""
    staged: list[tuple[Path, Path]] = []
    try:
        for path, data in outputs:
            target = check_writable(path)
            staged.append((target, _stage(target, data)))
        _move_all(staged)
    except OSError as exc:
        raise OutputFileError(f"{target}: cannot write ({exc.strerror or exc})") from None
    finally:
        for _, tmp in staged:
            tmp.unlink(missing_ok=True)
    return [target for target, _ in staged]


def _move_all(staged: Sequence[tuple[Path, Path]]) -> None:
    """Move each written temporary file onto its target, all or none: each is flushed to disk
    first; where a move fails after others succeeded, those are moved back (each file they
    replaced is kept as a hard link until all are in place), so the targets are all the old
    ones again, and the error is raised. Not covered: a crash of the machine between two moves,
    or a move back that fails too; each target is then whole, old or new, never part of one."""
    for _, tmp in staged:
        with open(tmp, "rb+") as written:
            os.fsync(written.fileno())
    moved: list[tuple[Path, Path | None]] = []  # each target moved, and the file it replaced
    try:
        for target, tmp in staged:
            kept = _kept(target)
            try:
                os.replace(tmp, target)
            except OSError:
                if kept is not None:
                    kept.unlink(missing_ok=True)
                raise
            moved.append((target, kept))
    except OSError:
        for target, kept in reversed(moved):
            with contextlib.suppress(OSError):
                if kept is None:
                    target.unlink()
                else:
                    os.replace(kept, target)
        raise
    finally:
        for _, kept in moved:
            if kept is not None:
                kept.unlink(missing_ok=True)
    for folder in {target.parent for target, _ in staged}:
        _sync_folder(folder)


def _kept(target: Path) -> Path | None:
    """The file at ``target``, kept under a second name beside it (a hard link) until its
    replacement is in place; ``None`` where there is none."""
    if not target.is_file():
        return None
    kept = _temporary(target)
    kept.unlink()
    os.link(target, kept)
    return kept


def _sync_folder(folder: Path) -> None:
    """Flush ``folder``'s entries (the renames into it) to disk, where its file system can."""
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def _stage(path: Path, data: Data) -> Path:
    """``data`` written to a new temporary file beside ``path``, with the permissions ``path``
    has (a new file: ordinary permissions)."""
    tmp = _temporary(path)
    try:
        if callable(data):
            data(tmp)
        else:
            tmp.write_bytes(data)
        _give_mode(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _temporary(path: Path) -> Path:
    """A new empty temporary file beside ``path`` (its folders made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    return Path(tmp_name)


def _give_mode(tmp: Path, path: Path) -> None:
    """Give ``tmp`` the permissions of the file ``path`` it replaces (a new file: ordinary ones;
    mkstemp creates 0600)."""
    if path.exists():
        mode = path.stat().st_mode & 0o777
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(tmp, mode)


class StagedTables:
    """Tables written a chunk at a time and moved into place all or none: each path's chunks go
    to a temporary file beside it (:meth:`append`, in the format its name gives:
    :func:`table_format`), and leaving the ``with`` block moves every one into place
    (:func:`_move_all`), or, on an error, removes them all and replaces no file. A million rows go through in flat memory."""

    def __init__(self, paths: Sequence[str | Path]) -> None:
        self._targets = {Path(p): check_writable(p) for p in paths}  # path -> file written
        for path in self._targets:
            table_format(path)
        self._writers: dict[Path, _TableWriter] = {}
        self._empty: dict[Path, pd.DataFrame] = {}

    def __enter__(self) -> StagedTables:
        return self

    def append(self, path: str | Path, frame: pd.DataFrame) -> None:
        """Add ``frame``'s rows to the table bound for ``path`` (its columns as the first
        chunk's; the first chunk also gives the header)."""
        path = Path(path)
        if path not in self._targets:
            raise ValueError(f"{path} is not one of this staging's paths")
        if frame.empty and path in self._writers:
            return
        if frame.empty:  # its columns give the header if no row ever comes
            self._empty[path] = frame
            return
        target = self._targets[path]
        try:
            if path not in self._writers:
                self._writers[path] = _TableWriter(path, _temporary(target))
            self._writers[path].append(frame)
        except OSError as exc:
            raise OutputFileError(f"{target}: cannot write ({exc.strerror or exc})") from None

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        try:
            if kind is None:
                for path, frame in self._empty.items():
                    if path not in self._writers:
                        self._writers[path] = _TableWriter(path, _temporary(self._targets[path]))
                        self._writers[path].append(frame)
            for writer in self._writers.values():
                writer.close()
            missing = [path for path in self._targets if path not in self._writers]
            if kind is None and missing:
                raise OutputFileError(f"{missing[0]}: no table was written")
            if kind is None:
                staged = [(t, self._writers[p].tmp) for p, t in self._targets.items()]
                for target, tmp in staged:
                    _give_mode(tmp, target)
                _move_all(staged)
        except OSError as exc:
            raise OutputFileError(f"cannot write the outputs ({exc.strerror or exc})") from None
        finally:
            for writer in self._writers.values():
                writer.tmp.unlink(missing_ok=True)


#: output table formats by file suffix (no suffix: CSV)
TABLE_FORMATS = {
    ".csv": "csv",
    ".csv.gz": "csv",
    ".tsv": "tsv",
    ".tsv.gz": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".xlsx": "xlsx",
}
#: what a spreadsheet reads as the start of a formula (OWASP's rule against CSV injection)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def formula_safe(value: str) -> str:
    """``value`` as a spreadsheet shows it as text: with a leading ``'`` where it starts like a
    formula (:data:`FORMULA_STARTS`) and is no number ("-1" stays a number)."""
    if value.startswith(FORMULA_STARTS) and not _number(value):
        return "'" + value
    return value


def _number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _text_columns_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every text cell and column name :func:`formula_safe` (numbers untouched)."""
    import pandas as pd

    out = frame.rename(columns=lambda c: formula_safe(c) if isinstance(c, str) else c)
    for column in out.columns:
        values = out[column]
        if values.dtype == "object" or pd.api.types.is_string_dtype(values.dtype):
            out[column] = values.map(lambda v: formula_safe(v) if isinstance(v, str) else v)
    return out


#: the most characters an Excel cell holds
EXCEL_CELL_LIMIT = 32_767
#: the most rows an Excel sheet holds
EXCEL_ROW_LIMIT = 1_048_576


def table_format(path: str | Path) -> str:
    """The format :func:`table_data` writes to ``path`` (by suffix), or a
    :class:`OutputFileError` naming the suffixes it knows."""
    name = Path(path).name.lower()
    suffix = next((s for s in sorted(TABLE_FORMATS, key=len, reverse=True) if name.endswith(s)), "")
    if suffix:
        return TABLE_FORMATS[suffix]
    if not Path(name).suffix:
        return "csv"
    raise OutputFileError(
        f"{path}: cannot write a table as {Path(name).suffix!r}; name it "
        + ", ".join(TABLE_FORMATS)
        + " (or no suffix, CSV)"
    )


def table_data(frame: pd.DataFrame, path: str | Path) -> Callable[[Path], None]:
    """A writer of ``frame`` in the format ``path`` names (:func:`table_format`), gzip-compressed
    for a ``.gz`` suffix, for :func:`write_together`."""
    table_format(path)

    def write(tmp: Path) -> None:
        writer = _TableWriter(Path(path), tmp)
        try:
            writer.append(frame)
        finally:
            writer.close()

    return write


class _TableWriter:
    """Rows appended to one table file ``tmp``, in the format ``path``'s name gives."""

    def __init__(self, path: Path, tmp: Path) -> None:
        self.path, self.tmp = path, tmp
        self.format = table_format(path)
        self.rows = 0
        self._handle: Any = None  # the open CSV file, Parquet writer or Excel workbook
        self._sheet: Any = None

    def append(self, frame: pd.DataFrame) -> None:
        """Write ``frame``'s rows; in a spreadsheet's formats (CSV, TSV, Excel) a text cell that
        starts like a formula is written as text (:func:`formula_safe`)."""
        first = self._handle is None
        if self.format != "parquet":
            frame = _text_columns_safe(frame)
        if self.format == "parquet":
            self._parquet(frame)
        elif self.format == "xlsx":
            self._excel(frame)
        else:
            if first:
                gz = str(self.path).lower().endswith(".gz")
                opener: Any = gzip.open if gz else open
                self._handle = opener(self.tmp, "wt", encoding="utf-8", newline="")
            sep = "\t" if self.format == "tsv" else ","
            frame.to_csv(self._handle, index=False, sep=sep, header=first)
        self.rows += len(frame)

    def _parquet(self, frame: pd.DataFrame) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self._handle is None:
            table = pa.Table.from_pandas(frame, preserve_index=False)
            self._handle = pq.ParquetWriter(self.tmp, table.schema)
        else:
            table = pa.Table.from_pandas(frame, schema=self._handle.schema, preserve_index=False)
        self._handle.write_table(table)

    def _excel(self, frame: pd.DataFrame) -> None:
        try:
            import openpyxl
        except ImportError:
            raise OutputFileError(
                f"{self.path}: writing Excel needs openpyxl: pip install 'reportfed[excel]'"
            ) from None
        long = frame.map(lambda v: isinstance(v, str) and len(v) > EXCEL_CELL_LIMIT).to_numpy()
        if long.any():
            row = self.rows + int(long.any(axis=1).argmax())
            raise OutputFileError(
                f"{self.path}: row {row + 1} has a cell over Excel's {EXCEL_CELL_LIMIT:,} "
                "characters; write .csv or .parquet"
            )
        if self.rows + len(frame) >= EXCEL_ROW_LIMIT:
            raise OutputFileError(
                f"{self.path}: over Excel's {EXCEL_ROW_LIMIT:,} rows; write .csv or .parquet"
            )
        if self._handle is None:
            self._handle = openpyxl.Workbook(write_only=True)
            self._sheet = self._handle.create_sheet("Sheet1")
            self._sheet.append([str(c) for c in frame.columns])
        cells = frame.astype(object).where(frame.notna(), None)
        for row in cells.itertuples(index=False, name=None):
            self._sheet.append([v.item() if hasattr(v, "item") else v for v in row])

    def close(self) -> None:
        """Finish the file (an Excel workbook is saved here)."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        if self.format == "xlsx":
            handle.save(self.tmp)
        else:
            handle.close()
