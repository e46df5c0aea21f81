"""Typed errors. Each carries a one-line message naming what was wrong and where."""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

#: an absolute path on this machine (``/...``, ``~/...``), not the path part of a URL
_PATH = re.compile(r"(?<![\w./~])~?/(?!/)(?:[^\s'\"/,;()]+/)*([^\s'\"/,;()]*)")


def without_paths(text: str) -> str:
    """``text`` with every absolute path on this machine cut to its last part (``.../name``):
    what a node tells the server of its failures names the file, never where it lies."""
    return _PATH.sub(lambda m: f".../{m.group(1)}", text)


class ReportfedError(Exception):
    """Base class of every error reportfed raises on bad input."""


class LabelError(ReportfedError, ValueError):
    """An unknown, empty or duplicate label name (a ``ValueError``, as scikit-learn raises)."""


class InputFileError(ReportfedError, ValueError):
    """A reports or labels file that cannot be used (names the file, row and column)."""


class OutputFileError(ReportfedError):
    """An output path that cannot be written (a directory, no permission, a full disk)."""


class ArchiveError(ReportfedError):
    """The IU archive cannot be found, fetched or verified."""


class EmbeddingError(ReportfedError):
    """An embedding backend failed (bad model path, HTTP 4xx, wrong output shape)."""


class ConfigError(ReportfedError, ValueError):
    """A hyperparameter or option outside its range (names the option and the range)."""


class ModelFileError(ReportfedError, ValueError):
    """A model file that is truncated, corrupted, or made for another embedder."""


class PolicyError(ReportfedError):
    """Something a node's own settings forbid it to do for a run (another embedder, a run
    without secure aggregation where it requires it): the node refuses, saying why."""


class RunFailedError(ReportfedError):
    """A federation run that ended without its global model (too few nodes joined, every update
    rejected...): the command line exits with status 1, where bad input exits with 2."""


class InvalidUpdateError(ReportfedError):
    """A node's update that cannot be aggregated (shape, NaN/Inf, keys, duplicate labels)."""

    def __init__(self, node_id: str, reason: str) -> None:
        super().__init__(f"node {node_id!r}: {reason}")
        self.node_id = node_id
        self.reason = reason


class NoValidUpdateError(InvalidUpdateError):
    """Every update of a round was rejected; ``rejected`` maps each node to its reason."""

    def __init__(self, rejected: dict[str, str]) -> None:
        super().__init__(",".join(sorted(rejected)), f"every update was rejected: {rejected}")
        self.rejected = rejected


class ReportfedWarning(UserWarning):
    """A result that was produced but is probably not what the user wants (the CLI prints it as
    ``reportfed: warning: ...``)."""


#: the installed package's folder: a warning names the first line outside it
_PACKAGE = str(Path(__file__).resolve().parents[1])


def warn(message: str) -> None:
    """Warn ``message`` as a :class:`ReportfedWarning` attributed to the caller's own line, the
    first frame outside reportfed (what ``stacklevel`` guesses, counted for every path)."""
    frame = sys._getframe(1)
    level = 2
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    warnings.warn(message, ReportfedWarning, stacklevel=level)
