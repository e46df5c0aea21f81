"""Torch modules <-> the aggregation core's arrays, for every modality: any module with
``representation`` and ``task`` submodules (the report MLP, the image models) converts with
:func:`to_arrays` / :func:`load_arrays`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from reportfed.core.aggregation import Arrays

SHARED_PREFIX = "representation."
TASK_PREFIX = "task."


def to_arrays(
    model: nn.Module, *, skip: Sequence[str] = ()
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Split a model's state into (shared, task) NumPy arrays, keys without the block prefix.

    ``skip`` lists shared keys kept local (e.g. BatchNorm statistics under FedBN).
    """
    shared: dict[str, np.ndarray] = {}
    task: dict[str, np.ndarray] = {}
    for key, value in model.state_dict().items():
        arr = value.detach().cpu().numpy().copy()
        if key.startswith(SHARED_PREFIX):
            name = key[len(SHARED_PREFIX) :]
            if name not in skip and arr.dtype.kind == "f":
                shared[name] = arr
        elif key.startswith(TASK_PREFIX):
            task[key[len(TASK_PREFIX) :]] = arr
    return shared, task


def load_arrays(model: nn.Module, shared: Arrays, task: Arrays) -> None:
    """Load (shared, task) arrays into a model in place; keys not given keep their values."""
    state = {SHARED_PREFIX + k: torch.from_numpy(np.asarray(v)) for k, v in shared.items()}
    state.update({TASK_PREFIX + k: torch.from_numpy(np.asarray(v)) for k, v in task.items()})
    missing = set(state) - set(model.state_dict())
    if missing:
        raise KeyError(f"unknown model keys {sorted(missing)}")
    model.load_state_dict(state, strict=False)
