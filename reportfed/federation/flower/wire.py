"""What travels between server and nodes: arrays as one ``ArrayRecord`` (``shared.<key>`` and
``task.<key>``, task arrays label-first); label names and training hyperparameters in a
``ConfigRecord``; sample counts and losses in a ``MetricRecord``.
"""

from __future__ import annotations

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord

from reportfed.aggregation import Arrays
from reportfed.federation.engine import FederationConfig

SHARED = "shared."
TASK = "task."

ARRAYS = "arrays"  #: RecordDict key of the ArrayRecord
META = "meta"  #: RecordDict key of the ConfigRecord (labels, node name, fingerprint, settings)
METRICS = "metrics"  #: RecordDict key of the MetricRecord


def to_record(shared: Arrays, task: Arrays) -> ArrayRecord:
    """Pack a (shared, task) pair of array dicts."""
    items = {SHARED + k: Array(np.ascontiguousarray(v)) for k, v in shared.items()}
    items.update({TASK + k: Array(np.ascontiguousarray(v)) for k, v in task.items()})
    return ArrayRecord(items)


def from_record(record: ArrayRecord) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Unpack an :class:`ArrayRecord` made by :func:`to_record`; other keys are an error."""
    shared: dict[str, np.ndarray] = {}
    task: dict[str, np.ndarray] = {}
    for key in record:
        arr = record[key].numpy()
        if key.startswith(SHARED):
            shared[key[len(SHARED) :]] = arr
        elif key.startswith(TASK):
            task[key[len(TASK) :]] = arr
        else:
            raise ValueError(f"array {key!r} is neither shared. nor task.")
    return shared, task


def config_record(config: FederationConfig) -> ConfigRecord:
    """The training hyperparameters the server sends with every train message."""
    return ConfigRecord(
        {
            "local-epochs": config.local_epochs,
            "lr": config.lr,
            "batch-size": config.batch_size,
            "hidden": ",".join(str(h) for h in config.hidden),
            "dropout": config.dropout,
            "seed": config.seed,
        }
    )


def federation_config(record: ConfigRecord) -> FederationConfig:
    """The inverse of :func:`config_record` (other keys are ignored)."""
    return FederationConfig(
        local_epochs=int(record["local-epochs"]),  # type: ignore[arg-type]
        lr=float(record["lr"]),  # type: ignore[arg-type]
        batch_size=int(record["batch-size"]),  # type: ignore[arg-type]
        hidden=tuple(int(h) for h in str(record["hidden"]).split(",") if h),
        dropout=float(record["dropout"]),  # type: ignore[arg-type]
        seed=int(record["seed"]),  # type: ignore[arg-type]
    )
