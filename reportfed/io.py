"""Atomic file output: a reader sees the old file or the whole new one, never half of one.

A replaced file keeps its permissions (a 0600 file of patient text stays 0600); a path that is a
symbolic link has the file it points to replaced, and the link stays.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from reportfed.errors import OutputFileError


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


def atomic_write(path: str | Path, data: bytes | Callable[[Path], None]) -> Path:
    """Write ``data`` (bytes, or a function that writes a given temp path) to ``path`` atomically."""
    path = check_writable(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise OutputFileError(f"{path}: cannot write ({exc.strerror})") from None
    tmp = Path(tmp_name)
    try:
        if callable(data):
            os.close(fd)
            data(tmp)
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        if path.exists():
            mode = path.stat().st_mode & 0o777  # keep a replaced file's permissions
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask  # mkstemp creates 0600; give a new file ordinary permissions
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputFileError(f"{path}: cannot write ({exc.strerror or exc})") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
