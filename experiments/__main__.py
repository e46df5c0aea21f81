"""``python -m experiments NAME`` (:mod:`experiments.suite`) or ``python -m experiments simulate``
(:mod:`experiments.simulate`)."""

import sys

from experiments import simulate, suite

argv = sys.argv[1:]
if argv[:1] == ["simulate"]:
    raise SystemExit(simulate.main(argv[1:]))
suite.main(argv)
