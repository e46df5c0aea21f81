"""In-process federation: every node trains in this process, the server step is
:func:`reportfed.aggregation.aggregate`. Deterministic for a seed; used by experiments, the
labeler and as the reference the Flower apps must match.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from reportfed.aggregation import GlobalState, NodeUpdate, node_arrays
from reportfed.config import FederationConfig
from reportfed.labels import LabelSpace, check_label_matrix
from reportfed.model import ReportMLP, load_arrays, node_model, predict_proba, to_arrays
from reportfed.rounds import round_seed, run_rounds
from reportfed.server import SurgicalServer
from reportfed.train import positive_weights, train_local


@dataclass
class Node:
    """One site's training data: embeddings ``x`` ``(n, d)`` and labels ``y`` ``(n, len(labels))``
    (NaN = not annotated)."""

    name: str
    x: np.ndarray
    y: np.ndarray
    labels: LabelSpace

    def __post_init__(self) -> None:
        check_label_matrix(self.y, len(self.x), self.labels, f"node {self.name!r}")


@dataclass
class FederationResult:
    """The final global state and one history entry per round."""

    state: GlobalState
    history: list[dict[str, Any]]
    config: FederationConfig


def initial_state(input_dim: int, labels: LabelSpace, config: FederationConfig) -> GlobalState:
    """The global model every node starts from (seeded)."""
    torch.manual_seed(config.seed)
    shared, task = to_arrays(node_model(input_dim, len(labels), config))
    return GlobalState(labels=labels, shared=shared, task=task)


def local_round(
    node: Node,
    state: GlobalState,
    config: FederationConfig,
    round_: int,
    node_index: int,
    model: ReportMLP | None = None,
) -> tuple[NodeUpdate, float]:
    """A node's work in one round: load its view of ``state``, train, return its update and loss.

    The view is the shared block and the node's rows, or every row with ``config.distill`` (the
    global model's predictions then become soft targets for the labels the node lacks).
    """
    head = state.labels if config.distill > 0 else node.labels
    if model is None or model.task.out_features != len(head):
        model = node_model(node.x.shape[-1], len(head), config)
    shared, task = node_arrays(state, head)
    load_arrays(model, shared, task)
    x = torch.from_numpy(node.x)
    own = head.indices(node.labels)
    y, soft = node.y, None
    if config.distill > 0:
        y = np.full((len(node.x), len(head)), np.nan, dtype=np.float32)
        y[:, own] = node.y
        soft = predict_proba(model, x)
        soft[:, own] = np.nan
    loss = train_local(
        model,
        x,
        torch.from_numpy(y),
        epochs=config.local_epochs,
        lr=config.node_lr.get(node.name, config.lr),
        batch_size=config.batch_size,
        seed=round_seed(config.seed, round_, node_index),
        soft=None if soft is None else torch.from_numpy(soft),
        distill=config.distill,
        weight_decay=config.weight_decay,
        pos_weight=torch.from_numpy(positive_weights(y)) if config.balance else None,
        prox=config.prox,
    )
    shared, task = to_arrays(model)
    task = {k: v[own] for k, v in task.items()}
    return NodeUpdate(node.name, node.labels, shared, task, num_examples=len(node.x)), loss


def run_federation(
    nodes: Sequence[Node],
    config: FederationConfig = FederationConfig(),
    *,
    evaluate: Callable[[int, GlobalState], dict[str, float]] | None = None,
    progress: bool = True,
) -> FederationResult:
    """Run ``config.rounds`` rounds of local training + surgical aggregation.

    ``evaluate(round, state)`` is called after every round; its metrics go into the history.
    """
    if not nodes:
        raise ValueError("no nodes")
    dims = {n.x.shape[-1] for n in nodes}
    if len(dims) != 1:
        raise ValueError(f"nodes disagree on embedding dimension: {sorted(dims)}")
    dim = dims.pop()
    start = initial_state(dim, LabelSpace.union(n.labels for n in nodes), config)
    server = SurgicalServer(start, config)
    heads = [len(start.labels) if config.distill > 0 else len(n.labels) for n in nodes]
    models = [node_model(dim, h, config) for h in heads]

    def train(r: int, i: int, node: Node, state: GlobalState) -> tuple[NodeUpdate, dict]:
        update, loss = local_round(node, state, config, r, i, models[i])
        return update, {"loss": loss}

    history = run_rounds(server, nodes, config.rounds, train, evaluate=evaluate, progress=progress)
    return FederationResult(state=server.state, history=history, config=config)
