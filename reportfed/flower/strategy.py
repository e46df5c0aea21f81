"""``SurgicalAggregation``: a Flower ``Strategy`` whose server step is the aggregation core.

Flower's FedAvg needs every reply to carry the same arrays; here every node carries the rows of
its own labels, so the strategy keeps the global label space and lets
:class:`reportfed.core.server.SurgicalServer` do the averaging. Rounds are numbered over a run's
whole life (a resumed run goes on from its checkpoint's round). Flow of a run:

1. :meth:`SurgicalAggregation.register` waits for ``min_nodes`` nodes and registers them through
   its :class:`~reportfed.flower.registry.Registry` (the ``query`` handshake). It
   returns the initial global arrays (built by ``init_fn`` over the union of the labels) or the
   arrays of a resumed checkpoint.
2. Every round (:meth:`configure_train`), each registered, connected node receives the shared block
   and the rows of its own labels; nodes that connected since are registered first.
3. :meth:`aggregate_train` turns replies into :class:`~reportfed.core.aggregation.NodeUpdate` and
   steps the :class:`~reportfed.core.server.SurgicalServer` with ``on_invalid="drop"``: error replies
   (a dead node), NaN/Inf and wrong shapes are logged and left out; labels nobody sent keep their
   last rows; a label a node brings in a later round joins the global model. Fewer than
   ``min_nodes`` accepted updates leave the global model unchanged for that round. Each round is
   recorded in a :class:`~reportfed.core.record.RunHistory`.
4. Evaluation of the global model after round ``r`` (every ``evaluate_every`` rounds) runs on each
   node's held-out rows when round ``r + 1``'s train message reaches it, before it trains, and
   comes back with its update: a round is one exchange. The final model is evaluated by an
   ``evaluate`` message after the last round. Evaluations are averaged per label over the nodes
   having it (weighted by their annotated rows); the per-label thresholds, and the calibrations
   the nodes fitted on the same rows (:mod:`reportfed.text.calibration`), are kept for the model file.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from reportfed.core.aggregation import (
    Arrays,
    GlobalState,
    Sums,
    flatten,
    node_arrays,
    unflatten,
)
from reportfed.core.errors import ConfigError, LabelError, RunFailedError
from reportfed.core.labels import LabelSpace
from reportfed.core.metrics import node_mean
from reportfed.core.record import NODE_MEAN, Evaluation, RunHistory
from reportfed.core.server import ServerOptions, StepResult, SurgicalServer
from reportfed.flower.registry import Member, Registry
from reportfed.flower.wire import (
    ARRAYS,
    EVALUATION,
    META,
    NodeEvaluation,
    from_record,
    parse_evaluation,
    parse_update,
    to_record,
)
from reportfed.text.assertion import has_lexicon
from reportfed.text.calibration import COEFFICIENTS

_log = logging.getLogger(__name__)

InitFn = Callable[[int, LabelSpace], tuple[Arrays, Arrays]]


#: held-out rows under which a label's AUROC on the nodes is called unreliable
RELIABLE_ROWS = 30
#: fewer nodes than this learn each other's updates from a secure sum (theirs subtracted)
SECURE_MIN_NODES = 3


class SurgicalAggregation(Strategy):
    """Surgical aggregation over Flower nodes with different label sets.

    Parameters
    ----------
    init_fn:
        ``init_fn(input_dim, labels) -> (shared, task)``: the initial global model.
    fingerprint, dim:
        The vector space every node must embed into, and its dimension: the run's (read from
        the embedder it declares), never a node's.
    min_nodes:
        Nodes that must be connected before the first round, and accepted updates a round needs
        to change the global model.
    options:
        The server's rules (:class:`~reportfed.core.server.ServerOptions`), applied by a
        :class:`~reportfed.core.server.SurgicalServer`. An invalid update is always dropped here
        (``on_invalid="drop"``): one node's NaN must not end a federation of hospitals.
    evaluate_every:
        Evaluate on the nodes every this many rounds (and after the last); ``0`` only after the last.
    join_timeout:
        Seconds a new node has to answer its first message (the query): it reads and embeds its
        reports then, which can take minutes where the round itself takes seconds.
    secure:
        Rounds run under secure aggregation (:mod:`reportfed.flower.secure`): the strategy gets
        the nodes' mean change, never one node's (:meth:`aggregate_sum`); evaluations then come
        by their own ``evaluate`` exchange, and labels of nodes that join later are added to the
        global model (initial rows) before the round that first sends them.
    """

    def __init__(
        self,
        init_fn: InitFn,
        *,
        fingerprint: str,
        dim: int,
        min_nodes: int = 2,
        options: ServerOptions | None = None,
        evaluate_every: int = 1,
        join_timeout: float = 600.0,
        secure: bool = False,
    ) -> None:
        if min_nodes < 1:
            raise ConfigError(f"min_nodes must be >= 1, got {min_nodes}")
        self.init_fn = init_fn
        self.min_nodes = min_nodes
        self.registry = Registry(fingerprint, dim, join_timeout)
        self.options = replace(options or ServerOptions(), on_invalid="drop")
        self.evaluate_every = evaluate_every
        self.secure = secure
        self.last_round = 0
        self.thresholds: dict[str, float] = {}
        self._reading_run = False  #: the run reads: nodes also train the labels they lack, as read
        self.calibration: dict[str, list[float]] = {}
        self.history = RunHistory()
        self._server: SurgicalServer | None = None
        self._awaiting: set[int] = set()
        self._started = 0.0

    def register(
        self,
        grid: Grid,
        last_round: int,
        *,
        resume: GlobalState | None = None,
        wait: float = 600.0,
    ) -> ArrayRecord:
        """Wait for ``min_nodes`` nodes, register them, and return the initial global arrays:
        new (``init_fn`` over the union of the nodes' labels) or a checkpoint's (``resume``).
        ``last_round`` is the run's last round number (rounds are numbered from 1 over a resumed
        run's whole life)."""
        self.registry.wait_for(grid, self.min_nodes, wait)
        self.registry.register_new(grid)
        members = self.registry.members
        if len(members) < self.min_nodes:
            excluded = "; ".join(f"{n}: {why}" for n, why in self.registry.excluded.items())
            raise RunFailedError(
                f"{len(members)} node(s) registered, {self.min_nodes} needed"
                + (f"; excluded: {excluded}" if excluded else "")
            )
        if self.secure and len(members) < SECURE_MIN_NODES:
            _log.warning(
                "secure aggregation with %d nodes hides nothing: each node can subtract its own "
                "update from the sum the server returns and read the other's (3 or more nodes "
                "are needed)",
                len(members),
            )
        self.last_round = last_round
        if resume is None:
            labels = LabelSpace.union(m.labels for m in members.values())
            resume = GlobalState(labels, *self.init_fn(self.registry.dim, labels))
        self._server = SurgicalServer(resume, self.options, min_nodes=self.min_nodes)
        return to_record(resume.shared, resume.task)

    # -- state ---------------------------------------------------------------------------------
    @property
    def server(self) -> SurgicalServer:
        """The server step over the registered nodes' labels (made by :meth:`register`)."""
        if self._server is None:
            raise RuntimeError("SurgicalAggregation.register() must come before any round")
        return self._server

    @property
    def labels(self) -> LabelSpace:
        """The global model's labels (none before :meth:`register`)."""
        return LabelSpace(()) if self._server is None else self._server.state.labels

    def global_state(self, arrays: ArrayRecord) -> GlobalState:
        """The global model held in ``arrays`` with its label space."""
        shared, task = from_record(arrays)
        return GlobalState(labels=self.labels, shared=shared, task=task)

    def _evaluates(self, server_round: int) -> bool:
        """Whether the global model after ``server_round`` is evaluated: every
        ``evaluate_every`` rounds and after the last."""
        return server_round >= self.last_round or (
            self.evaluate_every > 0 and server_round % self.evaluate_every == 0
        )

    def _messages(
        self,
        kind: str,
        server_round: int,
        state: GlobalState,
        config: ConfigRecord,
        grid: Grid,
        *,
        evaluate: bool = False,
    ) -> list[Message]:
        connected = set(grid.get_node_ids())
        # knowledge transfer and reading: a training node needs every row, not only its own
        # labels'
        self._reading_run = bool(config.get("read", False))
        every_row = kind == "train" and (float(config.get("distill", 0.0)) > 0 or self._reading_run)  # type: ignore[arg-type]
        messages = []
        for member in sorted(self.registry.members.values(), key=lambda m: m.index):
            if member.node_id not in connected:
                continue
            known = [name for name in member.labels if name in state.labels]
            if every_row:
                known = list(state.labels)
            shared, task = node_arrays(state, known)
            meta = ConfigRecord(dict(config))
            meta["labels"] = known
            meta["round"] = server_round
            meta["node-index"] = member.index
            meta["members"] = len(self.registry.members)
            meta["evaluate"] = evaluate
            content = RecordDict({ARRAYS: to_record(shared, task), META: meta})
            messages.append(Message(content, dst_node_id=member.node_id, message_type=kind))
        return messages

    # -- Strategy API --------------------------------------------------------------------------
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Register newly connected nodes, then send each node the shared block and its rows
        (asking it to evaluate them first when the previous round's model is due evaluation)."""
        self.registry.register_new(grid)
        # the arrays Flower hands back are the global model (a DP wrapper may have noised them)
        self.server.state = self.global_state(arrays)
        if self.secure:
            self.server.state = self._with_new_labels(self.server.state)
        # the previous round's model rides along to be evaluated first: one exchange per round
        # (not under secure aggregation, whose replies carry only the masked vector)
        evaluate = not self.secure and server_round > 1 and self._evaluates(server_round - 1)
        messages = self._messages(
            "train", server_round, self.server.state, config, grid, evaluate=evaluate
        )
        self._awaiting = {m.metadata.dst_node_id for m in messages}
        self._started = time.perf_counter()
        return messages

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Surgical aggregation of the valid replies; see the module docstring."""
        replies = list(replies)
        self._evaluated(server_round - 1, replies)  # the evaluations that rode along, if any
        updates, failed, losses = [], {}, {}
        sent: dict[str, list[str]] = {}  # per node, the labels of its update it annotates
        for reply in replies:
            member = self.registry.members.get(reply.metadata.src_node_id)
            if member is None:
                continue
            if reply.has_error():
                failed[member.name] = f"node error: {reply.error.reason}"
                continue
            try:
                update, annotated, losses[member.name] = parse_update(reply.content, member.name)
            except (KeyError, TypeError, ValueError, LabelError) as exc:
                failed[member.name] = f"malformed reply ({exc})"
                continue
            updates.append(update)
            sent[member.name] = annotated
        replied = {reply.metadata.src_node_id for reply in replies}
        failed |= self._missing(replied, "no reply within the round timeout")
        step = self.server.step(updates)
        if step.aggregated:
            by_name = self.registry.by_name()
            for update in updates:
                if update.node_id in step.accepted:
                    member = by_name[update.node_id]
                    own = LabelSpace.of(sent[update.node_id], allow_unknown=True)
                    member.labels = own
                    member.reads = LabelSpace(tuple(c for c in update.labels if c not in own))
        return self._recorded(server_round, step, failed, losses)

    def aggregate_sum(
        self,
        server_round: int,
        mean: Sequence[np.ndarray] | None,
        nodes: Sequence[int],
        metrics: Mapping[int, Mapping[str, Any]],
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Surgical aggregation from ``mean``, the mean of the masked vectors of ``nodes``
        (secure aggregation, :mod:`reportfed.flower.secure`; ``None``: the protocol halted),
        with their training ``metrics``. The nodes' labels are public, so each label's rows are
        its holders' mean change; no node's own update is ever at hand."""
        previous = self.server.state
        members = sorted(
            (self.registry.members[n] for n in nodes if n in self.registry.members),
            key=lambda m: m.name,
        )
        losses = {
            m.name: float(metrics[m.node_id]["train-loss"])
            for m in members
            if "train-loss" in metrics.get(m.node_id, {})
        }
        failed = self._missing(set(nodes), "no masked update (dropped out of SecAgg+)")
        if mean is None or not members:
            halted = StepResult(previous, [], {}, aggregated=False, joined=[])
            return self._recorded(server_round, halted, failed, losses)
        names = list(flatten(previous.shared, previous.task))
        shared, task = unflatten(dict(zip(names, mean, strict=True)))
        k = float(len(members))
        # a reading node holds every label it can read as well as its own (reports.node.with_read):
        # the lexicon's, and the findings it defined
        for m in members:
            readable = [c for c in previous.labels if has_lexicon(c) or c in m.defines]
            lacked = [c for c in readable if c not in m.labels] if self._reading_run else []
            m.reads = LabelSpace(tuple(lacked))
        holders = np.array(
            [sum(c in m.labels or c in m.reads for m in members) for c in previous.labels], float
        )
        sums = Sums(
            previous.labels,
            {key: k * (previous.shared[key] + v) for key, v in shared.items()},
            {
                key: holders.reshape((-1,) + (1,) * (v.ndim - 1)) * previous.task[key] + k * v
                for key, v in task.items()
            },
            k,
            holders,
        )
        step = self.server.step(sums, [m.name for m in members])
        return self._recorded(server_round, step, failed, losses)

    def _missing(self, replied: set[int], reason: str) -> dict[str, str]:
        """Why each member that sent no update this round is missing."""
        failed = {}
        for node_id, member in sorted(self.registry.members.items()):
            if node_id not in self._awaiting:
                failed[member.name] = "not connected"
            elif node_id not in replied:
                failed[member.name] = reason
        return failed

    def _recorded(
        self,
        server_round: int,
        step: StepResult,
        failed: dict[str, str],
        losses: dict[str, float],
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Log and record a round's step; the new global arrays and the round's metrics."""
        for name, reason in failed.items():
            _log.error("round %d: no update from %r: %s", server_round, name, reason)
        for name, reason in step.rejected.items():
            _log.error("round %d: rejected the update of %r: %s", server_round, name, reason)
        seconds = time.perf_counter() - self._started
        self.history.trained(
            server_round, step, seconds=seconds, metrics={"loss": losses}, failed=failed
        )
        if not step.aggregated:
            _log.warning(
                "round %d: %d valid update(s) < min_nodes; model unchanged",
                server_round,
                len(step.accepted),
            )
            return None, None
        if step.joined:
            _log.info("round %d: new label(s) joined the federation: %s", server_round, step.joined)
        metrics = MetricRecord(
            {
                "nodes": len(step.accepted),
                "rejected": len(step.rejected) + len(failed),
                "train-loss": float(np.mean([losses[n] for n in step.accepted if n in losses])),
            }
        )
        return to_record(step.state.shared, step.state.task), metrics

    def _with_new_labels(self, state: GlobalState) -> GlobalState:
        """``state`` with initial rows for the members' labels it lacks (secure aggregation sums
        over the model's labels only, so a label joins before a node sends it)."""
        new = [c for m in self.registry.members.values() for c in m.labels if c not in state.labels]
        if not new:
            return state
        fresh = LabelSpace.of(list(dict.fromkeys(new)), allow_unknown=True)
        _, rows = self.init_fn(self.registry.dim, fresh)
        union = LabelSpace.union([state.labels, fresh])
        task = {}
        for key, old in state.task.items():
            grown = np.zeros((len(union), *old.shape[1:]), dtype=old.dtype)
            grown[union.indices(state.labels)] = old
            grown[union.indices(fresh)] = rows[key]
            task[key] = grown
        _log.info("label(s) of newly registered nodes join the global model: %s", list(fresh))
        return GlobalState(union, state.shared, task)

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """After the last round, send the final global rows to every node to evaluate (earlier
        rounds' models are evaluated with the next round's train message; under secure
        aggregation by this exchange, every ``evaluate_every`` rounds)."""
        if server_round < self.last_round and not (self.secure and self._evaluates(server_round)):
            return []
        return self._messages("evaluate", server_round, self.global_state(arrays), config, grid)

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> MetricRecord | None:
        """The final model's evaluation (see :meth:`_evaluated`)."""
        return self._evaluated(server_round, replies)

    def _evaluated(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        """Per-label AUROC of the global model after ``server_round``, averaged over the nodes
        having the label, weighted by their held-out rows (:func:`node_mean`), and its held-out
        positives over them, recorded in the history; the thresholds, averaged over the nodes
        that sent one weighted by the positives each rests on (by the held-out rows where a node
        sent none: :func:`~reportfed.core.metrics.site_thresholds`' rule), and the calibrations
        (averaged over the nodes that fitted one) are kept for the model file
        (:func:`_threshold_weights`)."""
        judged: list[tuple[str, float, np.ndarray]] = []  # label, rows, AUROC
        chosen: list[tuple[str, float, np.ndarray]] = []  # label, positives, threshold
        calibrated: list[tuple[str, float, np.ndarray]] = []  # label, rows, coefficients
        positives: dict[str, int] = {}  # label -> held-out positives over the nodes
        for reply in replies:
            member = self.registry.members.get(reply.metadata.src_node_id)
            if member is None or reply.has_error() or EVALUATION not in reply.content:
                continue
            try:
                found = parse_evaluation(reply.content, self.labels, len(COEFFICIENTS))
                weights = _threshold_weights(found, member)
            except (KeyError, TypeError, ValueError, LabelError) as exc:
                _log.error("malformed evaluation from %r: %s", member.name, exc)
                continue
            for j, label in enumerate(found.labels):
                n, auc, thr, pos = found.stats[:, j]
                positives[label] = positives.get(label, 0) + int(pos)
                judged.append((label, n, np.array([auc])))
                chosen.append((label, weights[j], np.array([thr])))
                if len(found.fitted) and found.fitted[j]:
                    calibrated.append((label, n, found.coefficients[j]))
        means = node_mean(judged)
        if not means:
            return None
        aucs = {label: float(means[label][1][0]) for label in self.labels if label in means}
        for label, (_, threshold) in node_mean(chosen).items():
            self.thresholds[label] = float(threshold[0])
        for label, (_, coefficients) in node_mean(calibrated).items():
            self.calibration[label] = [float(v) for v in coefficients]
        rows = {label: int(means[label][0]) for label in self.labels if label in means}
        evaluation = Evaluation(
            NODE_MEAN,
            auroc=aucs,
            positives={label: positives[label] for label in self.labels if label in positives},
            min_rows=min(rows.values()),
        )
        record = evaluation.to_json()
        self.history.evaluated(server_round, record)
        _log.info("\t└──> evaluation of round %d: %s", server_round, record)
        few = {label: n for label, n in rows.items() if n < RELIABLE_ROWS}
        if few:
            _log.warning(
                "round %d: AUROC from fewer than %d held-out rows is unreliable: %s (sites with "
                "more rows, or a larger --val-fraction on the nodes)",
                server_round,
                RELIABLE_ROWS,
                few,
            )
        return MetricRecord({k: v for k, v in record.items() if k != "statistic"})

    def summary(self) -> None:
        """Log the strategy's settings."""
        _log.info(
            "\t├── SurgicalAggregation: min_nodes=%d, evaluate_every=%d, %s",
            self.min_nodes,
            self.evaluate_every,
            self.options,
        )
        _log.info(
            "\t└── %d node(s), %d label(s): %s",
            len(self.registry.members),
            len(self.labels),
            list(self.labels),
        )


def _threshold_weights(found: NodeEvaluation, member: Member) -> np.ndarray:
    """What each of a node's thresholds weighs in the server's mean: the positives it rests on,
    or where the node sent none (:class:`NodeEvaluation`: an image node) its held-out rows of
    the labels it could judge; nothing for a label it neither annotates nor reads (as far as
    the server knows yet), and a ``ValueError`` where it claims more positives than its
    rows."""
    n, auc = found.stats[0], found.stats[1]
    if found.weights is None:
        return np.where(np.isfinite(auc), n, 0.0)
    if (found.weights > member.rows + n).any():
        raise ValueError("threshold positives beyond its rows")
    theirs = set(member.labels) | set(member.reads)
    return np.where([label in theirs for label in found.labels], found.weights, 0.0)
