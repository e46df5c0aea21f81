"""``python -m experiments NAME`` (:mod:`experiments.suite`) or ``python -m experiments simulate``
(:mod:`experiments.simulate`). Bad input and a folder that cannot be written end in one
``reportfed: error:`` line and exit status 2, as the ``reportfed`` command does."""

import sys

from experiments import simulate, suite
from reportfed.core.errors import ReportfedError

argv = sys.argv[1:]
try:
    if argv[:1] == ["simulate"]:
        raise SystemExit(simulate.main(argv[1:]))
    suite.main(argv)
except (ReportfedError, OSError) as exc:
    detail = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) and exc.filename else exc
    print(f"reportfed: error: {detail}", file=sys.stderr)
    raise SystemExit(2) from None
