"""How a node answers the server's messages, apart from Flower's message types: the node's
algorithm (:class:`~reportfed.core.node.NodeAlgorithm`) built from its node config, the run
config and the hyperparameters a message carries, with its data read once and kept while its
table is unchanged.

The ClientApp (:mod:`reportfed.flower.client_app`) hands each message to :func:`answer`: in the
node's warm process (:mod:`reportfed.flower.warm`; the node setting ``warm``, on by default),
which keeps torch imported and the data loaded between messages, or in its own process
(``warm = false``, and the simulation engine). Both run the same :class:`NodeService`. This
module imports neither torch nor scikit-learn: a ClientApp process that forwards to the warm
process never loads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from reportfed.core import schema
from reportfed.core.aggregation import Arrays, GlobalState, NodeUpdate
from reportfed.core.config import NodeSettings, RunSettings
from reportfed.core.errors import InputFileError, PolicyError
from reportfed.core.files import file_signature
from reportfed.core.node import Description, Evaluation, NodeAlgorithm


@dataclass
class Request:
    """One message to a node, in plain Python: its ``kind`` (``query``: the handshake;
    ``train``: training, after evaluating the rows received when ``meta`` asks; ``evaluate``),
    the node's node config and the run config, the ConfigRecord the server sent (``meta``:
    hyperparameters, round, node index, whether to evaluate first), the global rows it sent,
    and the weights the node keeps between rounds (``local``, from Flower's ``context.state``)."""

    kind: str
    node_config: dict[str, Any]
    run_config: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)
    state: GlobalState | None = None
    local: Arrays = field(default_factory=dict)


@dataclass
class Answer:
    """A node's answer: its description (``query``); its evaluation of the rows received, as the
    labels and the metrics :func:`evaluation_metrics` gives (``evaluate``, or ``train`` when
    asked); its update and training metrics, and the labels it annotates (``train``: its update
    may also hold labels it reads); the weights it keeps (``local``)."""

    description: Description | None = None
    evaluation: tuple[list[str], dict[str, Any]] | None = None
    update: NodeUpdate | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    local: Arrays = field(default_factory=dict)
    annotated: list[str] = field(default_factory=list)


def node_settings(node_config: dict[str, Any], run_config: dict[str, Any]) -> NodeSettings:
    """The node's settings from its node config (and, under the simulation engine, its table
    from the run config's comma-separated ``partitions``, by the node's ``partition-id``)."""
    settings = schema.decode(NodeSettings, node_config)
    partitions = [p for p in str(run_config.get("partitions", "")).split(",") if p]
    if not settings.data and "partition-id" in node_config and partitions:
        settings = replace(settings, data=partitions[int(node_config["partition-id"])])
    return settings


def check_policy(
    node_config: dict[str, Any],
    run_config: dict[str, Any],
    meta: dict[str, Any] | None = None,
    *,
    masked: bool = False,
) -> None:
    """Refuse (a :class:`~reportfed.core.errors.ReportfedError`) what the node's own settings
    forbid: a run without secure aggregation, or a plain update asked of it, where the node
    requires secure aggregation; training in a round whose members (``meta["members"]``, as the
    server counts them) leave fewer other members than the node requires."""
    settings = schema.decode(NodeSettings, node_config)
    if settings.require_secure_aggregation:
        if not schema.decode(RunSettings, run_config).secure_aggregation:
            raise PolicyError(
                "this node requires secure aggregation (--require-secure-aggregation) and the "
                "run does not sum the nodes' updates under SecAgg+ masks: it refuses the run"
            )
        if meta is not None and not masked:
            raise PolicyError(
                "this node requires secure aggregation and was asked for a plain update: it "
                "refuses to send one"
            )
    if meta is not None and settings.min_others:
        others = int(meta.get("members", 0)) - 1
        if others < settings.min_others:
            raise PolicyError(
                f"this node trains only beside {settings.min_others} other members "
                f"(--min-others) and the server counts {max(others, 0)}: it sends no update"
            )


def evaluation_metrics(evaluation: Evaluation) -> tuple[list[str], dict[str, Any]]:
    """The labels of a node's :class:`~reportfed.core.node.Evaluation` and what it tells the
    server of them: per-label held-out rows and positives, AUROC of the global model's
    probabilities on its held-out labels, the labelling threshold (the node's own, else best F1
    on the held-out rows), where the node gives them the positives each threshold rests on
    (``threshold-positives``), and, where fitted, its calibration (coefficients and which labels
    were fitted, :func:`reportfed.text.calibration.fit_calibration`)."""
    import numpy as np

    from reportfed.core.metrics import auroc, f1_thresholds

    labels, y, p = evaluation.labels, evaluation.y, evaluation.p
    n = (~np.isnan(y)).sum(axis=0) if len(y) else np.zeros(len(labels), dtype=int)
    thresholds = evaluation.thresholds
    if thresholds is None:
        thresholds = f1_thresholds(y, p) if len(y) else np.full(len(labels), 0.5)
    metrics: dict[str, Any] = {
        "num-examples": len(y),
        "n": [int(v) for v in n],
        "positives": [int(v) for v in (y == 1).sum(axis=0)] if len(y) else [0] * len(labels),
        "auroc": [float(v) for v in (auroc(y, p) if len(y) else np.full(len(labels), np.nan))],
        "threshold": [float(v) for v in thresholds],
    }
    if evaluation.weights is not None:
        metrics["threshold-positives"] = [int(v) for v in evaluation.weights]
    if evaluation.calibration is not None:
        coef, fitted = evaluation.calibration
        metrics["calibration"] = [float(v) for v in coef.ravel()]
        metrics["calibrated"] = [int(v) for v in fitted]
    return list(labels), metrics


def _signature(path: str) -> tuple[int, int, int]:
    """The node's table's :func:`~reportfed.core.files.file_signature`; an
    :class:`InputFileError` when it is gone."""
    try:
        return file_signature(path)
    except OSError:
        raise InputFileError(f"{path}: no such file") from None


class NodeService:
    """Answers a node's messages (:meth:`answer`), keeping the algorithm it last built, and so
    the node's data, while the node config, run config, hyperparameters and table stay the same
    (a table that changes or disappears is read again, or fails)."""

    def __init__(self) -> None:
        self._kept: tuple[object, tuple[int, int, int], NodeAlgorithm] | None = None

    def algorithm(self, request: Request) -> NodeAlgorithm:
        """The node's algorithm under the hyperparameters of ``request.meta`` (else the run
        config's), its kept weights restored."""
        from reportfed.flower.modalities import hyperparameters

        run = request.run_config
        kind, config = hyperparameters(run, request.meta or None)
        settings = node_settings(request.node_config, run)
        if settings.lr:  # this node's own learning rate
            config = replace(config, lr=settings.lr)
        key = (repr(sorted(request.node_config.items())), repr(sorted(run.items())), repr(config))
        signature = _signature(settings.data) if settings.data else (0, 0, 0)
        if self._kept is not None and self._kept[:2] == (key, signature):
            node = self._kept[2]
        else:
            self._kept = None  # the old node's data is freed before the new one is read
            node = kind.node(settings, config, run)
            self._kept = (key, signature, node)
        if request.local:
            node.restore(request.local)
        return node

    def answer(self, request: Request) -> Answer:
        """What the node answers ``request``."""
        node = self.algorithm(request)
        if request.kind == "query":
            return Answer(description=node.describe())
        if request.state is None:
            raise ValueError(f"a {request.kind} message carries the global rows")
        evaluation = None
        if request.kind == "evaluate" or request.meta.get("evaluate"):
            evaluation = evaluation_metrics(node.evaluate(request.state))
        if request.kind == "evaluate":
            return Answer(evaluation=evaluation)
        update, metrics = node.train(
            request.state, int(request.meta["round"]) - 1, int(request.meta["node-index"])
        )
        return Answer(
            evaluation=evaluation,
            update=update,
            metrics=metrics,
            local=node.local_arrays(),
            annotated=list(node.describe().labels),
        )


#: the service of a ClientApp that answers in its own process
IN_PROCESS = NodeService()


def answer(request: Request) -> Answer:
    """``request`` answered in the node's warm process when its settings ask for one
    (:mod:`reportfed.flower.warm`; the default, but under the simulation engine, whose virtual
    nodes, ``partition-id``, run in workers that stay warm), else in this process."""
    simulated = "partition-id" in request.node_config
    if schema.decode(NodeSettings, request.node_config).warm and not simulated:
        from reportfed.flower import warm

        return warm.answer(request)
    return IN_PROCESS.answer(request)
