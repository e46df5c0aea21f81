"""Federated training: the in-process engine (and, with the ``flower`` extra, Flower apps)."""
