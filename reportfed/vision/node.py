"""The node algorithm of image tables (:class:`~reportfed.core.node.NodeAlgorithm`): a site's images
and labels, trained as an :class:`~reportfed.vision.models.ImageClassifier` from the global state. The
in-process loop (:func:`reportfed.vision.federation.run_image_federation`) and the Flower ClientApp drive the
same :class:`ImageAlgorithm`; :data:`IMAGES` is the modality the Flower apps load (run config
``modality = "images"``, hyperparameters :class:`~reportfed.vision.train.ImageFederationConfig`). Under
FedBN a node's normalisation layers are its :meth:`~ImageAlgorithm.local_arrays`: they never
leave it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reportfed.core import schema
from reportfed.core.aggregation import Arrays, GlobalState, NodeUpdate, node_arrays
from reportfed.core.config import NodeSettings, RunSettings, SiteSettings
from reportfed.core.errors import ReportfedError
from reportfed.core.labels import LabelSpace
from reportfed.core.node import Description, Evaluation
from reportfed.core.rounds import round_seed
from reportfed.data.partition import validation_split
from reportfed.nn.arrays import load_arrays, to_arrays
from reportfed.vision.data import ImageTable, read_image_table
from reportfed.vision.models import ImageClassifier, set_representation_trainable
from reportfed.vision.train import (
    ImageFederationConfig,
    local_keys,
    new_model,
    predict_images,
    train_images,
)


@dataclass
class ImageNode:
    """One site's training images and the labels it annotates."""

    name: str
    table: ImageTable


def fingerprint(config: ImageFederationConfig) -> str:
    """What every image node of a federation must share: architecture, input and norm strategy."""
    size = config.image_size
    return f"image:{config.arch}:{size}x{size}x{config.in_channels}:{config.norm}"


@dataclass
class ImageAlgorithm:
    """An image site's algorithm: training images ``node``, the hyperparameters, held-out images
    ``val`` (for evaluation) and how it read its table. Its model lives between rounds in one
    process; an engine that rebuilds it every message keeps :meth:`local_arrays`."""

    node: ImageNode
    config: ImageFederationConfig = field(default_factory=ImageFederationConfig)
    val: ImageTable | None = None
    settings: SiteSettings = field(default_factory=SiteSettings)
    _model: ImageClassifier | None = field(default=None, init=False, repr=False)
    _local: Arrays = field(default_factory=dict, init=False, repr=False)

    @property
    def model(self) -> ImageClassifier:
        """The node's classifier over its own labels (built on first use)."""
        if self._model is None:
            self._model = new_model(self.config, len(self.node.table.label_space))
            load_arrays(self._model, self._local, {})
        return self._model

    def describe(self) -> Description:
        """Name, labels, architecture fingerprint, image size, training rows, table settings."""
        table = self.node.table
        return Description(
            self.node.name,
            table.label_space,
            fingerprint(self.config),
            self.config.image_size,
            len(table),
            schema.encode(self.settings, public=True),
        )

    def train(
        self, state: GlobalState, round_: int, index: int
    ) -> tuple[NodeUpdate, dict[str, float]]:
        """Load the global shared block and this node's rows (labels the state lacks keep the
        node's own rows), train ``local_epochs``, return all but the local layers."""
        config, labels, model = self.config, self.node.table.label_space, self.model.cpu()
        known = [c for c in labels if c in state.labels]
        shared, task = node_arrays(state, known)
        rows = labels.indices(known)
        full = {k: v.detach().numpy().copy() for k, v in model.task.state_dict().items()}
        for key in full:
            full[key][rows] = task[key]
        load_arrays(model, shared, full)
        set_representation_trainable(model, round_ >= config.warmup_rounds)
        loss, speed = train_images(
            model,
            self.node.table,
            config,
            epochs=config.local_epochs,
            seed=round_seed(config.seed, round_, index),
            freeze_bn_stats=config.norm == "fedbn+",
        )
        shared, task = to_arrays(model.cpu(), skip=local_keys(model, config.norm))
        update = NodeUpdate(self.node.name, labels, shared, task, len(self.node.table))
        return update, {"loss": loss, "images_per_s": speed}

    def evaluate(self, state: GlobalState) -> Evaluation:
        """The global rows ``state`` (with this node's local layers) on the held-out images."""
        model = new_model(self.config, len(state.labels))
        load_arrays(model, self.local_arrays(), {})
        load_arrays(model, state.shared, state.task)
        val = self.val if self.val is not None else self.node.table.subset([])
        labels = [c for c in state.labels if c in val.label_space]
        y = val.labels[:, val.label_space.indices(labels)]
        if not len(val):
            return Evaluation(labels, y, y)
        p = predict_images(model, val, self.config)[:, state.labels.indices(labels)]
        return Evaluation(labels, y, p)

    def local_arrays(self) -> Arrays:
        """The representation weights that stay on the node under the norm strategy."""
        if self._model is None:
            return dict(self._local)
        keep = local_keys(self._model, self.config.norm)
        own = self._model.representation.state_dict()
        return {k: own[k].detach().cpu().numpy() for k in keep}

    def restore(self, local: Arrays) -> None:
        """Take back the local layers of an earlier round."""
        self._local = dict(local)
        if self._model is not None:
            load_arrays(self._model, self._local, {})


def load_image_node(settings: NodeSettings, config: ImageFederationConfig) -> ImageAlgorithm:
    """Read and split a node's image table (default name: the table's folder)."""
    if not settings.data:
        raise ReportfedError("node config has no 'data' (the path of this node's image table)")
    table = read_image_table(
        settings.data,
        image_root=settings.image_root or None,
        layout=settings.layout,  # type: ignore[arg-type]
        uncertain=settings.uncertain,
        blank=settings.blank,
        split=settings.split or None,  # type: ignore[arg-type]
    )
    fit, val = validation_split(len(table), settings.val_fraction, config.seed)
    name = settings.name or Path(settings.data).parent.name
    return ImageAlgorithm(ImageNode(name, table.subset(fit)), config, table.subset(val), settings)


class _Images:
    """The modality of image tables."""

    name = "images"
    config_class = ImageFederationConfig

    def initial_arrays(
        self, config: ImageFederationConfig, dim: int, labels: LabelSpace
    ) -> tuple[Arrays, Arrays]:
        model = new_model(config, len(labels))  # dim is the image size the nodes reported
        return to_arrays(model, skip=local_keys(model, config.norm))

    def model_input(self, run: RunSettings) -> tuple[str, str]:
        return "image", "image"

    def space(self, config: ImageFederationConfig, run: RunSettings) -> tuple[str, int]:
        return fingerprint(config), config.image_size

    def node(
        self, settings: NodeSettings, config: ImageFederationConfig, run: Mapping[str, Any]
    ) -> ImageAlgorithm:
        return load_image_node(settings, config)


IMAGES = _Images()
