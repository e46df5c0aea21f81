"""What a node does in a round, as one interface that every engine drives (MONAI FL's
``ClientAlgo`` is the model): describe itself, train from the global state, evaluate the global
state on its held-out rows. Report tables implement it in :mod:`reportfed.reports.node`, image
tables in :mod:`reportfed.vision.node`; the in-process loop (:func:`reportfed.core.rounds.run_rounds`) and the
Flower ClientApp (:mod:`reportfed.flower.client_app`) both drive it.

A *modality* (:class:`Modality`) is what the server side needs to know about a kind of node: its
hyperparameter class (decoded from the run config through :mod:`reportfed.core.schema`), the initial
global model, and how a node's algorithm is built from its :class:`~reportfed.core.config.NodeSettings`.
Modalities are found by name through the ``reportfed.modalities`` entry points (``reports`` and,
with ``reportfed.vision``, ``images``), so the Flower apps serve both without importing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from reportfed.core.aggregation import Arrays, GlobalState, NodeUpdate
from reportfed.core.config import NodeSettings, RunSettings
from reportfed.core.labels import LabelSpace
from reportfed.core.schema import Scalar


@dataclass(frozen=True)
class Description:
    """A node's answer to the server's handshake: its name, labels, model fingerprint (embedder,
    or image architecture and input), input dimension, training rows, and how it read its table
    (the schema-encoded :class:`~reportfed.core.config.SiteSettings`, kept in the model's provenance)."""

    name: str
    labels: LabelSpace
    fingerprint: str
    dim: int
    rows: int
    settings: Mapping[str, Scalar] = field(default_factory=dict)


@dataclass(frozen=True)
class Evaluation:
    """A node's evaluation of global rows: the labels it holds among them, its held-out labels
    ``y`` and the global model's probabilities ``p`` (columns in ``labels`` order), where the
    node fits one its calibration (:func:`reportfed.text.calibration.fit_calibration`), and
    where it chooses them from more rows than the held-out ones, its labelling thresholds
    (``None``: best F1 on ``y`` and ``p``) and the positives each rests on (``weights``, which
    the server averages them by; ``None``: by the held-out rows). A label it reads rather than
    annotates has no held-out row and a threshold on its reports as read."""

    labels: list[str]
    y: np.ndarray
    p: np.ndarray
    calibration: tuple[np.ndarray, np.ndarray] | None = None
    thresholds: np.ndarray | None = None
    weights: np.ndarray | None = None


@runtime_checkable
class NodeAlgorithm(Protocol):
    """One node's side of a federation."""

    def describe(self) -> Description:
        """Who the node is (the handshake)."""
        ...

    def train(
        self, state: GlobalState, round_: int, index: int
    ) -> tuple[NodeUpdate, dict[str, float]]:
        """Train from the global ``state`` in (0-based) round ``round_`` as the ``index``-th
        member (both seed the round); the update (only the node's own label rows) and metrics
        (``loss`` at least). Labels of the node that ``state`` lacks start from fresh rows."""
        ...

    def evaluate(self, state: GlobalState) -> Evaluation:
        """The global rows ``state`` on the node's held-out rows."""
        ...

    def local_arrays(self) -> Arrays:
        """Weights that never leave the node (FedBN's normalisation layers; none for reports),
        kept between rounds by engines that rebuild the algorithm every message."""
        ...

    def restore(self, local: Arrays) -> None:
        """Take back what :meth:`local_arrays` returned."""
        ...


class Modality(Protocol):
    """What the server and the Flower apps need to know about one kind of node."""

    name: str
    #: the hyperparameter dataclass (a :class:`~reportfed.core.server.ServerOptions` subclass)
    config_class: type

    def initial_arrays(self, config: Any, dim: int, labels: LabelSpace) -> tuple[Arrays, Arrays]:
        """The (shared, task) arrays of the first global model for nodes of input ``dim``."""
        ...

    def model_input(self, run: RunSettings) -> tuple[str, str]:
        """What a model file records about the input: (granularity, embedder spec)."""
        ...

    def space(self, config: Any, run: RunSettings) -> tuple[str, int]:
        """The fingerprint and dimension of the input every node of the run must have, as the
        server reads them from the run (a :class:`~reportfed.core.errors.ConfigError` where it
        cannot): the federation's, never a node's."""
        ...

    def node(self, settings: NodeSettings, config: Any, run: Mapping[str, Any]) -> NodeAlgorithm:
        """The algorithm of a node with ``settings`` under hyperparameters ``config`` and the
        run config ``run`` (which the node checks against its own settings, such as the
        embedder, and refuses where they differ)."""
        ...
