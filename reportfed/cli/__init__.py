"""``reportfed`` command line: label, train, corpus, embed, federation.

Every bad input ends in one line ``reportfed: error: ...`` on stderr and exit status 2, and a
federation run that ends without its model in such a line and status 1, with no partial output
file left behind. Each command lives in its own module here; they share
:mod:`reportfed.cli.options`.
"""

from __future__ import annotations

import argparse
import logging
import warnings
from collections.abc import Sequence
from typing import Any

from reportfed.cli import data, federation, label, train
from reportfed.cli.options import Parser, say, voice
from reportfed.core.errors import ReportfedError, ReportfedWarning, RunFailedError


def build_parser() -> argparse.ArgumentParser:
    """The ``reportfed`` argument parser."""
    parser = Parser(prog="reportfed", description=__doc__.splitlines()[0].replace("``", ""))
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    data.add_parsers(sub)
    train.add_parser(sub)
    label.add_parser(sub)
    federation.add_parser(sub)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the command ``args.func`` parsed: a ``ReportfedError`` becomes one line and status 2,
    a ``ReportfedWarning`` a ``reportfed: warning:`` line."""
    with warnings.catch_warnings():
        default = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], *rest: Any, **kw: Any) -> None:
            if issubclass(category, ReportfedWarning):
                logging.getLogger("reportfed").warning("%s", message)
            else:
                default(message, category, *rest, **kw)

        warnings.showwarning = show
        try:
            with voice():
                args.func(args)
        except ReportfedError as exc:
            say(f"reportfed: error: {exc}")
            return 1 if isinstance(exc, RunFailedError) else 2
        except KeyboardInterrupt:
            say("reportfed: interrupted")
            return 130
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``reportfed`` console script."""
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
