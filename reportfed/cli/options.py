"""What every ``reportfed`` command shares: messages, option groups, the output checks and the
parser class whose help shows defaults."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from reportfed.core.config import GRANULARITIES, GRANULARITY_HELP
from reportfed.core.errors import ReportfedError
from reportfed.core.files import check_writable, table_format


def say(msg: str) -> None:
    """Print a progress or result line on stderr (stdout stays free for data)."""
    print(msg, file=sys.stderr, flush=True)


def warn(msg: str) -> None:
    """Warn the user in one ``reportfed: warning: ...`` line on stderr (reportfed's logger,
    which :func:`voice` shows): the command line's one way to warn."""
    logging.getLogger("reportfed").warning("%s", msg)


class _Voice(logging.Formatter):
    """The library's log as the command line says it: notes as they are, warnings as
    ``reportfed: warning:`` lines."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        return f"reportfed: warning: {text}" if record.levelno >= logging.WARNING else text


@contextlib.contextmanager
def voice() -> Iterator[None]:
    """While a command runs, show reportfed's log (``logging.getLogger("reportfed")``, where the
    library's modules log) on stderr beside :func:`say`'s lines, from INFO up, and nowhere else
    (the logger's other handlers and its parents wait until the command ends)."""
    logger = logging.getLogger("reportfed")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Voice())
    handlers, level, propagate = logger.handlers, logger.level, logger.propagate
    logger.handlers = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.handlers = handlers
        logger.setLevel(level)
        logger.propagate = propagate


def names(text: str) -> list[str]:
    """The names of a comma-separated option (blanks dropped)."""
    return [s.strip() for s in text.split(",") if s.strip()]


def label_counts(labels: Sequence[str], y: np.ndarray) -> str:
    """One line per label: its positive (1) and missing cells in ``y``."""
    rows = [
        f"  {n:<28}{int((y[:, i] == 1).sum()):>6} positive  {int(np.isnan(y[:, i]).sum()):>5} missing"
        for i, n in enumerate(labels)
    ]
    return "\n".join(rows)


def check_outputs(
    outputs: Sequence[tuple[str, Path]],
    *,
    tables: Sequence[tuple[str, Path]] = (),
    inputs: Sequence[tuple[str, Path]] = (),
) -> None:
    """Before any work: every output writable in a folder that exists (a mistyped folder is
    not made), every table's suffix a format it can be written in, none of them an input or
    another output."""
    for flag, path in [*outputs, *tables]:
        check_writable(path)
        if not path.resolve().parent.is_dir():
            raise ReportfedError(
                f"{flag} {path}: the folder {path.parent} does not exist; make it first"
            )
    for flag, path in tables:
        try:
            table_format(path)
        except ReportfedError as exc:
            raise ReportfedError(f"{flag} {exc}") from None
    named = [*inputs, *outputs, *tables]
    for i, (flag, path) in enumerate(named):
        for other, other_path in named[:i]:
            if path.resolve() == other_path.resolve():
                raise ReportfedError(f"{flag} and {other} are the same file: {path}")


def add_embedder_options(p: argparse.ArgumentParser, *, choose: bool = True) -> None:
    """``--cache-dir``, ``--precision``, ``--backend`` and, with ``choose``, ``--embedder`` and ``--base-url``."""
    from reportfed.core.paths import embeddings_cache_dir
    from reportfed.embed import BACKENDS

    p.add_argument(
        "--cache-dir", default=str(embeddings_cache_dir()), help="embedding cache directory"
    )
    p.add_argument(
        "--precision",
        choices=("auto", "fp32", "bf16"),
        default=None,
        help="how a local embedder computes (default: $REPORTFED_PRECISION, else auto: bf16 where "
        "the processor multiplies bf16 natively, fp32 elsewhere); the model file is the same",
    )
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default=None,
        help="what runs a sentence-transformers embedder (default: $REPORTFED_BACKEND, else auto: "
        "openvino on a CPU, torch on a GPU); torch, openvino and onnx (pip install "
        "'reportfed[onnx]') give one vector space, onnx-int8 one of its own (a model trained on "
        "it needs it)",
    )
    if not choose:
        return
    p.add_argument(
        "--embedder",
        default="minilm",
        help="minilm (default) | st:PATH_OR_ID | hf:PATH_OR_ID | openai:MODEL",
    )
    p.add_argument("--base-url", default=None, help="base URL of an OpenAI-compatible API")


def add_granularity(p: argparse.ArgumentParser) -> None:
    """``--granularity`` (how reports are embedded; the product's default, sentence)."""
    p.add_argument(
        "--granularity", choices=GRANULARITIES, default="sentence", help=GRANULARITY_HELP
    )


def add_report_columns(p: argparse.ArgumentParser) -> None:
    """``--text-column`` (which column holds the reports) and ``--split`` (which split of a
    Hugging Face dataset)."""
    p.add_argument(
        "--text-column",
        default=None,
        help="the report column (default: the first of Reports, Report Impression, REPORT, "
        "report, text)",
    )
    p.add_argument(
        "--split",
        default=None,
        help="the split of a Hugging Face dataset with several (a DatasetDict, or shards named "
        "by split)",
    )


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows an option's default, unless it is None or the help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default in (None, "") or "default" in text:
            return text
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """An argument parser whose help shows each option's default."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)
