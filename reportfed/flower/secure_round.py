"""The server's side of a secure round (:mod:`reportfed.flower.secure` says what is sent and
why): Flower's ``SecAggPlusWorkflow``, unchanged, run with the legacy strategy it asks for.

``SecAggPlusWorkflow`` belongs to Flower's legacy API; it asks a legacy ``Strategy`` for each
node's instructions (``configure_fit``) and hands it the unmasked mean (``aggregate_fit``), while
reportfed's round loop (:func:`~reportfed.flower.exchange.run_on_grid`) drives a message
``Strategy``. So :class:`SecureAggregation` is the loop's train exchange for a secure round: it
runs the workflow with :class:`_Round`, which gives it the messages
:meth:`~reportfed.flower.strategy.SurgicalAggregation.configure_train` built and takes the mean
back for :meth:`~reportfed.flower.strategy.SurgicalAggregation.aggregate_sum`. Its replies are
pulled every :data:`~reportfed.flower.exchange.POLL_S` seconds instead of Flower's 3 s. The
protocol, its cryptography and its handling of dropped nodes are Flower's: a node that drops
after the setup stage is unmasked from its neighbours' key shares as long as
:data:`~reportfed.flower.secure.THRESHOLD` of the round's nodes answer; below that the workflow
halts and the round leaves the model unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.common import FitIns, FitRes, Parameters, parameters_to_ndarrays
from flwr.server import ClientManager, SimpleClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.compat.grid_client_proxy import GridClientProxy
from flwr.server.compat.legacy_context import LegacyContext
from flwr.server.strategy import Strategy as LegacyStrategy
from flwr.server.workflow import SecAggPlusWorkflow
from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD
from flwr.server.workflow.constant import Key as WorkflowKey
from flwr.serverapp import Grid

from reportfed.core.labels import LabelSpace
from reportfed.flower.exchange import Traffic, exchange
from reportfed.flower.secure import MODULUS_RANGE, QUANTIZATION_RANGE, THRESHOLD, value_range
from reportfed.flower.strategy import SurgicalAggregation
from reportfed.flower.wire import ARRAYS, META

_log = logging.getLogger(__name__)


@dataclass
class Outcome:
    """What SecAgg+ hands its strategy: the unmasked mean of the nodes' vectors (``None`` when
    the protocol halted), the nodes in it and their training metrics."""

    mean: list[np.ndarray] | None = None
    nodes: list[int] = field(default_factory=list)
    metrics: dict[int, dict[str, Any]] = field(default_factory=dict)


class _Round(LegacyStrategy):
    """The legacy strategy ``SecAggPlusWorkflow`` asks: each node's instructions are the message
    :meth:`SurgicalAggregation.configure_train` built for it; the unmasked mean is kept."""

    def __init__(self, messages: list[Message], union: LabelSpace, grid: Grid) -> None:
        self.instructions = {m.metadata.dst_node_id: _fitins(m, union) for m in messages}
        self.grid = grid
        self.outcome = Outcome()

    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        return [(GridClientProxy(n, self.grid, 0), f) for n, f in self.instructions.items()]

    def aggregate_fit(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, FitRes]],
        failures: list[Any],
    ) -> tuple[Parameters | None, dict[str, Any]]:
        self.outcome = Outcome(
            parameters_to_ndarrays(results[0][1].parameters) if results else None,
            [proxy.node_id for proxy, _ in results],
            {proxy.node_id: dict(res.metrics) for proxy, res in results},
        )
        return None, {}

    # the workflow asks for nothing else
    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        return None

    def configure_evaluate(self, *args: Any) -> list[Any]:
        return []

    def aggregate_evaluate(self, *args: Any) -> tuple[None, dict[str, Any]]:
        return None, {}

    def evaluate(self, *args: Any) -> None:
        return None


def _fitins(message: Message, union: LabelSpace) -> FitIns:
    """A train message as the instructions SecAgg+ forwards: arrays in order, their names and
    the federation's labels (the layout of the node's vector) in the config."""
    record = message.content.array_records[ARRAYS]
    config: dict[str, Any] = dict(message.content.config_records[META])
    config["arrays"] = list(record.keys())
    config["union"] = list(union)
    tensors = [record[key].data for key in record]
    return FitIns(Parameters(tensors=tensors, tensor_type="numpy.ndarray"), config)


class _Restart(Exception):
    """Some nodes did not answer SecAgg+'s setup: run the round again with those that did."""

    def __init__(self, answered: set[int]) -> None:
        self.answered = answered


class _Polling:
    """The part of a ``Grid`` the workflow uses, with replies pulled every ``POLL_S`` seconds.

    A node that misses the setup stage stays in the workflow's list of the round's nodes, and
    the unmask stage then asks the others for key shares of it that they never got, so the round
    fails (Flower 1.41). With ``strict``, a setup stage some nodes miss stops the workflow
    instead (:class:`_Restart`), before any node trains, to be run again without them."""

    def __init__(self, grid: Grid, timeout: float, strict: bool, traffic: Traffic) -> None:
        self.grid = grid
        self.timeout = timeout
        self.strict = strict
        self.traffic = traffic
        self.calls = 0

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> list[Message]:
        messages = list(messages)
        replies = exchange(
            self.grid, messages, timeout=timeout or self.timeout, traffic=self.traffic
        )
        self.calls += 1
        answered = {r.metadata.src_node_id for r in replies if not r.has_error()}
        if self.strict and self.calls == 1 and len(answered) < len(messages):
            raise _Restart(answered)
        return replies


@dataclass(frozen=True)
class SecureAggregation:
    """A round's train exchange under SecAgg+ (the module docstring): ``strategy`` builds each
    node's message, Flower's workflow masks and sums the nodes' vectors, and ``strategy`` merges
    their mean (:meth:`SurgicalAggregation.aggregate_sum`)."""

    strategy: SurgicalAggregation
    grid: Grid
    config: ConfigRecord
    clip_norm: float = 0.0
    timeout: float = 600.0

    def __call__(
        self, server_round: int, arrays: ArrayRecord, traffic: Traffic
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Round ``server_round`` from the global ``arrays``: the new arrays and the metrics
        (every stage's bytes counted in ``traffic``)."""
        messages = list(self.strategy.configure_train(server_round, arrays, self.config, self.grid))
        legacy = self._run(messages, server_round, traffic, strict=True)
        out = legacy.outcome
        return self.strategy.aggregate_sum(server_round, out.mean, out.nodes, out.metrics)

    def _run(
        self, messages: list[Message], server_round: int, traffic: Traffic, *, strict: bool
    ) -> _Round:
        """SecAgg+ over ``messages``; with ``strict``, once more without the nodes that miss its
        setup (:class:`_Polling`)."""
        legacy = _Round(messages, self.strategy.labels, self.grid)
        if len(messages) < 2:  # SecAgg+ needs two nodes; fewer leave the model unchanged
            return legacy
        base = Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={})
        # the round's nodes, so that the workflow's "sampled N clients (out of M)" counts them
        nodes = SimpleClientManager()
        for node_id in legacy.instructions:
            nodes.register(GridClientProxy(node_id, self.grid, 0))
        context = LegacyContext(base, strategy=legacy, client_manager=nodes)
        context.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord(
            {WorkflowKey.CURRENT_ROUND: server_round}
        )
        context.state.array_records[MAIN_PARAMS_RECORD] = ArrayRecord()
        workflow = SecAggPlusWorkflow(
            num_shares=1.0,
            reconstruction_threshold=THRESHOLD,
            max_weight=1.0,
            clipping_range=value_range(self.clip_norm),
            quantization_range=QUANTIZATION_RANGE,
            modulus_range=MODULUS_RANGE,
            timeout=self.timeout,
        )
        try:
            workflow(cast(Grid, _Polling(self.grid, self.timeout, strict, traffic)), context)
        except _Restart as restart:
            _log.warning(
                "round %d: node(s) %s missed SecAgg+'s setup; the round goes on without them",
                server_round,
                sorted({m.metadata.dst_node_id for m in messages} - restart.answered),
            )
            alive = [m for m in messages if m.metadata.dst_node_id in restart.answered]
            return self._run(alive, server_round, traffic, strict=False)
        return legacy
