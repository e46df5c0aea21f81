"""Surgical aggregation: the server step of federated learning across nodes with different labels.

Framework-agnostic: a node's update is two dicts of NumPy arrays,

* ``shared`` — the representation block (any keys/shapes, the same on every node);
* ``task`` — the task block, whose arrays have the label axis first (a linear head's ``weight``
  ``(C, H)`` and ``bias`` ``(C,)``), one row per label of the node's :class:`LabelSpace`.

One round of :func:`aggregate`:

* the shared block is averaged over all accepted nodes (unweighted by default, as in the papers;
  ``weighting="samples"`` weights by ``num_examples``);
* for every label of the union, its task rows are averaged over the ``K_c`` nodes that have it (a
  label unique to one node passes through unchanged);
* a label that no node sends this round keeps its previous global rows;
* the global label space is the union in a deterministic order, independent of node order.

:func:`node_arrays` gives a node its view: the shared block and the rows of its own labels in its
own order. With identical label sets on every node this is exactly FedAvg.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from reportfed.core.errors import ConfigError, InvalidUpdateError, LabelError, NoValidUpdateError
from reportfed.core.labels import LabelSpace

Arrays = Mapping[str, np.ndarray]
Weighting = Literal["uniform", "samples"]
OnInvalid = Literal["raise", "drop"]


@dataclass(frozen=True)
class NodeUpdate:
    """What a node sends after local training."""

    node_id: str
    labels: Iterable[str]
    shared: Arrays
    task: Arrays
    num_examples: int = 1


@dataclass(frozen=True)
class GlobalState:
    """The global model: shared block plus one task row per label of ``labels``."""

    labels: LabelSpace
    shared: Arrays
    task: Arrays


@dataclass(frozen=True)
class AggregationResult:
    """A round's outcome: the new global state, who contributed, and who was rejected and why."""

    state: GlobalState
    accepted: list[str]
    rejected: dict[str, str] = field(default_factory=dict)
    contributors: dict[str, int] = field(default_factory=dict)


def _signature(shared: Arrays, task: Arrays) -> tuple[tuple[tuple[str, tuple[int, ...]], ...], ...]:
    return (
        tuple(sorted((k, tuple(v.shape)) for k, v in shared.items())),
        tuple(sorted((k, tuple(v.shape[1:])) for k, v in task.items())),
    )


def _validate(
    update: NodeUpdate, reference: tuple[object, ...], weighting: Weighting
) -> LabelSpace:
    """Return the update's canonical label space or raise :class:`InvalidUpdateError`."""
    node = update.node_id
    try:
        labels = (
            update.labels
            if isinstance(update.labels, LabelSpace)
            else LabelSpace.of(update.labels, allow_unknown=True)
        )
    except LabelError as exc:
        raise InvalidUpdateError(node, str(exc)) from None
    if not labels:
        raise InvalidUpdateError(node, "no labels")
    for name, arrays in (("shared", update.shared), ("task", update.task)):
        for key, arr in arrays.items():
            if not isinstance(arr, np.ndarray) or arr.dtype.kind != "f":
                raise InvalidUpdateError(node, f"{name}[{key!r}] is not a float array")
            if not np.isfinite(arr).all():
                raise InvalidUpdateError(node, f"{name}[{key!r}] contains NaN or Inf")
    for key, arr in update.task.items():
        if arr.ndim == 0 or arr.shape[0] != len(labels):
            raise InvalidUpdateError(
                node,
                f"task[{key!r}] has {arr.shape[0] if arr.ndim else 0} rows for {len(labels)} labels",
            )
    sig = _signature(update.shared, update.task)
    if sig != reference:
        raise InvalidUpdateError(
            node, f"array keys/shapes {sig} differ from the federation's {reference}"
        )
    if weighting == "samples" and not (
        np.isfinite(update.num_examples) and update.num_examples > 0
    ):
        raise InvalidUpdateError(
            node, f"num_examples must be a finite number > 0, got {update.num_examples}"
        )
    return labels


def aggregate(
    updates: Sequence[NodeUpdate],
    previous: GlobalState | None = None,
    *,
    weighting: Weighting = "uniform",
    on_invalid: OnInvalid = "raise",
    clip_norm: float = 0.0,
) -> AggregationResult:
    """One round of surgical aggregation.

    Parameters
    ----------
    updates:
        The nodes' updates (any order; the result does not depend on it).
    previous:
        Last round's global state. Labels absent from every update keep its rows; its shapes are
        the reference every update must match.
    weighting:
        ``"uniform"`` (papers) or ``"samples"`` (weight by ``num_examples``).
    on_invalid:
        ``"raise"`` an :class:`InvalidUpdateError` naming the node, or ``"drop"`` that node's update
        and continue with the others (reasons in ``AggregationResult.rejected``).
    clip_norm:
        With ``clip_norm`` > 0, each valid update's change from ``previous`` is scaled down to
        that L2 norm (:func:`clip_update`) before the merge.
    """
    if clip_norm > 0 and previous is None:
        raise ConfigError("clip_norm bounds the change from the previous state: give it")
    if weighting not in ("uniform", "samples"):
        raise ConfigError(f"weighting must be 'uniform' or 'samples', got {weighting!r}")
    if on_invalid not in ("raise", "drop"):
        raise ConfigError(f"on_invalid must be 'raise' or 'drop', got {on_invalid!r}")
    ids = [u.node_id for u in updates]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"duplicate node ids in {ids}")
    if previous is not None:
        reference = _signature(previous.shared, previous.task)
    else:
        signatures = Counter(_signature(u.shared, u.task) for u in updates)
        if not signatures:
            raise ConfigError("no updates to aggregate")
        ranked = signatures.most_common()
        if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
            raise ConfigError(
                f"no majority among the updates' array shapes ({ranked[0][1]} updates each for "
                f"{len(ranked)} shapes): give the previous global state as the reference"
            )
        reference = ranked[0][0]

    accepted: list[tuple[NodeUpdate, LabelSpace]] = []
    rejected: dict[str, str] = {}
    for u in sorted(updates, key=lambda u: u.node_id):
        try:
            space = _validate(u, reference, weighting)
        except InvalidUpdateError as exc:
            if on_invalid == "raise":
                raise
            rejected[u.node_id] = exc.reason
            continue
        if clip_norm > 0 and previous is not None:
            u = clip_update(replace(u, labels=space), previous, clip_norm)
        accepted.append((u, space))
    if not accepted:
        raise NoValidUpdateError(rejected)

    weights = np.array(
        [float(u.num_examples) if weighting == "samples" else 1.0 for u, _ in accepted]
    )
    shared = {
        key: np.sum(
            weights.reshape((-1,) + (1,) * accepted[0][0].shared[key].ndim)
            * np.stack([u.shared[key] for u, _ in accepted]),
            axis=0,
        )
        for key in accepted[0][0].shared
    }
    spaces = [space for _, space in accepted] + ([previous.labels] if previous is not None else [])
    union = LabelSpace.union(spaces)
    # mask[k, c] = 1 when node k has label c; rows[k] = node k's task arrays scattered to the union.
    mask = np.zeros((len(accepted), len(union)))
    positions = []
    for k, (_, space) in enumerate(accepted):
        pos = union.indices(space)
        mask[k, pos] = 1.0
        positions.append(pos)
    coef = weights[:, None] * mask
    task: dict[str, np.ndarray] = {}
    for key in accepted[0][0].task:
        sample = accepted[0][0].task[key]
        widest = np.result_type(*(u.task[key] for u, _ in accepted))
        stacked = np.zeros((len(accepted), len(union), *sample.shape[1:]), dtype=widest)
        for k, (u, _) in enumerate(accepted):
            stacked[k, positions[k]] = u.task[key]
        task[key] = np.sum(coef.reshape(coef.shape + (1,) * (sample.ndim - 1)) * stacked, axis=0)
    sums = Sums(union, shared, task, float(weights.sum()), coef.sum(axis=0))
    dtypes = {
        (block, key): np.result_type(*(getattr(u, block)[key] for u, _ in accepted))
        for block in ("shared", "task")
        for key in getattr(accepted[0][0], block)
    }
    contributors = {union[c]: int(mask[:, c].sum()) for c in range(len(union))}
    return AggregationResult(
        state=merge(sums, previous, dtypes),
        accepted=[u.node_id for u, _ in accepted],
        rejected=rejected,
        contributors=contributors,
    )


@dataclass(frozen=True)
class Sums:
    """A round's updates summed, the only thing a sum-only protocol (secure aggregation) shows
    the server: ``shared`` is the weighted sum of the nodes' shared blocks; ``task`` holds, for
    each label of ``labels``, the weighted sum of the rows of the nodes that have that label
    (zero rows from the others); ``weight`` is the total weight and ``holders[c]`` the weight of
    the nodes having label ``c`` (0: nobody sent it this round)."""

    labels: LabelSpace
    shared: Arrays
    task: Arrays
    weight: float
    holders: np.ndarray


def merge(
    sums: Sums,
    previous: GlobalState | None = None,
    dtypes: Mapping[tuple[str, str], np.dtype] | None = None,
) -> GlobalState:
    """The surgical merge of :class:`Sums`: the shared block is ``shared / weight``, each label's
    rows are its sum over the weight of its holders, and a label nobody sent keeps
    ``previous``'s rows. Arrays take ``previous``'s dtypes (else ``dtypes[(block, key)]``)."""

    def dtype(block: str, key: str) -> np.dtype:
        if previous is not None:
            return getattr(previous, block)[key].dtype
        return (dtypes or {}).get((block, key), np.dtype(np.float32))

    shared = {
        k: (np.asarray(v) / sums.weight).astype(dtype("shared", k), copy=False)
        for k, v in sums.shared.items()
    }
    present = sums.holders > 0
    task: dict[str, np.ndarray] = {}
    for key, total in sums.task.items():
        out = np.array(total, copy=True)
        extra = (1,) * (out.ndim - 1)
        out[present] /= sums.holders[present].reshape((-1, *extra))
        if previous is not None and not present.all():
            carried = np.flatnonzero(~present)
            rows = previous.labels.indices([sums.labels[i] for i in carried])
            out[carried] = previous.task[key][rows]
        task[key] = out.astype(dtype("task", key), copy=False)
    return GlobalState(labels=sums.labels, shared=shared, task=task)


def update_norm(update: NodeUpdate, reference: GlobalState) -> float:
    """The L2 norm of ``update`` minus ``reference`` (the global model it trained from) over the
    shared block and the rows of the update's labels that ``reference`` has."""
    mine, rows = known_rows(update, reference)
    squares = sum(float(np.sum((v - reference.shared[k]) ** 2)) for k, v in update.shared.items())
    squares += sum(
        float(np.sum((v[mine] - reference.task[k][rows]) ** 2)) for k, v in update.task.items()
    )
    return float(np.sqrt(squares))


def known_rows(update: NodeUpdate, reference: GlobalState) -> tuple[list[int], np.ndarray]:
    """The update's rows whose label ``reference`` has, and those labels' rows in
    ``reference``."""
    labels = list(update.labels)
    mine = [i for i, c in enumerate(labels) if c in reference.labels]
    return mine, reference.labels.indices([labels[i] for i in mine])


def clip_update(update: NodeUpdate, reference: GlobalState, norm: float) -> NodeUpdate:
    """``update`` with its change from ``reference`` scaled down to L2 norm ``norm`` at most
    (:func:`update_norm`; rows of labels ``reference`` lacks are kept as they are)."""
    size = update_norm(update, reference)
    if size <= norm:
        return update
    scale = norm / size
    mine, rows = known_rows(update, reference)
    shared = {
        k: (reference.shared[k] + scale * (v - reference.shared[k])).astype(v.dtype)
        for k, v in update.shared.items()
    }
    task = {}
    for k, v in update.task.items():
        clipped = np.array(v, copy=True)
        clipped[mine] = reference.task[k][rows] + scale * (v[mine] - reference.task[k][rows])
        task[k] = clipped
    return replace(update, shared=shared, task=task)


def node_arrays(
    state: GlobalState, labels: Iterable[str]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A node's view of the global state: the shared block and its own labels' rows, in its order.

    Raises :class:`LabelError` if the node has a label the global state does not know.
    """
    rows = state.labels.indices(labels)
    shared = {k: v.copy() for k, v in state.shared.items()}
    task = {k: v[rows].copy() for k, v in state.task.items()}
    return shared, task


def flatten(shared: Arrays, task: Arrays) -> dict[str, np.ndarray]:
    """A (shared, task) pair as one flat dict keyed ``shared.<key>`` / ``task.<key>`` (contiguous
    arrays): the layout of model files and of Flower messages."""
    flat = {f"shared.{k}": np.ascontiguousarray(v) for k, v in shared.items()}
    flat.update({f"task.{k}": np.ascontiguousarray(v) for k, v in task.items()})
    return flat


def unflatten(
    flat: Mapping[str, np.ndarray],
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The inverse of :func:`flatten`; a key with neither prefix is a ``ValueError``."""
    shared: dict[str, np.ndarray] = {}
    task: dict[str, np.ndarray] = {}
    for key, value in flat.items():
        block, _, name = key.partition(".")
        if block not in ("shared", "task") or not name:
            raise ConfigError(f"array {key!r} is neither shared.<key> nor task.<key>")
        (shared if block == "shared" else task)[name] = value
    return shared, task
