"""``python -m experiments``: see :mod:`experiments.suite`."""

from experiments.suite import main

main()
