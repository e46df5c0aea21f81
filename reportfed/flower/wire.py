"""What travels between server and nodes: arrays as one ``ArrayRecord`` (``shared.<key>`` and
``task.<key>``, task arrays label-first); label names and training hyperparameters in a
``ConfigRecord``; sample counts and losses in a ``MetricRecord``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

from reportfed.core import schema
from reportfed.core.aggregation import Arrays, GlobalState, NodeUpdate, flatten, unflatten
from reportfed.core.labels import LabelSpace
from reportfed.core.limits import (
    MAX_DIM,
    MAX_HANDSHAKE_CHARS,
    MAX_LABELS,
    MAX_ROWS,
    bounded_int,
    bounded_name,
)
from reportfed.core.node import Description

ARRAYS = "arrays"  #: RecordDict key of the ArrayRecord
META = "meta"  #: RecordDict key of the ConfigRecord (labels, node name, fingerprint, settings)
METRICS = "metrics"  #: RecordDict key of the MetricRecord
#: RecordDict keys of a node's evaluation of the global model it received: the labels evaluated
#: (ConfigRecord) and their per-label rows, AUROC and F1 threshold (MetricRecord). An evaluate
#: reply carries them, and so does a train reply when the server asked for them with it.
EVALUATED, EVALUATION = "evaluated", "evaluation"


def to_record(shared: Arrays, task: Arrays) -> ArrayRecord:
    """Pack a (shared, task) pair of array dicts (:func:`~reportfed.core.aggregation.flatten`)."""
    return ArrayRecord({k: Array(v) for k, v in flatten(shared, task).items()})


def from_record(record: ArrayRecord) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Unpack an :class:`ArrayRecord` made by :func:`to_record`; other keys are an error."""
    return unflatten({key: record[key].numpy() for key in record})


def config_record(config: Any) -> ConfigRecord:
    """The hyperparameters the server sends with every message (every field of the schema of
    ``config``, a :class:`FederationConfig` or another modality's config)."""
    return ConfigRecord(dict(schema.encode(config)))


def reply(msg: Message, records: dict[str, Any]) -> Message:
    """A node's reply to ``msg`` carrying ``records``."""
    return Message(RecordDict(records), reply_to=msg)


def unpack(msg: Message) -> tuple[GlobalState, ConfigRecord]:
    """The global rows a node received (labels from the ConfigRecord) and that ConfigRecord."""
    meta = msg.content.config_records[META]
    labels = LabelSpace.of([str(x) for x in meta["labels"]], allow_unknown=True)  # type: ignore[union-attr]
    shared, task = from_record(msg.content.array_records[ARRAYS])
    return GlobalState(labels, shared, task), meta


#: the handshake: a :class:`~reportfed.core.node.Description` field per ConfigRecord key; ``rows`` travels
#: as the MetricRecord's ``num-examples``, each of the node's public settings as ``setting.<key>``
SETTING = "setting."


def description_records(description: Description) -> dict[str, Any]:
    """A node's answer to the ``query`` message (the inverse of :func:`read_description`)."""
    d = description
    meta = ConfigRecord(
        {
            "name": d.name,
            "labels": list(d.labels),
            "fingerprint": d.fingerprint,
            "dim": d.dim,
            **{SETTING + key: value for key, value in d.settings.items()},
        }
    )
    return {META: meta, METRICS: MetricRecord({"num-examples": d.rows})}


def read_description(content: RecordDict) -> Description:
    """The :class:`~reportfed.core.node.Description` a ``query`` reply carries, every value
    bounded (:mod:`reportfed.core.limits`) before anything is built from it (``KeyError``,
    ``TypeError``, ``ValueError`` or ``LabelError`` when it is malformed or out of bounds)."""
    meta = content.config_records[META]
    labels = names(meta["labels"])
    settings = {k[len(SETTING) :]: v for k, v in meta.items() if k.startswith(SETTING)}
    if sum(len(str(k)) + len(str(v)) for k, v in settings.items()) > MAX_HANDSHAKE_CHARS:
        raise ValueError(f"its settings hold more than {MAX_HANDSHAKE_CHARS} characters")
    fingerprint = meta["fingerprint"]
    if not isinstance(fingerprint, str) or len(fingerprint) > 1000:
        raise ValueError("the fingerprint must be text of at most 1000 characters")
    return Description(
        bounded_name("its name", meta["name"]),
        LabelSpace.of(labels, allow_unknown=True),
        fingerprint,
        bounded_int("its input dimension", meta["dim"], 1, MAX_DIM),
        bounded_int("its rows", content.metric_records[METRICS]["num-examples"], 0, MAX_ROWS),
        settings,  # type: ignore[arg-type]
    )


def evaluation_records(evaluation: tuple[list[str], dict[str, Any]] | None) -> dict[str, Any]:
    """The records of a node's evaluation: the labels it evaluated and their metrics
    (:func:`reportfed.flower.node_service.evaluation_metrics`); none when it made none."""
    if evaluation is None:
        return {}
    labels, metrics = evaluation
    return {EVALUATED: ConfigRecord({"labels": labels}), EVALUATION: MetricRecord(metrics)}


def names(value: object) -> list[str]:
    """Label names as a reply carries them: a list of at most :data:`MAX_LABELS` names, each
    bounded."""
    if not isinstance(value, list) or len(value) > MAX_LABELS:
        raise ValueError(f"labels must be a list of at most {MAX_LABELS} names")
    return [bounded_name("a label", c) for c in value]


def parse_update(content: RecordDict, node: str) -> tuple[NodeUpdate, list[str], float]:
    """A node's train reply, checked: its update (weights, the labels its rows are for, its
    examples within :data:`MAX_ROWS`), the labels it annotates itself and its training loss
    (``KeyError``, ``TypeError``, ``ValueError`` or ``LabelError`` where it is malformed)."""
    shared, task = from_record(content.array_records[ARRAYS])
    meta = content.config_records[META]
    labels = names(meta["labels"])
    annotated = names(meta.get("annotated", labels))
    metrics = content.metric_records[METRICS]
    n = bounded_int("num-examples", metrics["num-examples"], 0, MAX_ROWS)
    loss = float(metrics["train-loss"])  # type: ignore[arg-type]
    return NodeUpdate(node, labels, shared, task, num_examples=n), annotated, loss


#: the largest calibration coefficient a node may send (fitted ones lie within +-20)
MAX_COEFFICIENT = 1e3


@dataclass(frozen=True)
class NodeEvaluation:
    """A node's evaluation of the global model, per label it evaluated (of the model's): its
    held-out rows, AUROC, F1 threshold and positives (``stats``, 4 x labels; AUROC and threshold
    NaN where it cannot judge), its calibration (``coefficients`` of the labels ``fitted``) and
    the positives each threshold rests on (``weights``; ``None`` where the node sent none)."""

    labels: list[str]
    stats: np.ndarray
    coefficients: np.ndarray
    fitted: np.ndarray
    weights: np.ndarray | None = None


def parse_evaluation(content: RecordDict, known: LabelSpace, coefficients: int) -> NodeEvaluation:
    """A node's evaluation records, checked: labels the model holds, once each; rows within
    :data:`MAX_ROWS`, AUROC and thresholds in [0, 1] or NaN, positives within rows, the
    positives behind each threshold (where sent) within :data:`MAX_ROWS`, ``coefficients`` per
    calibration, each within +-:data:`MAX_COEFFICIENT` (``ValueError``, ``KeyError`` or
    ``TypeError`` where it is malformed or out of bounds)."""
    labels = names(content.config_records[EVALUATED]["labels"])
    unknown = [c for c in labels if c not in known]
    if unknown or len(set(labels)) != len(labels):
        raise ValueError(f"labels the model does not hold, or twice: {unknown or labels}")
    m = content.metric_records[EVALUATION]
    columns = [m["n"], m["auroc"], m["threshold"], m.get("positives", [0] * len(labels))]
    stats = np.asarray(columns, dtype=np.float64).reshape(4, len(labels))
    n, auc, thr, pos = stats
    if not (np.isfinite(n).all() and (n >= 0).all() and (n <= MAX_ROWS).all()):
        raise ValueError(f"held-out rows outside [0, {MAX_ROWS}]")
    if not (np.isfinite(pos).all() and (pos >= 0).all() and (pos <= n).all()):
        raise ValueError("positives beyond the held-out rows")
    for name, values in (("AUROC", auc), ("threshold", thr)):
        if ((values < 0) | (values > 1)).any():  # NaN compares false: a label it cannot judge
            raise ValueError(f"a {name} outside [0, 1]")
    fitted = np.asarray(m.get("calibrated", []), dtype=bool)
    if len(fitted) not in (0, len(labels)):
        raise ValueError(f"{len(fitted)} calibrations for {len(labels)} labels")
    coef = np.asarray(m.get("calibration", []), dtype=np.float64).reshape(len(fitted), coefficients)
    if (np.abs(coef) > MAX_COEFFICIENT).any():
        raise ValueError(f"a calibration coefficient beyond +-{MAX_COEFFICIENT:g}")
    weights = None
    if "threshold-positives" in m:
        weights = np.asarray(m["threshold-positives"], dtype=np.float64).reshape(len(labels))
        if not (
            np.isfinite(weights).all() and (weights >= 0).all() and (weights <= MAX_ROWS).all()
        ):
            raise ValueError(f"threshold positives outside [0, {MAX_ROWS}]")
    return NodeEvaluation(labels, stats, coef, fitted, weights)
