"""Federated rounds of image nodes in this process, through the aggregation core.

The task block is always aggregated surgically (:func:`reportfed.core.aggregation.aggregate`); the
representation block by one of the strategies of the Surgical Aggregation papers
(:mod:`reportfed.vision.train`: ``fedavg``, ``fedbn``, ``fedbn+``). Every node is a
:class:`~reportfed.vision.node.ImageAlgorithm`, the same the Flower ClientApp drives, and keeps its own model
between rounds (so FedBN's local layers persist).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from reportfed.core.aggregation import GlobalState, node_arrays
from reportfed.core.errors import ConfigError
from reportfed.core.labels import LabelSpace
from reportfed.core.record import RunHistory
from reportfed.core.rounds import run_rounds
from reportfed.core.server import SurgicalServer
from reportfed.nn.arrays import load_arrays, to_arrays
from reportfed.vision.data import ImageTable
from reportfed.vision.models import ImageClassifier
from reportfed.vision.node import ImageAlgorithm, ImageNode
from reportfed.vision.train import ImageFederationConfig, local_keys, new_model, predict_images


@dataclass
class ImageFederationResult:
    """Global state, each node's own model (local normalisation layers under FedBN), history."""

    state: GlobalState
    node_models: dict[str, ImageClassifier]
    history: RunHistory


def run_image_federation(
    nodes: Sequence[ImageNode],
    config: ImageFederationConfig = ImageFederationConfig(),
    *,
    evaluate: Callable[[int, GlobalState, dict[str, ImageClassifier]], dict[str, Any]]
    | None = None,
    progress: bool = True,
) -> ImageFederationResult:
    """``config.rounds`` rounds of local training + surgical aggregation over image nodes;
    ``evaluate(round, state, node models)`` after each round sees the nodes' models holding the
    new global weights."""
    if not nodes:
        raise ConfigError("no nodes")
    union = LabelSpace.union(n.table.label_space for n in nodes)
    reference = new_model(config, len(union))
    server = SurgicalServer(
        GlobalState(union, *to_arrays(reference, skip=local_keys(reference, config.norm))), config
    )
    algorithms = [ImageAlgorithm(node, config) for node in nodes]

    def models(state: GlobalState) -> dict[str, ImageClassifier]:
        """The nodes' models with the global weights of ``state`` (their local layers kept)."""
        out = {}
        for algorithm in algorithms:
            model = algorithm.model.cpu()
            load_arrays(model, *node_arrays(state, algorithm.node.table.label_space))
            out[algorithm.node.name] = model
        return out

    history = run_rounds(
        server,
        algorithms,
        config.rounds,
        evaluate=None if evaluate is None else lambda r, state: evaluate(r, state, models(state)),
        progress=progress,
    )
    return ImageFederationResult(server.state, models(server.state), history)


def global_image_model(
    state: GlobalState, config: ImageFederationConfig, *, local_from: ImageClassifier | None = None
) -> ImageClassifier:
    """A classifier over every label of ``state``. Under FedBN the normalisation layers are not
    global: take them from one node's model (``local_from``), else they keep their initial values."""
    model = new_model(config, len(state.labels))
    if local_from is not None:
        keys = local_keys(model, config.norm)
        own = local_from.representation.state_dict()
        model.representation.load_state_dict({k: own[k] for k in keys}, strict=False)
    load_arrays(model, state.shared, state.task)
    return model.eval()


class ImageLabeler:
    """A trained image classifier with the labeler contract: ``classes_`` and
    ``predict_proba(image paths)`` (what :func:`reportfed.combined.combine` takes)."""

    def __init__(
        self, model: ImageClassifier, labels: LabelSpace, config: ImageFederationConfig
    ) -> None:
        self.model = model
        self.labels = labels
        self.config = config
        self.classes_ = np.array(labels.names, dtype=object)

    def predict_proba(self, images: Sequence[str | Path]) -> np.ndarray:
        """Probabilities ``(len(images), len(classes_))``."""
        table = ImageTable(
            [Path(p) for p in images],
            np.full((len(images), len(self.labels)), np.nan, dtype=np.float32),
            self.labels,
        )
        return predict_images(self.model, table, self.config)
