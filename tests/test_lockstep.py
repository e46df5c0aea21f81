"""The lockstep engine replays the per-node loop (``Compute(replay=True)``) and, drawing its own
dropout masks or in bfloat16, learns like it; its modes do what the baselines need."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from experiments.lockstep import (
    Compute,
    _Bags,
    _drawn_dropout,
    _dropout,
    _pool,
    run_federations,
)
from reportfed.core.aggregation import node_arrays
from reportfed.core.config import PAPER
from reportfed.core.labels import LabelSpace
from reportfed.core.rounds import round_seed
from reportfed.nn.arrays import load_arrays, to_arrays
from reportfed.reports.engine import run_federation
from reportfed.reports.node import Node, initial_state
from reportfed.text.model import SKIP, ReportMLP
from reportfed.text.train import train_local

from .synthetic import synthetic

#: the paper's method (options beyond it are tested one by one against it), small and fast
CONFIG = replace(PAPER, rounds=3, local_epochs=2, hidden=(32, 16), batch_size=8)
REPLAY = Compute(replay=True)


def federation(seed: int, sizes: tuple[int, ...] = (101, 70, 33), shared: int = 0) -> list[Node]:
    """Nodes of unequal size (so they run out of batches at different steps), with NaNs."""
    x, y, space = synthetic(n=sum(sizes), dim=12, seed=seed)
    rng = np.random.default_rng(seed)
    y[rng.random(y.shape) < 0.1] = np.nan
    nodes, start = [], 0
    for i, n in enumerate(sizes):
        own = list(space)[:shared] + list(space)[shared + i :: len(sizes)]
        cols = space.indices(own)
        rows = slice(start, start + n)
        nodes.append(Node(f"n{i}", x[rows], y[rows][:, cols], LabelSpace(tuple(own))))
        start += n
    return nodes


def assert_close(a: dict[str, np.ndarray], b: dict[str, np.ndarray], tol: float = 1e-5) -> None:
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], atol=tol, rtol=0)


def test_lockstep_equals_the_per_node_loop() -> None:
    feds = [federation(s) for s in range(3)]
    configs = [replace(CONFIG, seed=s) for s in range(3)]
    configs[1] = replace(configs[1], node_lr={"n2": 3e-3})  # a per-node learning rate
    results = run_federations(feds, configs, chunk=4, compute=REPLAY)  # chunks: 3 nodes, then 6
    for nodes, config, result in zip(feds, configs, results, strict=True):
        loop = run_federation(nodes, config, progress=False)
        assert result.state is not None and result.state.labels == loop.state.labels
        assert_close(result.state.shared, loop.state.shared)
        assert_close(result.state.task, loop.state.task)
        for entry, losses in zip(loop.history, result.loss, strict=True):
            assert losses == pytest.approx(entry["loss"], abs=1e-6)


@pytest.mark.parametrize(
    "options",
    [
        {"distill": 0.5},
        {"skip": True},
        {"balance": True},
        {"weight_decay": 1e-2},
        {"server_momentum": 0.9},
        {"prox": 0.5},
        {"distill": 0.5, "skip": True, "balance": True, "server_momentum": 0.5},
    ],
)
def test_lockstep_equals_the_loop_with_options_beyond_the_paper(options: dict) -> None:
    config = replace(CONFIG, **options)
    nodes = federation(2)
    result = run_federations([nodes], [config], compute=REPLAY)[0]
    loop = run_federation(nodes, config, progress=False)
    assert result.state is not None
    assert_close(result.state.shared, loop.state.shared)
    assert_close(result.state.task, loop.state.task)
    plain = run_federation(nodes, CONFIG, progress=False)  # and the option does change training
    assert np.abs(plain.state.shared["0.weight"] - loop.state.shared["0.weight"]).max() > 1e-3
    if config.skip:  # the head's input term is trained and merged label by label
        assert loop.state.task[SKIP].shape == (len(loop.state.labels), nodes[0].x.shape[1])
        assert np.abs(loop.state.task[SKIP]).min(axis=1).max() > 0


def test_lockstep_equals_the_loop_on_template_rows_under_distill() -> None:
    """A node's last ``templates`` rows are template sentences: under distill they are negatives
    for the labels the node lacks, not soft targets, in both engines."""
    config = replace(CONFIG, distill=0.5, balance=True)
    nodes = [replace(n, templates=12) for n in federation(1)]
    result = run_federations([nodes], [config], compute=REPLAY)[0]
    loop = run_federation(nodes, config, progress=False)
    assert result.state is not None
    assert_close(result.state.shared, loop.state.shared)
    assert_close(result.state.task, loop.state.task)
    as_reports = run_federation(federation(1), config, progress=False)
    assert np.abs(as_reports.state.shared["0.weight"] - loop.state.shared["0.weight"]).max() > 1e-3


def test_local_heads_equal_surgical_aggregation_when_no_label_is_shared() -> None:
    nodes = federation(0)
    surgical = run_federations([nodes], [CONFIG])[0]
    heads = run_federations([nodes], [CONFIG], mode="local-heads")[0]
    for n in nodes:
        assert_close(heads.nodes[n.name].task, surgical.nodes[n.name].task, tol=0)
    # with shared labels the two differ: surgical averages the shared rows, local heads do not
    shared = federation(0, shared=2)
    a = run_federations([shared], [CONFIG])[0].nodes["n0"].task["weight"]
    b = run_federations([shared], [CONFIG], mode="local-heads")[0].nodes["n0"].task["weight"]
    assert np.abs(a - b).max() > 1e-3


def test_mode_none_trains_each_node_alone() -> None:
    nodes = federation(1)
    config = replace(CONFIG, rounds=1)
    result = run_federations([nodes], [config], mode="none", compute=REPLAY)[0]
    start = initial_state(12, LabelSpace.union(n.labels for n in nodes), config)
    assert result.state is None
    for i, node in enumerate(nodes):
        model = ReportMLP(node.x.shape[1], len(node.labels), config.hidden, config.dropout)
        load_arrays(model, *node_arrays(start, node.labels))
        train_local(
            model,
            torch.from_numpy(node.x),
            torch.from_numpy(node.y),
            epochs=config.local_epochs,
            lr=config.lr,
            batch_size=config.batch_size,
            seed=round_seed(config.seed, 0, i),
        )
        shared, task = to_arrays(model)
        assert_close(result.nodes[node.name].shared, shared)
        assert_close(result.nodes[node.name].task, task)


def test_split_mode_keeps_one_body_per_federation() -> None:
    feds = [federation(0), federation(1)]
    result = run_federations(feds, [CONFIG, replace(CONFIG, seed=1)], mode="split")
    for fed in result:
        bodies = [fed.nodes[n].shared["3.weight"] for n in fed.nodes]
        inputs = [fed.nodes[n].shared["0.weight"] for n in fed.nodes]
        assert all(np.array_equal(bodies[0], b) for b in bodies)  # the server's body
        assert not np.allclose(inputs[0], inputs[1])  # the sites' own input layers
    assert not np.allclose(
        result[0].nodes["n0"].shared["3.weight"], result[1].nodes["n0"].shared["3.weight"]
    )


@pytest.mark.parametrize("compute", [Compute(), REPLAY])
def test_federations_may_differ_in_seed_learning_rate_and_server_rules(compute: Compute) -> None:
    """A federation trained beside another equals the same federation trained alone."""
    nodes = federation(0)
    other = replace(CONFIG, seed=5, lr=3e-3, server_momentum=0.5, weighting="uniform")
    results = run_federations([nodes, nodes], [CONFIG, other], compute=compute)
    alone = run_federations([nodes], [other], compute=compute)
    assert_close(results[1].state.shared, alone[0].state.shared)


def test_lockstep_rejects_federations_it_cannot_batch() -> None:
    nodes = federation(0)
    with pytest.raises(ValueError, match="agree on rounds"):
        run_federations([nodes, nodes], [CONFIG, replace(CONFIG, rounds=4)])
    with pytest.raises(ValueError, match="agree on hidden"):
        run_federations([nodes, nodes], [CONFIG, replace(CONFIG, hidden=(8,))])
    with pytest.raises(ValueError, match="mode"):
        run_federations([nodes], [CONFIG], mode="fedprox")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one config per federation"):
        run_federations([nodes], [])


def bags(nodes: list[Node], seed: int) -> list[Node]:
    """The same nodes with each report as a bag of 1-4 sentence vectors (zero-padded to 4):
    its own vector plus noise sentences."""
    rng = np.random.default_rng(seed)
    out = []
    for node in nodes:
        x = np.zeros((len(node.x), 4, node.x.shape[1]), dtype=np.float32)
        x[:, 0] = node.x
        lengths = rng.integers(1, 5, size=len(node.x))
        for j in range(1, 4):
            noise = rng.normal(scale=0.5, size=node.x.shape).astype(np.float32)
            x[lengths > j, j] = noise[lengths > j]
        out.append(Node(node.name, x, node.y, node.labels))
    return out


@pytest.mark.parametrize(
    ("options", "tol"),
    [
        # max pooling passes each gradient to one sentence: rounding drifts a little further
        ({}, 1e-4),
        ({"skip": True, "balance": True}, 1e-4),
        # distillation's term has no gradient but rounding at the start of a round (the soft
        # targets are the node's own predictions), and Adam's first steps turn a rounding-sized
        # gradient into a step of up to lr (1e-3): engines that round differently (another
        # CPU's kernels) differ by up to 6.3e-4 in a few weights; training without
        # distillation differs from it by 4.7e-3
        ({"distill": 0.5, "skip": True, "balance": True}, 2e-3),
    ],
)
def test_lockstep_equals_the_loop_on_sentence_bags_without_dropout(
    options: dict, tol: float
) -> None:
    config = replace(CONFIG, dropout=0.0, **options)
    feds = [bags(federation(s), s) for s in range(2)]
    configs = [replace(config, seed=s) for s in range(2)]
    for nodes, c, result in zip(feds, configs, run_federations(feds, configs), strict=True):
        loop = run_federation(nodes, c, progress=False)
        assert result.state is not None
        assert_close(result.state.shared, loop.state.shared, tol=tol)
        assert_close(result.state.task, loop.state.task, tol=tol)


def test_sentence_bags_are_packed_to_their_real_sentences_and_pooled_per_bag() -> None:
    x = np.zeros((2, 3, 4, 5), np.float32)  # 2 models x 3 bags x up to 4 sentences x dim 5
    x[0, 0, :2], x[0, 2, 0], x[1, 1, :4] = 1.0, 2.0, 3.0
    x[1, 1, 2] = -1.0  # a bag's sentences need not share a score
    table, bags = _Bags.store([x[0], x[1]], torch.device("cpu"))
    assert table.shape == (8, 5) and not table[-1].any()  # 7 sentences, then the zero row
    rows, packing = bags.pack(torch.tensor([[0, 1, 2], [3, 4, 5]]))  # 6: the empty padding bag
    assert rows.shape == (2, 4)  # model 1 has 4 sentences: not 3 x 4 rows
    pooled = _pool(table[rows].sum(-1, keepdim=True), packing)  # a sentence's score: its sum
    expected = torch.tensor([[5.0, 0.0, 10.0], [0.0, 15.0, 0.0]]).unsqueeze(-1)
    assert torch.equal(pooled, expected)  # bags without a sentence pool to 0
    rows, packing = bags.pack(torch.tensor([[3, 4, 5, 6]]))  # one model, as soft targets pack
    assert rows.shape == (1, 4)
    assert torch.equal(_pool(table[rows].sum(-1, keepdim=True), packing)[0, :3], expected[1])


@pytest.mark.parametrize(
    ("granularity", "compute"),
    [("sentence", Compute()), ("report", Compute()), ("report", Compute(bf16=True))],
)
def test_lockstep_without_replay_learns_like_the_loop(granularity: str, compute: Compute) -> None:
    """Drawn dropout masks (sentence bags always draw them) and bfloat16 products: not the loop's
    numbers, the same learning."""
    from reportfed.core.metrics import auroc
    from reportfed.text.scoring import predict_state

    x, y, space = synthetic(n=1000, dim=12, seed=0)
    rows = [slice(0, 300), slice(300, 600), slice(600, 1000)]
    nodes = [Node(f"n{i}", x[r], y[r], space) for i, r in enumerate(rows)]
    *nodes, test = bags(nodes, 0) if granularity == "sentence" else nodes
    config = replace(CONFIG, rounds=5)
    lock = run_federations([nodes], [config], compute=compute)[0].state
    loop = run_federation(nodes, config, progress=False).state
    assert lock is not None and lock.labels == loop.labels
    assert np.abs(lock.shared["0.weight"] - loop.shared["0.weight"]).max() > 1e-3
    truth = test.y[:, space.indices(lock.labels)]
    a = np.nanmean(auroc(truth, predict_state(lock, test.x)))
    b = np.nanmean(auroc(truth, predict_state(loop, test.x)))
    assert a > 0.7 and abs(a - b) < 0.03, (a, b)  # chance is 0.5


def test_drawn_dropout_drops_p_and_each_federation_draws_from_its_own_stream() -> None:
    def streams(*seeds: int) -> list[torch.Generator]:
        return [torch.Generator().manual_seed(s) for s in seeds]

    h = torch.ones(3, 200, 100)
    kept = _drawn_dropout(h, 0.2, [(0, 2), (2, 3)], streams(1, 2))
    assert set(kept.unique().tolist()) == {0, 1}
    assert abs(float((kept == 0).float().mean()) - 0.2) < 0.01  # 60,000 draws: SD 0.0016
    assert not torch.equal(kept[0], kept[1])
    alone = _drawn_dropout(h[2:], 0.2, [(0, 1)], streams(2))
    assert torch.equal(kept[2:], alone)
    assert set(_dropout(h, kept, 0.2).unique().tolist()) == {0.0, 1.25}


def test_results_do_not_depend_on_how_many_workers_train_chunks() -> None:
    feds = [federation(s) for s in range(3)]
    configs = [replace(CONFIG, seed=s) for s in range(3)]
    one = run_federations(feds, configs, chunk=3, compute=Compute(workers=1))
    two = run_federations(feds, configs, chunk=3, compute=Compute(workers=3))
    for a, b in zip(one, two, strict=True):
        assert a.state is not None and b.state is not None
        assert_close(a.state.shared, b.state.shared, tol=0)
        assert_close(a.state.task, b.state.task, tol=0)


def test_compute_options_are_checked() -> None:
    nodes = federation(0)
    for device, error in [("gpu0", "unknown device"), ("meta", "'cpu' or 'cuda'")]:
        with pytest.raises(ValueError, match=error):
            run_federations([nodes], [CONFIG], compute=Compute(device=device))
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            run_federations([nodes], [CONFIG], compute=Compute(device="cuda"))
    with pytest.raises(ValueError, match="workers must be >= 1"):
        run_federations([nodes], [CONFIG], compute=Compute(workers=0))
