"""Secure surgical aggregation: the server learns the sum of the nodes' updates, never one update.

Surgical aggregation is a sum over the nodes that hold each label, so it runs under a sum-only
protocol. Each node sends its change to the model it received: the shared block and, for every
label of the federation's model, its rows' change, zero for the labels it lacks
(:func:`masked_input`). Flower's SecAgg+ (``SecAggPlusWorkflow`` on the server, ``secaggplus_mod``
on the node) masks these vectors so that only their mean comes out. Which node holds which label
is public (the registry knows every node's labels), so the server rebuilds exactly the rows of a
plain round from the mean and the per-label counts
(:meth:`~reportfed.flower.strategy.SurgicalAggregation.aggregate_sum`,
:class:`~reportfed.core.aggregation.Sums`).

The server's side, Flower's workflow run from reportfed's round loop, is
:mod:`reportfed.flower.secure_round`, and what a secure run refuses before it starts is in
:mod:`reportfed.flower.run_checks`; this module is what the node runs and what both share.

Quantization: SecAgg+ maps every value to an integer of 30 bits (:data:`QUANTIZATION_RANGE`)
over ``[-range, range]`` by stochastic rounding (``range`` = the run's ``clip-norm`` when set,
else :data:`DEFAULT_RANGE`), and the masked sum is exact. The mean's error is unbiased and at most
``2 range / 2**30`` per value (1.5e-8 at the default range), below float32's resolution of
weights above 0.25. Flower quantizes in the dtype it is handed, so a node hands it its change
in float64: in float32 the 30-bit levels would round to float32's 24 bits (9.5e-7 at range 8).
A node refuses to send a change beyond the range instead of letting it be clipped.

What the server still learns: the mean change, and so the global model every node receives; a
label only one node holds has that node's rows in the clear (its sum has one term); with two
nodes, each can subtract its own update from the sum and read the other's.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.app.message_type import MessageType
from flwr.client.mod import secaggplus_mod
from flwr.common import (
    Code,
    FitRes,
    Parameters,
    Status,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS
from flwr.compat.common.recorddict_compat import fitres_to_recorddict

from reportfed.core.aggregation import (
    GlobalState,
    NodeUpdate,
    clip_update,
    flatten,
    known_rows,
    unflatten,
)
from reportfed.core.errors import ConfigError
from reportfed.core.labels import LabelSpace

#: value range of SecAgg+'s quantization without a clip norm (Flower's default)
DEFAULT_RANGE = 8.0
#: SecAgg+'s integer levels over that range and the modulus of its masked sums: 256 times
#: Flower's defaults (2**22, 2**32), so a sum is exact to 1.5e-8 over a range of 8 (Flower's
#: stochastic rounding left 4e-6, enough to move a model's probabilities by 1e-5 in three
#: rounds), with the same ceiling of 1,024 nodes a sum can hold and the same 8 bytes a value
QUANTIZATION_RANGE, MODULUS_RANGE = 2**30, 2**40
#: share of a round's nodes whose key shares rebuild a dropped node's masks: with 3 nodes, 2
THRESHOLD = 2 / 3
#: RecordDict keys of the train instructions inside SecAgg+ (Flower's legacy ``FitIns``)
FITINS_ARRAYS, FITINS_CONFIG = "fitins.parameters", "fitins.config"


def value_range(clip_norm: float) -> float:
    """The range SecAgg+ quantizes over: the clip norm bounds every value of a clipped update."""
    return clip_norm if clip_norm > 0 else DEFAULT_RANGE


def secure_mod(msg: Message, context: Context, call_next: Any) -> Message:
    """Flower's ``secaggplus_mod`` for the messages of a secure round (the others pass)."""
    if (
        msg.metadata.message_type == MessageType.TRAIN
        and RECORD_KEY_CONFIGS in msg.content.config_records
    ):
        return secaggplus_mod(msg, context, call_next)
    return call_next(msg, context)


def carries_instructions(msg: Message) -> bool:
    """Whether ``msg`` is the train message of a secure round: the instructions SecAgg+ carries,
    in a message that came through its stages (:func:`secure_mod`), so that what the node
    answers is masked before it leaves."""
    records = msg.content.config_records
    return FITINS_CONFIG in records and RECORD_KEY_CONFIGS in records


def unpack(msg: Message) -> tuple[GlobalState, ConfigRecord]:
    """The global rows and the ConfigRecord a secure round's train message carries."""
    meta = msg.content.config_records[FITINS_CONFIG]
    names = [str(x) for x in cast(list[str], meta["arrays"])]
    record = msg.content.array_records[FITINS_ARRAYS]  # keys "0", "1", ...: their order is lost
    tensors = [record[str(i)].data for i in range(len(names))]  # on the wire
    arrays = parameters_to_ndarrays(Parameters(tensors=tensors, tensor_type="numpy.ndarray"))
    shared, task = unflatten(dict(zip(names, arrays, strict=True)))
    labels = LabelSpace.of([str(x) for x in cast(list[str], meta["labels"])], allow_unknown=True)
    return GlobalState(labels, shared, task), meta


def masked_input(
    update: NodeUpdate, received: GlobalState, meta: ConfigRecord, metrics: dict[str, Any]
) -> RecordDict:
    """What a node hands SecAgg+ to mask: its change to the rows it ``received`` in float64,
    clipped to the run's ``clip-norm``, laid out over the federation's labels (zero for the labels
    it lacks), with weight 1 (uniform) and its training ``metrics``."""
    clip = float(cast(float, meta.get("clip-norm", 0.0)))
    if clip > 0:
        update = clip_update(update, received, clip)
    union = LabelSpace.of([str(x) for x in cast(list[str], meta["union"])], allow_unknown=True)
    mine, rows = known_rows(update, received)  # the node received every label of its own
    theirs = union.indices([received.labels[i] for i in rows])
    task = {}
    for key, value in update.task.items():
        padded = np.zeros((len(union), *value.shape[1:]), dtype=np.float64)
        padded[theirs] = value[mine] - received.task[key][rows]
        task[key] = padded
    shared = {k: np.asarray(v, np.float64) - received.shared[k] for k, v in update.shared.items()}
    flat = flatten(shared, task)
    vector = [flat[str(name)] for name in cast(list[str], meta["arrays"])]  # the server's order
    largest = max(float(np.max(np.abs(v), initial=0.0)) for v in vector)
    bound = value_range(clip)
    if largest > bound:
        raise ConfigError(
            f"a change of {largest:.4g} exceeds secure aggregation's range ±{bound:g}: give the "
            "run a clip-norm (its range) so that no value is clipped silently"
        )
    fitres = FitRes(
        Status(Code.OK, ""),
        ndarrays_to_parameters(vector),
        num_examples=1,
        metrics=metrics,
    )
    return fitres_to_recorddict(fitres, keep_input=False)
