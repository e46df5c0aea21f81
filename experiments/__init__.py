"""Experiment runners: ``python -m experiments <name> [--repeats N] [--quick]``."""
