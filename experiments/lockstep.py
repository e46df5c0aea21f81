"""Many federations trained in lockstep: stacked node weights and batched matrix products.

:func:`run_federations` trains every node of several federations (the repeats of a sweep setting)
at once. One Python step draws a mini-batch for every node, runs all the node MLPs as batched
matrix products over stacked weights, and takes one Adam step per node. It replays the per-node
loop of :func:`reportfed.reports.engine.run_federation` step for step: the same batch orders,
Adam's update rule and the server step of :func:`reportfed.core.aggregation.aggregate`.

How it computes is a :class:`Compute`: the device, bfloat16 matrix products, and whether dropout
masks replay the loop's draws. With ``replay`` a run gives the loop's models up to float rounding
(tested); replaying costs a slow draw per node and step, so by default each federation draws its
masks from its own seeded stream instead, which trains the same way statistically (tested), and a
federation's models do not depend on the federations batched beside it.

What the server does is the ``mode`` (the baselines of :mod:`experiments.baselines`):

* ``surgical``: the aggregation core after every round (FedAvg when nodes share all labels);
* ``local-heads``: the core averages the representation block; every node keeps its own head;
* ``split``: the second hidden layer is a body held by the server, one per federation, updated
  every step with the sum of its nodes' gradients; input layer and head stay on the node;
* ``none``: every node trains alone.

Sentence bags (nodes whose ``x`` is ``(n, S, dim)``, see :mod:`reportfed.embed.granularity`)
train the same way, batched over the sentence axis: every sentence row goes through the stacked
MLPs and each label takes the largest logit over a report's sentences, as
:func:`reportfed.text.model.pool_sentences` does. Their dropout masks are always drawn (the loop's
are one mask per real sentence in its batch order), so sentence runs equal the loop's exactly
only without dropout (tested), and statistically with it.

``FederationConfig.distill`` works as in the loop: each node's head then holds every label of its
federation, soft targets come from the node's weights at the start of the round, and only the
node's own rows go to the server. ``balance``, ``skip`` and ``weight_decay`` also work as in the
loop (positive weights counted per node, the head's input term stacked like the head), and so
do ``server_momentum`` (one velocity per federation) and ``prox``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from functools import partial
from itertools import pairwise
from typing import Literal

import numpy as np
import torch
from torch.nn import functional

from reportfed.core.aggregation import GlobalState, NodeUpdate
from reportfed.core.config import FederationConfig
from reportfed.core.labels import LabelSpace
from reportfed.core.rounds import round_seed
from reportfed.core.server import ServerOptions, SurgicalServer
from reportfed.nn.threads import torch_threads
from reportfed.reports.node import Node, initial_state
from reportfed.text.model import SKIP, sentence_mask
from reportfed.text.templates import lacked_negatives
from reportfed.text.train import positive_weights

Mode = Literal["surgical", "local-heads", "split", "none"]
MODES: tuple[Mode, ...] = ("surgical", "local-heads", "split", "none")
_BETAS, _EPS = (0.9, 0.999), 1e-8  # torch.optim.Adam's defaults, which train_local uses
#: config fields that may differ between the federations of one lockstep run: each federation
#: has its own server, seed and learning rates. Every other field (a new one included) must agree.
_PER_FEDERATION = frozenset({"lr", "node_lr", "seed", *(f.name for f in fields(ServerOptions))})


@dataclass(frozen=True)
class Compute:
    """How lockstep computes. ``device``: a torch device (``"cpu"``, ``"cuda"``, ``"cuda:1"``).
    ``bf16``: matrix products in bfloat16, on bf16 copies of the weights made every step (weights,
    Adam and the loss stay float32), so results equal float32 runs statistically, not bit for
    bit. ``replay``: report rows take the per-node loop's exact dropout draws (slower; the mode
    the loop-equivalence tests use). ``workers``: chunks trained at once, each on its own thread
    (:meth:`worker_count`); results do not depend on it."""

    device: str = "cpu"
    bf16: bool = False
    replay: bool = False
    workers: int | None = None

    def worker_count(self, device: torch.device) -> int:
        """How many chunks train at once: ``workers``, else one per torch thread on a CPU
        (a chunk trains on one thread: cheap steps, nothing to wait for between cores) and one
        on a GPU."""
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        return self.workers or (torch.get_num_threads() if device.type == "cpu" else 1)

    def torch_device(self) -> torch.device:
        """The device, checked to exist here."""
        try:
            device = torch.device(self.device)
        except RuntimeError as err:
            raise ValueError(f"unknown device {self.device!r}: {err}") from None
        if device.type not in ("cpu", "cuda"):
            raise ValueError(f"lockstep runs on a 'cpu' or 'cuda' device, not {self.device!r}")
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {self.device!r}: CUDA is not available on this machine")
        return device


@dataclass
class LockstepResult:
    """One federation's outcome: the server's global model (``None`` in ``split``/``none`` modes),
    every node's final weights over its own labels, each round's mean training loss per node,
    and in ``surgical`` mode the global model after each round (``rounds[-1]`` is ``state``)."""

    state: GlobalState | None
    nodes: dict[str, GlobalState]
    loss: list[dict[str, float]]
    rounds: list[GlobalState] = field(default_factory=list)


@dataclass
class _Stack:
    """The weights of M node MLPs, layer by layer: weight ``(M, in, out)`` (transposed, so that
    batched products and their gradients stay contiguous), bias ``(M, out)``, and with
    ``FederationConfig.skip`` the head's input term ``(M, input, out)``. The head is padded to the
    longest label list; a node uses its first ``len(labels)`` outputs."""

    weights: list[torch.Tensor]
    biases: list[torch.Tensor]
    keys: list[tuple[str, str]]  # (weight key, bias key) of each layer in the core's arrays
    skip: torch.Tensor | None = None

    def params(self) -> list[torch.Tensor]:
        pairs = [t for pair in zip(self.weights, self.biases, strict=True) for t in pair]
        return pairs if self.skip is None else [*pairs, self.skip]

    def with_params(self, params: Sequence[torch.Tensor]) -> _Stack:
        """A stack of the same layers holding ``params`` (in :meth:`params`' order)."""
        layers = len(self.weights)
        return _Stack(
            weights=list(params[: 2 * layers : 2]),
            biases=list(params[1 : 2 * layers : 2]),
            keys=self.keys,
            skip=params[-1] if self.skip is not None else None,
        )

    def load_shared(self, m: int | slice, shared: Mapping[str, np.ndarray]) -> None:
        """Write a shared block into model ``m`` (or every model of a slice)."""
        for (wk, bk), w, b in zip(self.keys[:-1], self.weights, self.biases, strict=False):
            w[m] = torch.from_numpy(np.asarray(shared[wk]).T)
            b[m] = torch.from_numpy(np.asarray(shared[bk]))

    def load_task(self, m: int, task: Mapping[str, np.ndarray]) -> None:
        """Write a node's task rows into model ``m``'s first outputs."""
        wk, bk = self.keys[-1]
        w, b = np.asarray(task[wk]), np.asarray(task[bk])
        self.weights[-1][m, :, : len(w)] = torch.from_numpy(w.T)
        self.biases[-1][m, : len(b)] = torch.from_numpy(b)
        if self.skip is not None:
            s = np.asarray(task[SKIP])
            self.skip[m, :, : len(s)] = torch.from_numpy(s.T)

    def view(self, m: int, labels: LabelSpace) -> GlobalState:
        """Model ``m``'s weights as the core's arrays: views of the stack (on the CPU), which
        the next step overwrites."""
        shared: dict[str, np.ndarray] = {}
        for (wk, bk), w, b in zip(self.keys[:-1], self.weights, self.biases, strict=False):
            shared[wk], shared[bk] = w[m].T.cpu().numpy(), b[m].cpu().numpy()
        wk, bk = self.keys[-1]
        n = len(labels)
        task = {
            wk: self.weights[-1][m, :, :n].T.cpu().numpy(),
            bk: self.biases[-1][m, :n].cpu().numpy(),
        }
        if self.skip is not None:
            task[SKIP] = self.skip[m, :, :n].T.cpu().numpy()
        return GlobalState(labels=labels, shared=shared, task=task)

    def logits(self, h: torch.Tensor, x: torch.Tensor, m: int | None = None) -> torch.Tensor:
        """Head outputs from last hidden activations ``h`` and inputs ``x``: of every model
        (batched ``(M, B, .)``), or of model ``m`` (``(B, .)``)."""
        if m is None:
            out = torch.baddbmm(self.biases[-1].unsqueeze(1), h, self.weights[-1])
            return out if self.skip is None else torch.baddbmm(out, x, self.skip)
        out = h @ self.weights[-1][m] + self.biases[-1][m]
        return out if self.skip is None else out + x @ self.skip[m]


@dataclass
class _Packing:
    """Where packed sentence rows came from (:meth:`_Bags.pack`): each row's bag (``bags`` for a
    padding row) and whether each bag has a sentence."""

    bag: torch.Tensor  # (M, R) long
    present: torch.Tensor  # (M, B) bool


@dataclass
class _Bags:
    """Sentence bags stored as their real sentences, bag after bag, in one sentence table: bag
    ``r``'s are rows ``first[r]`` to ``first[r] + count[r] - 1``, and row ``padding`` is zeros."""

    first: torch.Tensor  # (N,) long
    count: torch.Tensor  # (N,) long
    width: int  # the most sentences of any bag
    padding: int

    @staticmethod
    def store(bags: Sequence[np.ndarray], device: torch.device) -> tuple[torch.Tensor, _Bags]:
        """The sentence table of bags ``(n, S, dim)`` (all-zero rows are padding, see
        :func:`~reportfed.text.model.sentence_mask`), followed by one empty bag."""
        masks = [sentence_mask(torch.from_numpy(x)).numpy() for x in bags]
        count = np.concatenate([*(m.sum(1) for m in masks), [0]])
        dim = bags[0].shape[-1]
        table = np.concatenate(
            [*(x[m] for x, m in zip(bags, masks, strict=True)), np.zeros((1, dim))]
        )
        first = np.concatenate([[0], np.cumsum(count)[:-1]])
        index = partial(torch.as_tensor, dtype=torch.long, device=device)
        stored = _Bags(index(first), index(count), max(int(count.max()), 1), len(table) - 1)
        return torch.from_numpy(table.astype(np.float32)).to(device), stored

    def pack(self, batch: torch.Tensor) -> tuple[torch.Tensor, _Packing]:
        """The sentence-table rows of bags ``batch`` ``(M, B)``: each model's real sentences,
        bag by bag, padded with the zero row to ``(M, R)``, ``R`` the most any model has, so
        that every model scores its own sentences and not its batch's padding."""
        count = self.count[batch]
        slots = torch.arange(self.width, device=batch.device)
        real = (slots < count.unsqueeze(-1)).flatten(1)
        longest = max(int(count.sum(1).max()), 1)
        order = torch.argsort(~real, dim=1, stable=True)[:, :longest]  # real sentences first
        kept, bag = real.gather(1, order), order // self.width
        rows = self.first[batch.gather(1, bag)] + order % self.width
        return (
            torch.where(kept, rows, self.padding),
            _Packing(torch.where(kept, bag, batch.shape[1]), count > 0),
        )


def _pool(logits: torch.Tensor, packing: _Packing | None) -> torch.Tensor:
    """Per bag and label, the largest logit over its sentences (0 for a bag without any, the
    padding row); report logits as they are."""
    if packing is None:
        return logits
    shape = (len(packing.bag), packing.present.shape[1] + 1, logits.shape[-1])
    index = packing.bag.unsqueeze(-1).expand_as(logits)
    pooled = logits.new_full(shape, float("-inf")).scatter_reduce(1, index, logits, "amax")
    return torch.where(packing.present.unsqueeze(-1), pooled[:, :-1], 0.0)


def _mean_bce(
    logits: torch.Tensor,
    target: torch.Tensor,
    weight: torch.Tensor,
    count: torch.Tensor,
    pos_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per model, the binary cross-entropy of ``logits`` ``(M, B, labels)`` summed over the
    entries of 0/1 ``weight`` and divided by their ``count`` (at least 1)."""
    bce = functional.binary_cross_entropy_with_logits(
        logits, target, weight, pos_weight=pos_weight, reduction="none"
    )
    return bce.sum(dim=(1, 2)) / count.clamp(min=1)


def _drawn_dropout(
    h: torch.Tensor, p: float, spans: Sequence[tuple[int, int]], streams: Sequence[torch.Generator]
) -> torch.Tensor:
    """A fresh dropout mask for hidden activations ``h`` ``(M, rows, width)``: 1 (uint8) where an
    entry is kept; models ``lo:hi`` of each span draw from its stream. One 16-bit lane of a random
    64-bit word per entry (0.8 ns an entry against 6.5 ns for ``bernoulli_`` on this project's
    CPU): an entry is dropped with probability ``round(p * 2**16) / 2**16``, within 2**-17 of
    ``p``."""
    lanes = h[0].numel()
    words = torch.empty(len(h), -(-lanes // 4), dtype=torch.int64, device=h.device)
    for (lo, hi), stream in zip(spans, streams, strict=True):
        words[lo:hi].random_(-(2**63), 2**63 - 1, generator=stream)
    kept = words.view(torch.int16)[:, :lanes].reshape(h.shape) >= round(p * 2**16) - 2**15
    return kept.view(torch.uint8)


def _dropout(h: torch.Tensor, kept: torch.Tensor, p: float) -> torch.Tensor:
    """``h`` with the entries of a 0/1 ``kept`` mask (uint8: a product with a bool mask converts
    it first, 3x slower) scaled by ``1 / (1 - p)`` and the others zeroed, as ``nn.Dropout``
    computes it (one rounding: ``h * 1`` is exact)."""
    return (h * kept).mul_(1 / (1 - p))


def _layer_keys(hidden: Sequence[int]) -> list[tuple[str, str]]:
    """Array keys of :class:`~reportfed.text.model.ReportMLP`'s linear layers (Linear, ReLU, Dropout
    per hidden layer, then the head)."""
    keys = [(f"{3 * i}.weight", f"{3 * i}.bias") for i in range(len(hidden))]
    return [*keys, ("weight", "bias")]


def _check_configs(configs: Sequence[FederationConfig]) -> FederationConfig:
    first = configs[0]
    for c in configs[1:]:
        for name in (f.name for f in fields(FederationConfig) if f.name not in _PER_FEDERATION):
            if getattr(c, name) != getattr(first, name):
                raise ValueError(f"lockstep federations must agree on {name}")
    return first


def run_federations(
    federations: Sequence[Sequence[Node]],
    configs: Sequence[FederationConfig],
    *,
    mode: Mode = "surgical",
    chunk: int = 8,
    compute: Compute = Compute(),
) -> list[LockstepResult]:
    """Train ``federations`` (each a list of nodes, with its config) in lockstep.

    Configs may differ in seed, learning rates and server options; every other field must agree.
    ``chunk`` bounds how many nodes train per batched step (whole federations are kept
    together): small enough that the stacked weights and Adam state stay in cache, and smaller
    where that leaves a worker idle (four K=2 federations make two chunks for two workers).
    ``compute`` says how (:class:`Compute`).
    """
    if len(federations) != len(configs) or not federations:
        raise ValueError("give one config per federation, and at least one federation")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    _check_configs(configs)
    device = compute.torch_device()
    dims = {n.x.shape[1:] for nodes in federations for n in nodes}
    ndims = {n.x.ndim for nodes in federations for n in nodes}
    if len({d[-1] for d in dims}) != 1 or len(ndims) != 1 or any(not n for n in federations):
        raise ValueError(
            f"every federation needs nodes of one embedding dimension and granularity, got {dims}"
        )
    workers = compute.worker_count(device)
    chunk = max(1, min(chunk, -(-sum(map(len, federations)) // workers)))
    spans, start = [], 0
    while start < len(federations):
        stop, size = start, 0
        while stop < len(federations) and (stop == start or size + len(federations[stop]) <= chunk):
            size += len(federations[stop])
            stop += 1
        spans.append((start, stop))
        start = stop

    def train(span: tuple[int, int]) -> list[LockstepResult]:
        lo, hi = span
        return _Lockstep(federations[lo:hi], configs[lo:hi], mode, compute, device).run()

    with torch_threads(1), ThreadPoolExecutor(min(workers, len(spans))) as pool:
        return [result for results in pool.map(train, spans) for result in results]


class _Lockstep:
    """One chunk of federations trained together (see :func:`run_federations`)."""

    def __init__(
        self,
        federations: Sequence[Sequence[Node]],
        configs: Sequence[FederationConfig],
        mode: Mode,
        compute: Compute,
        device: torch.device,
    ) -> None:
        self.federations, self.configs, self.mode = federations, configs, mode
        self.config, self.compute, self.device = configs[0], compute, device
        self.members = [
            (f, i, n) for f, nodes in enumerate(federations) for i, n in enumerate(nodes)
        ]
        #: each federation's members: a contiguous range of stack indices
        self.spans = list(pairwise(np.cumsum([0] + [len(nodes) for nodes in federations])))
        dim = federations[0][0].x.shape[-1]
        self.servers = [
            SurgicalServer(initial_state(dim, LabelSpace.union(n.labels for n in nodes), c), c)
            for nodes, c in zip(federations, configs, strict=True)
        ]
        # the labels of each node's head: its own, or every label of its federation (distill)
        self.heads = [
            self.servers[f].state.labels if self.config.distill > 0 else n.labels
            for f, _, n in self.members
        ]
        width = max(len(h) for h in self.heads)
        sizes = [*self.config.hidden, width]
        ins = [dim, *self.config.hidden]
        m = len(self.members)
        zeros = partial(torch.zeros, device=device)
        self.stack = _Stack(
            weights=[zeros(m, i, o) for o, i in zip(sizes, ins, strict=True)],
            biases=[zeros(m, o) for o in sizes],
            keys=_layer_keys(self.config.hidden),
            skip=zeros(m, dim, width) if self.config.skip else None,
        )
        for f in range(len(federations)):
            self._load(f)
        # Adam's moments, and with bf16 what the products read (bf16 copies of the weights) and
        # the float32 gradients Adam reads: allocated once, reset every round
        params = self.stack.params()
        self.exp_avg = [torch.zeros_like(p) for p in params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in params]
        self.used = [p.to(torch.bfloat16) for p in params] if compute.bf16 else params
        self.float32_grads = [torch.empty_like(p) for p in params] if compute.bf16 else []
        # every node's rows, then the padding row (no annotated label, zeros): report vectors
        # in one table, or sentence bags as their sentences' table (``bags``)
        xs = [n.x for _, _, n in self.members]
        self.bags: _Bags | None = None
        if xs[0].ndim == 3:
            self.x, self.bags = _Bags.store(xs, device)
        else:
            x = np.concatenate([*xs, np.zeros((1, dim))]).astype(np.float32)
            self.x = torch.from_numpy(x).to(device)
        self.offsets = np.cumsum([0] + [len(x) for x in xs])
        y = np.full((self.offsets[-1] + 1, width), np.nan, dtype=np.float32)
        for k, (_, _, n) in enumerate(self.members):
            y[self.offsets[k] : self.offsets[k + 1], self.heads[k].indices(n.labels)] = n.y
            lacked = lacked_negatives(self.heads[k], n.labels)  # template rows: negatives
            y[self.offsets[k + 1] - n.templates : self.offsets[k + 1], lacked] = 0.0
        # per row and head column: the target (0 where there is none) and whether there is one
        annotated = ~np.isnan(y)
        self.target = torch.from_numpy(np.nan_to_num(y)).to(device)
        self.annotated = torch.from_numpy(annotated.astype(np.float32)).to(device)
        self.annotations = torch.from_numpy(annotated.sum(1)).to(device)  # per row
        # per node and head column: the weight of a positive (``balance``), 1 elsewhere
        self.pos_weight = None
        if self.config.balance:
            weights = [positive_weights(y[lo:hi]) for lo, hi in pairwise(self.offsets)]
            self.pos_weight = torch.tensor(np.stack(weights), device=device).unsqueeze(1)
        lrs = np.array([configs[f].node_lr.get(n.name, configs[f].lr) for f, _, n in self.members])
        self.lr_groups = [
            (float(lr), torch.from_numpy(np.flatnonzero(lrs == lr)).to(device))
            for lr in np.unique(lrs)
        ]
        self.group = torch.tensor([f for f, _, _ in self.members], device=device)

    def _members_of(self, f: int) -> list[tuple[int, Node]]:
        """(stack index, node) of federation ``f``'s nodes."""
        return [(k, n) for k, (g, _, n) in enumerate(self.members) if g == f]

    def _load(self, f: int, *, task: bool = True) -> None:
        """Write federation ``f``'s global model into its nodes: the shared block (one write for
        all of them) and, with ``task``, each node's head rows."""
        state = self.servers[f].state
        lo, hi = self.spans[f]
        self.stack.load_shared(slice(lo, hi), state.shared)
        for k in range(lo, hi) if task else ():
            rows = state.labels.indices(self.heads[k])
            self.stack.load_task(k, {key: v[rows] for key, v in state.task.items()})

    def _own(self, k: int, *, copy: bool = True) -> GlobalState:
        """Node ``k``'s weights over its own labels (what it sends to the server); task rows are
        always copies, shared arrays only with ``copy``."""
        view = self.stack.view(k, self.heads[k])
        rows = self.heads[k].indices(self.members[k][2].labels)
        task = {key: v[rows] for key, v in view.task.items()}
        shared = {key: v.copy() for key, v in view.shared.items()} if copy else view.shared
        return GlobalState(self.members[k][2].labels, shared, task)

    def _soft_targets(self) -> torch.Tensor | None:
        """With ``distill``: every node's predictions (eval mode) on its reports for the labels
        it does not annotate, NaN elsewhere; computed at the start of a round, as the loop does."""
        if self.config.distill <= 0:
            return None
        soft = torch.full_like(self.target, float("nan"))
        with torch.no_grad():
            for k, (_, _, node) in enumerate(self.members):
                lo, hi = int(self.offsets[k]), int(self.offsets[k]) + node.reports
                x, packing = self._rows(torch.arange(lo, hi, device=self.device).unsqueeze(0))
                h = x
                for w, b in zip(self.stack.weights[:-1], self.stack.biases[:-1], strict=True):
                    h = torch.relu(h @ w[k] + b[k])
                h = _pool(self.stack.logits(h, x, k), packing)[0]
                others = [j for j, name in enumerate(self.heads[k]) if name not in node.labels]
                soft[lo:hi, others] = torch.sigmoid(h[:, others])
        return soft

    # -- one round ---------------------------------------------------------------------------
    def _schedule(self, round_: int) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
        """Row indices ``(S, M, B)``, each node's number of steps, and with ``replay`` (report rows)
        the 0/1 dropout masks per hidden layer ``(S, M, B, h)``, all drawn exactly as
        :func:`~reportfed.text.train.train_local` draws them (one generator per node and round for
        the batch order, one for the dropout masks)."""
        c = self.config
        batches = [-(-len(n.x) // c.batch_size) * c.local_epochs for _, _, n in self.members]
        shape = (max(batches), len(self.members), c.batch_size)
        rows = torch.full(shape, int(self.offsets[-1]), dtype=torch.long)  # the padding row
        replay = self.compute.replay and self.bags is None and c.dropout > 0
        keep = [torch.zeros(*shape, h) for h in c.hidden] if replay else []
        for k, (f, i, node) in enumerate(self.members):
            seed = round_seed(self.configs[f].seed, round_, i)
            order_gen, mask_gen = torch.Generator(), torch.Generator()
            order_gen.manual_seed(seed), mask_gen.manual_seed(seed)
            step = 0
            for _ in range(c.local_epochs):
                order = torch.randperm(len(node.x), generator=order_gen) + int(self.offsets[k])
                for start in range(0, len(node.x), c.batch_size):
                    idx = order[start : start + c.batch_size]
                    rows[step, k, : len(idx)] = idx
                    for layer in keep:
                        layer[step, k, : len(idx)].bernoulli_(1 - c.dropout, generator=mask_gen)
                    step += 1
        to = partial(torch.Tensor.to, device=self.device)
        return (
            to(rows),
            [to(layer.to(torch.uint8)) for layer in keep],
            to(torch.tensor(batches)),
        )

    def _train_round(self, round_: int) -> list[float]:
        rows, keep, steps_t = self._schedule(round_)
        # drawn dropout: a stream per federation, apart from every node's loop stream (index -1)
        streams = [
            torch.Generator(self.device).manual_seed(round_seed(c.seed, round_, -1))
            for c in self.configs
        ]
        soft = self._soft_targets()
        fewest = int(steps_t.min())  # steps every node takes
        params = self.stack.params()
        anchor = [p.clone() for p in params] if self.config.prox > 0 else []
        torch._foreach_zero_([*self.exp_avg, *self.exp_avg_sq])
        used, dtype = self.used, self.used[0].dtype
        if self.compute.bf16:
            torch._foreach_copy_(used, params)
        net = self.stack.with_params(used)
        for u in used:
            u.requires_grad_(True)
        loss_sum = torch.zeros(len(self.members), device=self.device)
        tied = {2, 3} if self.mode == "split" else set()  # weight and bias of the second layer
        for s in range(rows.shape[0]):
            active = steps_t > s
            batch = rows[s]
            (x, packing), y = self._rows(batch, dtype), self.target[batch]
            h = x
            for layer in range(len(self.config.hidden)):
                w, b = net.weights[layer], net.biases[layer]
                h = torch.relu(torch.baddbmm(b.unsqueeze(1), h, w))
                if self.config.dropout > 0:
                    kept = (
                        keep[layer][s]
                        if keep
                        else _drawn_dropout(h, self.config.dropout, self.spans, streams)
                    )
                    h = _dropout(h, kept, self.config.dropout)
            logits = _pool(net.logits(h, x).float(), packing)
            count = self.annotations[batch].sum(1)
            loss = _mean_bce(logits, y, self.annotated[batch], count, self.pos_weight)
            if soft is not None:
                target = soft[batch]
                kept = ~torch.isnan(target)
                distilled = _mean_bce(
                    logits, torch.nan_to_num(target), kept.float(), kept.sum(dim=(1, 2))
                )
                loss = loss + self.config.distill * distilled
            # the fused Adam kernel below reads memory linearly: gradients must be contiguous
            # (they are, with weights stored (in, out); .contiguous() is then free)
            computed = torch.autograd.grad(loss.sum(), used)
            if self.compute.bf16:
                torch._foreach_copy_(self.float32_grads, computed)
                grads = self.float32_grads
            else:
                grads = [c.contiguous() for c in computed]
            with torch.no_grad():
                loss_sum += torch.where(active, loss, 0.0)
                stepping = None if s < fewest else [active] * len(params)
                if tied:
                    grads = [self._tie(g) if j in tied else g for j, g in enumerate(grads)]
                if tied and stepping is not None:
                    any_active = self._tie(active.float()) > 0
                    stepping = [any_active if j in tied else active for j in range(len(params))]
                for g, p, start in zip(grads, params, anchor, strict=False):
                    g.add_(p - start, alpha=self.config.prox)  # FedProx's proximal term
                self._adam(params, grads, s + 1, stepping)
                if self.compute.bf16:
                    torch._foreach_copy_(used, params)
        for u in used:
            u.requires_grad_(False)
        return (loss_sum / steps_t.clamp(min=1)).tolist()

    def _rows(
        self, batch: torch.Tensor, dtype: torch.dtype = torch.float32
    ) -> tuple[torch.Tensor, _Packing | None]:
        """What the MLPs score for rows ``batch`` ``(M, B)``, as ``dtype``: their report vectors,
        or the real sentences of their bags, packed (:meth:`_Bags.pack`)."""
        packing = None
        if self.bags is not None:
            batch, packing = self.bags.pack(batch)
        x = self.x.index_select(0, batch.flatten()).view(*batch.shape, self.x.shape[-1])
        return x.to(dtype), packing

    def _tie(self, g: torch.Tensor) -> torch.Tensor:
        """Sum ``g`` over the nodes of each federation and give every node the sum."""
        sums = g.new_zeros((len(self.federations), *g.shape[1:]))
        sums.index_add_(0, self.group, g)
        return sums[self.group]

    def _adam(
        self,
        params: list[torch.Tensor],
        grads: Sequence[torch.Tensor],
        step: int,
        stepping: list[torch.Tensor] | None,
    ) -> None:
        """One step of torch.optim.Adam (its fused kernel) for the nodes in ``stepping[j]`` (per
        parameter ``j``; ``None``: every node): on a stacked tensor when all its nodes step,
        else on per-node views."""
        count = torch.tensor(float(step), device=self.device)
        for lr, group in self.lr_groups:
            # (param, grad, first moment, second moment) of whole stacks or single nodes
            pieces: list[tuple[torch.Tensor, ...]] = []
            for j, p in enumerate(params):
                nodes = group if stepping is None else group[stepping[j][group]]
                tensors = (p, grads[j], self.exp_avg[j], self.exp_avg_sq[j])
                if len(nodes) == len(self.members):  # every node steps: the stacked tensors
                    pieces.append(tensors)
                else:
                    pieces += [tuple(t[k] for t in tensors) for k in nodes.tolist()]
            if pieces:
                ps, gs, ms, vs = (list(t) for t in zip(*pieces, strict=True))
                torch._fused_adam_(
                    ps,
                    gs,
                    ms,
                    vs,
                    [],
                    [count] * len(ps),
                    lr=lr,
                    beta1=_BETAS[0],
                    beta2=_BETAS[1],
                    weight_decay=self.config.weight_decay,
                    eps=_EPS,
                    amsgrad=False,
                    maximize=False,
                )

    # -- the server --------------------------------------------------------------------------
    def _server(self) -> None:
        if self.mode not in ("surgical", "local-heads"):
            return
        for f in range(len(self.federations)):
            members = self._members_of(f)
            updates = []
            for k, node in members:
                view = self._own(k, copy=False)  # the server reads it before the stack changes
                updates.append(
                    NodeUpdate(
                        node.name, node.labels, view.shared, view.task, num_examples=node.reports
                    )
                )
            self.servers[f].step(updates)
            self._load(f, task=self.mode == "surgical")

    def run(self) -> list[LockstepResult]:
        history: list[list[float]] = []
        surgical = self.mode == "surgical"
        states: list[list[GlobalState]] = [[] for _ in self.federations]
        for r in range(self.config.rounds):
            history.append(self._train_round(r))
            self._server()
            for f, server in enumerate(self.servers if surgical else ()):
                states[f].append(server.state)  # a step makes a new state: no copy needed
        out = []
        for f in range(len(self.federations)):
            members = self._members_of(f)
            out.append(
                LockstepResult(
                    state=self.servers[f].state if surgical else None,
                    nodes={n.name: self._own(k) for k, n in members},
                    loss=[{n.name: h[k] for k, n in members} for h in history],
                    rounds=states[f],
                )
            )
        return out
