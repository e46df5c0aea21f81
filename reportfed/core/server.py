"""The server's round, written once: :class:`SurgicalServer` holds the global state and the
server's rules (:class:`ServerOptions`), and its :meth:`~SurgicalServer.step` is the only caller of
:func:`reportfed.core.aggregation.aggregate`. Every engine drives it: the in-process loop, the lockstep
engine, the Flower strategy and the image federation.

A step takes the round's node updates, or only their :class:`~reportfed.core.aggregation.Sums` (secure
aggregation: the server never sees one node's update), and returns the next global state:

1. fewer than ``min_nodes`` updates, or fewer than ``min_nodes`` that pass validation (with
   ``on_invalid="drop"``), leave the global state unchanged (e.g. Flower rounds where nodes died);
2. otherwise the updates are merged surgically (``weighting``, ``on_invalid``; with ``clip_norm``
   > 0 each valid update's change is scaled down to that L2 norm first). Sums cannot be clipped,
   so sums whose mean change exceeds the norm (a node that did not clip before masking) leave
   the state unchanged;
3. the representation block then moves from the previous state towards the merge with the server
   optimizer: ``velocity <- server_momentum * velocity + (merged - previous)``, new shared block
   ``previous + server_lr * velocity`` (FedAvgM, Hsu et al. 2019). The task rows are taken as
   merged. ``server_momentum = 0`` and ``server_lr = 1`` (the defaults) are the papers' merge,
   returned bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from reportfed.core.aggregation import (
    GlobalState,
    NodeUpdate,
    OnInvalid,
    Sums,
    Weighting,
    aggregate,
    merge,
)
from reportfed.core.errors import ConfigError, NoValidUpdateError
from reportfed.core.schema import setting


@dataclass(frozen=True)
class ServerOptions:
    """The server's rules; text (:class:`~reportfed.reports.engine.FederationConfig`) and vision
    (:class:`~reportfed.vision.federation.ImageFederationConfig`) configs inherit them, so every server
    option reaches every engine."""

    weighting: Weighting = setting(
        "uniform", "average nodes equally (the papers) or by their sample counts"
    )
    on_invalid: OnInvalid = setting(
        "raise", "an invalid update (NaN, wrong shape) stops the run, or is dropped"
    )
    server_momentum: float = setting(
        0.0, "server momentum on the representation block (FedAvgM; 0 = off)"
    )
    server_lr: float = setting(
        1.0, "server learning rate on the representation block (1 = the merge)"
    )
    clip_norm: float = setting(
        0.0,
        "bound each node's update (its change to the model it received) to this L2 norm; 0 = off",
    )

    def __post_init__(self) -> None:
        """Refuse values no server can use (a ``ConfigError`` naming the field and its range)."""
        checks = {
            "weighting": (self.weighting in ("uniform", "samples"), "'uniform' or 'samples'"),
            "on_invalid": (self.on_invalid in ("raise", "drop"), "'raise' or 'drop'"),
            "server_momentum": (0 <= self.server_momentum < 1, "in [0, 1)"),
            "server_lr": (math.isfinite(self.server_lr) and self.server_lr >= 0, "a number >= 0"),
            "clip_norm": (math.isfinite(self.clip_norm) and self.clip_norm >= 0, "a number >= 0"),
        }
        for name, (ok, expected) in checks.items():
            if not ok:
                raise ConfigError(f"{name} must be {expected}, got {getattr(self, name)!r}")


class ServerMomentum:
    """The server optimizer on the shared block (step 3 of the module docstring). Its velocity
    lives in this object from round to round; it is not checkpointed, so a resumed run starts it
    from zero."""

    def __init__(self, options: ServerOptions) -> None:
        self.momentum = options.server_momentum
        self.lr = options.server_lr
        self.velocity: dict[str, np.ndarray] | None = None

    def apply(self, previous: GlobalState, merged: GlobalState) -> GlobalState:
        """The state that follows ``previous`` when this round's merge gave ``merged`` (the merge
        itself with the default options)."""
        if self.momentum == 0.0 and self.lr == 1.0:
            return merged
        delta = {k: merged.shared[k] - previous.shared[k] for k in merged.shared}
        if self.velocity is not None:
            delta = {k: self.momentum * self.velocity[k] + d for k, d in delta.items()}
        self.velocity = delta
        shared = {
            k: (previous.shared[k] + self.lr * v).astype(merged.shared[k].dtype, copy=False)
            for k, v in delta.items()
        }
        return GlobalState(labels=merged.labels, shared=shared, task=merged.task)


#: relative slack on ``clip_norm`` when judging sums (their quantization in secure aggregation)
CLIP_SLACK = 1e-3


def _mean_change(sums: Sums, previous: GlobalState) -> float:
    """The L2 norm of the nodes' mean change to ``previous`` over the shared block and every
    label's rows (zero where a node lacks the label), from their :class:`Sums` alone: at most
    the largest single update's norm."""
    squares = 0.0
    for k, v in sums.shared.items():
        squares += float(np.sum((np.asarray(v) / sums.weight - previous.shared[k]) ** 2))
    rows = previous.labels.indices([c for c in sums.labels if c in previous.labels])
    known = np.array([c in previous.labels for c in sums.labels])
    for k, v in sums.task.items():
        held = sums.holders[known].reshape((-1,) + (1,) * (np.ndim(v) - 1))
        change = (np.asarray(v)[known] - held * previous.task[k][rows]) / sums.weight
        squares += float(np.sum(change**2))
    return float(np.sqrt(squares))


@dataclass(frozen=True)
class StepResult:
    """One round at the server: the global state after it, who was merged, who was rejected and
    why, whether the state changed, and labels that joined the global model this round."""

    state: GlobalState
    accepted: list[str]
    rejected: dict[str, str]
    aggregated: bool
    joined: list[str]


class SurgicalServer:
    """The global model and the server's rules, stepped once per round.

    ``state`` is the initial global model (its array shapes are the reference every update must
    match); with ``min_nodes`` > 1 a round needs that many valid updates to change it.
    """

    def __init__(
        self,
        state: GlobalState,
        options: ServerOptions = ServerOptions(),
        *,
        min_nodes: int = 1,
    ) -> None:
        if min_nodes < 1:
            raise ConfigError(f"min_nodes must be >= 1, got {min_nodes}")
        self.state = state
        self.options = options
        self.min_nodes = min_nodes
        self._optimizer = ServerMomentum(options)

    def step(self, updates: Sequence[NodeUpdate] | Sums, nodes: Sequence[str] = ()) -> StepResult:
        """Merge a round's updates, or the ``nodes``' summed updates, into the global state (see
        the module docstring)."""
        previous = self.state
        if isinstance(updates, Sums):
            return self._step_sums(updates, list(nodes))
        if len(updates) < self.min_nodes:
            return self._unchanged([u.node_id for u in updates], {})
        try:
            merged = aggregate(
                updates,
                previous,
                weighting=self.options.weighting,
                on_invalid=self.options.on_invalid,
                clip_norm=self.options.clip_norm,
            )
        except NoValidUpdateError as exc:  # on_invalid="drop" and every update invalid
            return self._unchanged([], exc.rejected)
        if len(merged.accepted) < self.min_nodes:
            return self._unchanged(merged.accepted, merged.rejected)
        return self._moved(previous, merged.state, merged.accepted, merged.rejected)

    def _step_sums(self, sums: Sums, nodes: list[str]) -> StepResult:
        previous = self.state
        if len(nodes) < self.min_nodes:
            return self._unchanged(nodes, {})
        size = _mean_change(sums, previous)
        limit = self.options.clip_norm * (1 + CLIP_SLACK)
        if self.options.clip_norm > 0 and size > limit:
            reason = f"the mean update's norm {size:.4g} exceeds clip_norm {self.options.clip_norm}"
            return self._unchanged([], dict.fromkeys(nodes, reason))
        return self._moved(previous, merge(sums, previous), nodes, {})

    def _moved(
        self,
        previous: GlobalState,
        merged: GlobalState,
        accepted: list[str],
        rejected: dict[str, str],
    ) -> StepResult:
        self.state = self._optimizer.apply(previous, merged)
        known = set(previous.labels)
        return StepResult(
            self.state,
            accepted,
            rejected,
            aggregated=True,
            joined=[c for c in merged.labels if c not in known],
        )

    def _unchanged(self, accepted: list[str], rejected: dict[str, str]) -> StepResult:
        return StepResult(self.state, accepted, rejected, aggregated=False, joined=[])
