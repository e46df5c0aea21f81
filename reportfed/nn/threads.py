"""Torch's thread count for small-MLP training, chosen from measurements
(``benchmarks/contention.py``, 2 cores).

A node's MLP trains on batches of 32 rows: thousands of small operations, each too small to share
between cores. With torch's default (one thread per core) every operation is an OpenMP parallel
region whose threads spin while they wait for each other, and when other processes keep the
cores busy a thread waits for a descheduled sibling: training the default model took 5-15x longer
next to a CPU-bound job, and up to 60x in single runs. With one thread it runs 1.3x slower alone
and about 1.5x slower next to the same job. Embedding (large matrix products) keeps torch's
default, which is 1.8x faster alone. ``REPORTFED_TRAINING_THREADS`` overrides the count.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from reportfed.core.environment import setting
from reportfed.core.errors import ConfigError

#: threads of the small-MLP training unless ``REPORTFED_TRAINING_THREADS`` says otherwise
TRAINING_THREADS = 1


def training_threads() -> int:
    """The thread count for small-MLP training (``REPORTFED_TRAINING_THREADS`` or 1)."""
    raw = setting("REPORTFED_TRAINING_THREADS") or str(TRAINING_THREADS)
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"REPORTFED_TRAINING_THREADS must be an integer >= 1, got {raw!r}")
    return int(raw)


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run the block with ``count`` torch threads, then restore the previous count."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
