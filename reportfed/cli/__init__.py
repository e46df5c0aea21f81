"""``reportfed`` command line: label, train, corpus, embed, federation.

Every bad input ends in one line ``reportfed: error: ...`` on stderr and exit status 2, and a
federation run that ends without its model in such a line and status 1, with no partial output
file left behind. Each command lives in its own module here; they share
:mod:`reportfed.cli.options`.
"""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Sequence
from typing import Any

from reportfed.cli import data, federation, label, train
from reportfed.cli.options import Parser, say
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
                say(f"reportfed: warning: {message}")
            else:
                default(message, category, *rest, **kw)

        warnings.showwarning = show
        # how vectors are computed: read by embed/ here and in the processes this one starts
        numerics = {
            f"REPORTFED_{flag.upper()}": getattr(args, flag)
            for flag in ("precision", "backend")
            if getattr(args, flag, None)
        }
        before = {name: os.environ.get(name) for name in numerics}
        os.environ.update(numerics)
        try:
            args.func(args)
        except ReportfedError as exc:
            say(f"reportfed: error: {exc}")
            return 1 if isinstance(exc, RunFailedError) else 2
        except KeyboardInterrupt:
            say("reportfed: interrupted")
            return 130
        finally:  # a caller's later work (main() called in process) is not this command's
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``reportfed`` console script."""
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
