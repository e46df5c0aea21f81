"""Many federations trained in lockstep: stacked node weights and batched matrix products.

:func:`run_federations` trains every node of several federations (the repeats of a sweep setting)
at once. One Python step draws a mini-batch for every node, runs all the node MLPs as batched
matrix products over stacked weights, and takes one Adam step per node. It replays the per-node
loop of :func:`reportfed.federation.engine.run_federation` step for step: the same batch orders
and dropout masks (same seeds, same draws), Adam's update rule, and the server step of
:func:`reportfed.aggregation.aggregate`. Both give the same models up to float rounding (tested).

What the server does is the ``mode`` (the baselines of :mod:`reportfed.federation.baselines`):

* ``surgical``: the aggregation core after every round (FedAvg when nodes share all labels);
* ``local-heads``: the core averages the representation block; every node keeps its own head;
* ``split``: the second hidden layer is a body held by the server, one per federation, updated
  every step with the sum of its nodes' gradients; input layer and head stay on the node;
* ``none``: every node trains alone.

Sentence bags (nodes whose ``x`` is ``(n, S, dim)``, see :mod:`reportfed.embed.granularity`)
train the same way, batched over the sentence axis: every sentence row goes through the stacked
MLPs and each label takes the largest logit over a report's sentences, as
:func:`reportfed.model.pool_sentences` does. Their dropout masks are drawn per step from a
seeded generator instead of replaying the loop's draws (those are one mask per real sentence in
the loop's batch order), so sentence runs equal the loop's exactly only without dropout (tested),
and statistically with it.

``FederationConfig.distill`` works as in the loop: each node's head then holds every label of its
federation, soft targets come from the node's weights at the start of the round, and only the
node's own rows go to the server. ``balance``, ``skip`` and ``weight_decay`` also work as in the
loop (positive weights counted per node, the head's input term stacked like the head), and so
do ``server_momentum`` (one velocity per federation) and ``prox``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from itertools import pairwise
from typing import Literal

import numpy as np
import torch
from torch.nn import functional

from reportfed.aggregation import GlobalState, NodeUpdate, node_arrays
from reportfed.config import FederationConfig
from reportfed.federation.engine import Node, initial_state
from reportfed.labels import LabelSpace
from reportfed.model import SKIP, sentence_mask
from reportfed.rounds import round_seed
from reportfed.server import ServerOptions, SurgicalServer
from reportfed.train import positive_weights

Mode = Literal["surgical", "local-heads", "split", "none"]
MODES: tuple[Mode, ...] = ("surgical", "local-heads", "split", "none")
_BETAS, _EPS = (0.9, 0.999), 1e-8  # torch.optim.Adam's defaults, which train_local uses
#: config fields that may differ between the federations of one lockstep run: each federation
#: has its own server, seed and learning rates. Every other field (a new one included) must agree.
_PER_FEDERATION = frozenset({"lr", "node_lr", "seed", *(f.name for f in fields(ServerOptions))})


@dataclass
class LockstepResult:
    """One federation's outcome: the server's global model (``None`` in ``split``/``none`` modes),
    every node's final weights over its own labels, and each round's mean training loss per node."""

    state: GlobalState | None
    nodes: dict[str, GlobalState]
    loss: list[dict[str, float]]


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

    def load(self, m: int, view: GlobalState, *, shared: bool = True, task: bool = True) -> None:
        """Write a node's view (shared block and/or its task rows) into model ``m``."""
        for layer, (wk, bk) in enumerate(self.keys):
            head = layer == len(self.keys) - 1
            source = view.task if head else view.shared
            if (head and task) or (not head and shared):
                w, b = np.asarray(source[wk]), np.asarray(source[bk])
                self.weights[layer][m, :, : len(w)] = torch.from_numpy(w.T)
                self.biases[layer][m, : len(b)] = torch.from_numpy(b)
        if task and self.skip is not None:
            s = np.asarray(view.task[SKIP])
            self.skip[m, :, : len(s)] = torch.from_numpy(s.T)

    def view(self, m: int, labels: LabelSpace) -> GlobalState:
        """Model ``m``'s weights as the core's arrays (copies)."""
        shared: dict[str, np.ndarray] = {}
        for (wk, bk), w, b in zip(self.keys[:-1], self.weights, self.biases, strict=False):
            shared[wk], shared[bk] = w[m].T.numpy().copy(), b[m].numpy().copy()
        wk, bk = self.keys[-1]
        n = len(labels)
        task = {
            wk: self.weights[-1][m, :, :n].T.numpy().copy(),
            bk: self.biases[-1][m, :n].numpy().copy(),
        }
        if self.skip is not None:
            task[SKIP] = self.skip[m, :, :n].T.numpy().copy()
        return GlobalState(labels=labels, shared=shared, task=task)

    def logits(self, m: int | slice, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Head outputs of models ``m`` from last hidden activations ``h`` and inputs ``x``
        (batched ``(M, B, .)`` for a slice, ``(B, .)`` for one model)."""
        w, b = self.weights[-1][m], self.biases[-1][m]
        if h.dim() == 3:
            out = torch.baddbmm(b.unsqueeze(1), h, w)
            return out if self.skip is None else torch.baddbmm(out, x, self.skip[m])
        out = h @ w + b
        return out if self.skip is None else out + x @ self.skip[m]


def _pad_bags(x: np.ndarray, width: int) -> np.ndarray:
    """Sentence bags ``(n, S, dim)`` zero-padded to ``width`` sentences; reports as they are."""
    if x.ndim == 2:
        return x
    return np.pad(x, ((0, 0), (0, width - x.shape[1]), (0, 0)))


def _flatten_bags(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sentence bags ``(..., B, S, dim)`` as sentence rows ``(..., B * S', dim)`` and their mask
    ``(..., B, S')``, ``S'`` the longest bag among them."""
    mask = sentence_mask(x)
    width = int(mask.any(dim=tuple(range(mask.dim() - 1))).nonzero().max()) + 1 if mask.any() else 1
    x, mask = x[..., :width, :], mask[..., :width]
    return x.reshape(*x.shape[:-3], -1, x.shape[-1]), mask


def _pool(logits: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Per bag and label, the largest logit over its sentences (0 for a bag without any, the
    padding row); report logits as they are."""
    if mask is None:
        return logits
    bags = logits.reshape(*mask.shape, logits.shape[-1])
    pooled = bags.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(dim=-2)
    return torch.where(mask.any(-1, keepdim=True), pooled, torch.zeros_like(pooled))


def _layer_keys(hidden: Sequence[int]) -> list[tuple[str, str]]:
    """Array keys of :class:`~reportfed.model.ReportMLP`'s linear layers (Linear, ReLU, Dropout
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
) -> list[LockstepResult]:
    """Train ``federations`` (each a list of nodes, with its config) in lockstep.

    Configs may differ in seed, learning rates, weighting and ``on_invalid``; rounds, epochs,
    batch size, architecture and ``distill`` must agree. ``chunk`` bounds how many nodes train per batched step
    (whole federations are kept together): small enough that the stacked weights and Adam state
    stay in cache.
    """
    if len(federations) != len(configs) or not federations:
        raise ValueError("give one config per federation, and at least one federation")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    _check_configs(configs)
    dims = {n.x.shape[1:] for nodes in federations for n in nodes}
    ndims = {n.x.ndim for nodes in federations for n in nodes}
    if len({d[-1] for d in dims}) != 1 or len(ndims) != 1 or any(not n for n in federations):
        raise ValueError(
            f"every federation needs nodes of one embedding dimension and granularity, got {dims}"
        )
    results: list[LockstepResult] = []
    start = 0
    while start < len(federations):
        stop, size = start, 0
        while stop < len(federations) and (stop == start or size + len(federations[stop]) <= chunk):
            size += len(federations[stop])
            stop += 1
        results += _Lockstep(federations[start:stop], configs[start:stop], mode).run()
        start = stop
    return results


class _Lockstep:
    """One chunk of federations trained together (see :func:`run_federations`)."""

    def __init__(
        self, federations: Sequence[Sequence[Node]], configs: Sequence[FederationConfig], mode: Mode
    ) -> None:
        self.federations, self.configs, self.mode = federations, configs, mode
        self.config = configs[0]
        self.members = [
            (f, i, n) for f, nodes in enumerate(federations) for i, n in enumerate(nodes)
        ]
        dim = federations[0][0].x.shape[-1]
        #: the longest sentence bag of any node (sentence mode), else 0
        self.bag = (
            max(n.x.shape[1] for nodes in federations for n in nodes)
            if federations[0][0].x.ndim == 3
            else 0
        )
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
        self.stack = _Stack(
            weights=[torch.zeros(m, i, o) for o, i in zip(sizes, ins, strict=True)],
            biases=[torch.zeros(m, o) for o in sizes],
            keys=_layer_keys(self.config.hidden),
            skip=torch.zeros(m, dim, width) if self.config.skip else None,
        )
        for k in range(m):
            self.stack.load(k, self._view(k))
        # every node's rows in one table (bags padded to the longest); the last row is the
        # padding row (no annotated label)
        shape = (self.bag, dim) if self.bag else (dim,)
        rows = [_pad_bags(n.x, self.bag) for _, _, n in self.members]
        self.x = torch.from_numpy(np.concatenate([*rows, np.zeros((1, *shape))]).astype(np.float32))
        y = np.full((len(self.x), width), np.nan, dtype=np.float32)
        self.offsets = np.cumsum([0] + [len(n.x) for _, _, n in self.members])
        for k, (_, _, n) in enumerate(self.members):
            y[self.offsets[k] : self.offsets[k + 1], self.heads[k].indices(n.labels)] = n.y
        self.y = torch.from_numpy(y)
        # per node and head column: the weight of a positive (``balance``), 1 elsewhere
        self.pos_weight = None
        if self.config.balance:
            self.pos_weight = torch.from_numpy(
                np.stack([positive_weights(y[lo:hi]) for lo, hi in pairwise(self.offsets)])
            ).unsqueeze(1)
        lrs = np.array([configs[f].node_lr.get(n.name, configs[f].lr) for f, _, n in self.members])
        self.lr_groups = [
            (float(lr), torch.from_numpy(np.flatnonzero(lrs == lr))) for lr in np.unique(lrs)
        ]
        self.group = torch.tensor([f for f, _, _ in self.members])

    def _members_of(self, f: int) -> list[tuple[int, Node]]:
        """(stack index, node) of federation ``f``'s nodes."""
        return [(k, n) for k, (g, _, n) in enumerate(self.members) if g == f]

    def _view(self, k: int) -> GlobalState:
        """What node ``k`` receives from its federation's global model: its head's rows."""
        shared, task = node_arrays(self.servers[self.members[k][0]].state, self.heads[k])
        return GlobalState(self.heads[k], shared, task)

    def _own(self, k: int) -> GlobalState:
        """Node ``k``'s weights over its own labels (what it sends to the server)."""
        view = self.stack.view(k, self.heads[k])
        rows = self.heads[k].indices(self.members[k][2].labels)
        task = {key: v[rows] for key, v in view.task.items()}
        return GlobalState(self.members[k][2].labels, view.shared, task)

    def _soft_targets(self) -> torch.Tensor | None:
        """With ``distill``: every node's predictions (eval mode) on its rows for the labels it
        does not annotate, NaN elsewhere; computed at the start of a round, as the loop does."""
        if self.config.distill <= 0:
            return None
        soft = torch.full_like(self.y, float("nan"))
        with torch.no_grad():
            for k, (_, _, node) in enumerate(self.members):
                lo, hi = int(self.offsets[k]), int(self.offsets[k + 1])
                x, mask = self._rows(self.x[lo:hi])
                h = x
                for w, b in zip(self.stack.weights[:-1], self.stack.biases[:-1], strict=True):
                    h = torch.relu(h @ w[k] + b[k])
                h = _pool(self.stack.logits(k, h, x), mask)
                others = [j for j, name in enumerate(self.heads[k]) if name not in node.labels]
                soft[lo:hi, others] = torch.sigmoid(h[:, others])
        return soft

    # -- one round ---------------------------------------------------------------------------
    def _schedule(self, round_: int) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
        """Row indices ``(S, M, B)``, dropout multipliers per hidden layer ``(S, M, B, h)`` and each
        node's number of steps, drawn exactly as :func:`~reportfed.train.train_local` draws them
        (one generator per node and round for the batch order, one for the dropout masks)."""
        c = self.config
        batches = [-(-len(n.x) // c.batch_size) * c.local_epochs for _, _, n in self.members]
        shape = (max(batches), len(self.members), c.batch_size)
        rows = torch.full(shape, len(self.x) - 1, dtype=torch.long)
        # the loop's dropout draws are replayed for report rows; sentence bags draw per step
        keep = [torch.zeros(*shape, h) for h in c.hidden] if not self.bag else []
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
                    for layer in keep if c.dropout > 0 else []:
                        layer[step, k, : len(idx)].bernoulli_(1 - c.dropout, generator=mask_gen)
                    step += 1
        for layer in keep:
            layer.div_(1 - c.dropout)
        return rows, keep, torch.tensor(batches)

    def _train_round(self, round_: int) -> list[float]:
        rows, keep, steps_t = self._schedule(round_)
        # sentence rows' dropout: one stream per round, apart from every node's (index -1)
        bag_dropout = torch.Generator().manual_seed(round_seed(self.configs[0].seed, round_, -1))
        soft = self._soft_targets()
        params = self.stack.params()
        for p in params:
            p.requires_grad_(True)
        anchor = [p.detach().clone() for p in params] if self.config.prox > 0 else []
        exp_avg = [torch.zeros_like(p) for p in params]
        exp_avg_sq = [torch.zeros_like(p) for p in params]
        loss_sum = torch.zeros(len(self.members))
        tied = {2, 3} if self.mode == "split" else set()  # weight and bias of the second layer
        for s in range(rows.shape[0]):
            active = steps_t > s
            batch = rows[s]
            (x, mask), y = self._rows(self.x[batch]), self.y[batch]
            h = x
            for layer in range(len(self.config.hidden)):
                w, b = self.stack.weights[layer], self.stack.biases[layer]
                h = torch.relu(torch.baddbmm(b.unsqueeze(1), h, w))
                if self.config.dropout > 0:
                    h = h * (keep[layer][s] if keep else self._bag_dropout(h, bag_dropout))
            logits = _pool(self.stack.logits(slice(None), h, x), mask)
            annotated = ~torch.isnan(y)
            bce = functional.binary_cross_entropy_with_logits(
                logits, torch.nan_to_num(y), pos_weight=self.pos_weight, reduction="none"
            )
            count = annotated.sum(dim=(1, 2)).clamp(min=1)
            loss = (bce * annotated).sum(dim=(1, 2)) / count
            if soft is not None:
                target = soft[batch]
                kept = ~torch.isnan(target)
                soft_bce = functional.binary_cross_entropy_with_logits(
                    logits, torch.nan_to_num(target), reduction="none"
                )
                distilled = (soft_bce * kept).sum(dim=(1, 2)) / kept.sum(dim=(1, 2)).clamp(min=1)
                loss = loss + self.config.distill * distilled
            # the fused Adam kernel below reads memory linearly: gradients must be contiguous
            # (they are, with weights stored (in, out); .contiguous() is then free)
            grads = [g.contiguous() for g in torch.autograd.grad(loss.sum(), params)]
            with torch.no_grad():
                loss_sum += torch.where(active, loss, 0.0)
                stepping = [active] * len(params)
                if tied:
                    grads = [self._tie(g) if j in tied else g for j, g in enumerate(grads)]
                    any_active = self._tie(active.float()) > 0
                    stepping = [any_active if j in tied else active for j in range(len(params))]
                for g, p, start in zip(grads, params, anchor, strict=False):
                    g.add_(p - start, alpha=self.config.prox)  # FedProx's proximal term
                self._adam(params, grads, (exp_avg, exp_avg_sq), s + 1, stepping)
        for p in params:
            p.requires_grad_(False)
        return (loss_sum / steps_t.clamp(min=1)).tolist()

    def _rows(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """What the MLPs score: report rows as they are, or the sentence rows of bags and their
        mask (:func:`_flatten_bags`)."""
        return _flatten_bags(x) if self.bag else (x, None)

    def _bag_dropout(self, h: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """A fresh dropout multiplier for hidden activations ``h`` of sentence rows."""
        p = self.config.dropout
        return torch.empty_like(h).bernoulli_(1 - p, generator=generator).div_(1 - p)

    def _tie(self, g: torch.Tensor) -> torch.Tensor:
        """Sum ``g`` over the nodes of each federation and give every node the sum."""
        sums = torch.zeros((len(self.federations), *g.shape[1:]), dtype=g.dtype)
        sums.index_add_(0, self.group, g)
        return sums[self.group]

    def _adam(
        self,
        params: list[torch.Tensor],
        grads: Sequence[torch.Tensor],
        state: tuple[list[torch.Tensor], list[torch.Tensor]],
        step: int,
        stepping: list[torch.Tensor],
    ) -> None:
        """One step of torch.optim.Adam (its fused CPU kernel) for the nodes in ``stepping[j]``
        (per parameter ``j``), on per-node views of the stacked tensors."""
        exp_avg, exp_avg_sq = state
        count = torch.tensor(float(step))
        for lr, group in self.lr_groups:
            ps: list[torch.Tensor] = []
            gs: list[torch.Tensor] = []
            ms: list[torch.Tensor] = []
            vs: list[torch.Tensor] = []
            for j, p in enumerate(params):
                for k in group[stepping[j][group]].tolist():
                    ps.append(p[k])
                    gs.append(grads[j][k])
                    ms.append(exp_avg[j][k])
                    vs.append(exp_avg_sq[j][k])
            if ps:
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
                view = self._own(k)
                updates.append(
                    NodeUpdate(
                        node.name, node.labels, view.shared, view.task, num_examples=len(node.x)
                    )
                )
            self.servers[f].step(updates)
            for k, _ in members:
                self.stack.load(k, self._view(k), task=self.mode == "surgical")

    def run(self) -> list[LockstepResult]:
        history: list[list[float]] = []
        for r in range(self.config.rounds):
            history.append(self._train_round(r))
            self._server()
        out = []
        for f in range(len(self.federations)):
            members = self._members_of(f)
            out.append(
                LockstepResult(
                    state=self.servers[f].state if self.mode == "surgical" else None,
                    nodes={n.name: self._own(k) for k, n in members},
                    loss=[{n.name: h[k] for k, n in members} for h in history],
                )
            )
        return out
