"""Atomic file output: a reader sees the old file or the whole new one, never half of one, and
several outputs of one command are written all or none.

A replaced file keeps its permissions (a 0600 file of patient text stays 0600); a path that is a
symbolic link has the file it points to replaced, and the link stays.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from reportfed.core.errors import OutputFileError

if TYPE_CHECKING:
    import pandas as pd


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
    every one is written are they moved into place (a failed write replaces no file)."""
    staged: list[tuple[Path, Path]] = []
    try:
        for path, data in outputs:
            target = check_writable(path)
            staged.append((target, _stage(target, data)))
        for target, tmp in staged:
            os.replace(tmp, target)
    except OSError as exc:
        raise OutputFileError(f"{target}: cannot write ({exc.strerror or exc})") from None
    finally:
        for _, tmp in staged:
            tmp.unlink(missing_ok=True)
    return [target for target, _ in staged]


def _stage(path: Path, data: Data) -> Path:
    """``data`` written to a new temporary file beside ``path``, with the permissions ``path``
    has (a new file: ordinary permissions)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        if callable(data):
            data(tmp)
        else:
            tmp.write_bytes(data)
        if path.exists():
            mode = path.stat().st_mode & 0o777  # keep a replaced file's permissions
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask  # mkstemp creates 0600; give a new file ordinary permissions
        os.chmod(tmp, mode)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


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
#: the most characters an Excel cell holds
EXCEL_CELL_LIMIT = 32_767


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
    fmt = table_format(path)
    gz = "gzip" if str(path).lower().endswith(".gz") else None
    if fmt == "parquet":
        return lambda tmp: frame.to_parquet(tmp, index=False)
    if fmt == "xlsx":
        try:
            import openpyxl  # noqa: F401 - pandas' Excel engine
        except ImportError:
            raise OutputFileError(
                f"{path}: writing Excel needs openpyxl: pip install 'reportfed[excel]'"
            ) from None
        long = frame.map(lambda v: isinstance(v, str) and len(v) > EXCEL_CELL_LIMIT).to_numpy()
        if long.any():
            row = int(long.any(axis=1).argmax())
            raise OutputFileError(
                f"{path}: row {row + 1} has a cell over Excel's {EXCEL_CELL_LIMIT:,} characters; "
                "write .csv or .parquet"
            )
        return lambda tmp: frame.to_excel(tmp, index=False, engine="openpyxl")
    sep = "\t" if fmt == "tsv" else ","
    return lambda tmp: frame.to_csv(tmp, index=False, sep=sep, compression=gz)
