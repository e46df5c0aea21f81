"""Baselines on one scenario: each method trains what it claims, evaluation covers every label."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from experiments.baselines import METHODS, run_method
from experiments.lockstep import Compute
from experiments.protocol import Protocol, scenario, simulate
from reportfed.core.config import PAPER
from reportfed.core.labels import LabelSpace
from reportfed.data.partition import dirichlet_rows

from .synthetic import synthetic

FAST = replace(PAPER, rounds=3, hidden=(32, 16), lr=3e-3)  #: the experiments train the paper's way


@pytest.fixture(scope="module")
def data():  # type: ignore[no-untyped-def]
    return synthetic(n=900)


def test_surgical_method_equals_the_labelers_simulation(data) -> None:  # type: ignore[no-untyped-def]
    x, y, space = data
    for k, method in ((3, "surgical"), (1, "central")):
        protocol = Protocol(n_nodes=k, federation=FAST)
        expected = simulate(x, y, space, protocol, seed=4).metrics
        sc = scenario(x, y, space, protocol, 4)
        (got,) = run_method([sc], METHODS[method], FAST, Compute(replay=True))
        # the experiments also judge the prevalence-matched thresholds, which simulate does not
        assert {k: got.metrics[k] for k in expected} == pytest.approx(expected, abs=1e-6)


def test_every_method_runs_and_evaluates_every_label(data) -> None:  # type: ignore[no-untyped-def]
    x, y, space = data
    bags = x[:, None, :]  # each report a bag of one sentence, for the sentence-level methods
    protocol = Protocol(n_nodes=3, federation=FAST)
    scenarios = [scenario(x, y, space, protocol, s, sentences=bags) for s in (0, 1)]
    results = {name: run_method(scenarios, m, FAST) for name, m in METHODS.items()}
    for name, outcomes in results.items():
        assert [o.seed for o in outcomes] == [0, 1]
        assert set(outcomes[0].per_label) == set(space), name
        assert 0.5 < outcomes[0].metrics["auroc"] <= 1.0, name
    # with no shared label, local heads are surgical aggregation (unique rows are never averaged);
    # only the prevalence-matched thresholds differ: a model per site matches over its own rows
    same = [m for m in results["surgical"][0].metrics if not m.startswith("matched")]
    assert {m: results["local-heads"][0].metrics[m] for m in same} == pytest.approx(
        {m: results["surgical"][0].metrics[m] for m in same}
    )
    # the fully labelled central baseline beats every federated method on this learnable task
    best = max(results[m][0].metrics["auroc"] for m in ("surgical", "fl-zero-fill", "local"))
    assert results["central"][0].metrics["auroc"] > best


def test_fedavg_baselines_coincide_with_surgical_when_all_labels_are_shared(data) -> None:  # type: ignore[no-untyped-def]
    x, y, space = data
    sc = [scenario(x, y, space, Protocol(n_nodes=2, n_shared=len(space), federation=FAST), 0)]
    surgical = run_method(sc, METHODS["surgical"], FAST)[0].metrics
    for name in ("fl-zero-fill", "fl-partial-loss"):
        assert run_method(sc, METHODS[name], FAST)[0].metrics == pytest.approx(surgical, abs=1e-6)


def test_zero_fill_sees_negatives_where_partial_loss_sees_nothing(data) -> None:  # type: ignore[no-untyped-def]
    from experiments.baselines import method_nodes

    x, y, space = data
    sc = scenario(x, y, space, Protocol(n_nodes=2, federation=FAST), 0)
    zero, partial = (
        method_nodes(sc, METHODS["fl-zero-fill"]),
        method_nodes(sc, METHODS["fl-partial-loss"]),
    )
    assert not np.isnan(zero[0].y).any() and np.isnan(partial[0].y).any()
    assert zero[0].labels == partial[0].labels == sc.union() and set(sc.union()) == set(space)
    observed = method_nodes(sc, METHODS["central"])
    assert len(observed) == 1 and not np.isnan(observed[0].y).any()
    masked = method_nodes(sc, replace(METHODS["central-masked"]))[0]
    assert np.isnan(masked.y).mean() == pytest.approx(0.5, abs=0.01)


def test_dirichlet_rows_skew_label_prevalence(data) -> None:  # type: ignore[no-untyped-def]
    _, y, _ = data
    rng = np.random.default_rng(0)
    parts = dirichlet_rows(y, 3, 0.1, rng)
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(y)))
    assert all(len(p) for p in parts)
    prevalence = np.array([y[p].mean(axis=0) for p in parts])
    iid = np.array([y[p].mean(axis=0) for p in np.array_split(rng.permutation(len(y)), 3)])
    assert prevalence.std(axis=0).mean() > 3 * iid.std(axis=0).mean()
    with pytest.raises(ValueError, match="alpha"):
        dirichlet_rows(y, 3, 0.0, rng)


def test_one_sentence_bags_train_like_whole_reports(data) -> None:  # type: ignore[no-untyped-def]
    """Without dropout (whose draws differ), a bag of one sentence is its report: the
    sentence-level method equals surgical aggregation."""
    x, y, space = data
    config = replace(FAST, dropout=0.0)
    sc = scenario(x, y, space, Protocol(n_nodes=2, federation=config), 0, sentences=x[:, None, :])
    (report,) = run_method([sc], METHODS["surgical"], config)
    (sentence,) = run_method([sc], METHODS["sentence"], config)
    assert sentence.metrics == pytest.approx(report.metrics, abs=1e-5)


def test_a_view_of_the_test_rows_is_judged_as_the_rows_themselves(data) -> None:  # type: ignore[no-untyped-def]
    """A scenario's views are its test rows embedded otherwise: the same embeddings give the
    scenario's own metrics, other embeddings other ones, at the same thresholds."""
    x, y, space = data
    # other vectors for the same rows: each row embedded as another (AUROC near chance)
    shuffled = x[np.random.default_rng(0).permutation(len(x))]
    sc = replace(
        scenario(x, y, space, Protocol(n_nodes=3, federation=FAST), 4),
        views={"same": x, "shuffled": shuffled},
    )
    (got,) = run_method([sc], METHODS["surgical"], FAST, Compute(replay=True))
    for metric in ("auroc", "leakfree_f1"):
        assert got.metrics[f"{metric}@same"] == pytest.approx(got.metrics[metric], abs=1e-12)
    assert got.metrics["auroc@shuffled"] != pytest.approx(got.metrics["auroc"], abs=1e-3)


def test_read_trains_the_labels_a_site_lacks_as_read(data) -> None:  # type: ignore[no-untyped-def]
    from experiments.baselines import method_nodes

    x, y, space = data
    sc = scenario(x, y, space, Protocol(n_nodes=2, federation=FAST), 0)
    read = np.where(np.random.default_rng(0).random(y.shape) < 0.1, np.nan, 1 - y)
    reading = replace(FAST, read=True)
    with pytest.raises(ValueError, match="no text-rule labels"):
        method_nodes(sc, METHODS["surgical"], reading)
    nodes = method_nodes(replace(sc, read=read.astype(np.float32)), METHODS["surgical"], reading)
    for node, site in zip(nodes, sc.sites, strict=True):
        lacked = [name for name in sc.union() if name not in site.labels]
        # its own labels first (in reportfed's order, as build_site orders a node's), as
        # annotated; then the others as read (hedges NaN)
        mine = LabelSpace.union([site.labels])
        assert node.labels.names == mine.names + tuple(lacked) and lacked
        own, other = sc.labels.indices(mine), sc.labels.indices(lacked)
        np.testing.assert_array_equal(node.y[:, : len(own)], y[np.ix_(site.fit, own)])
        np.testing.assert_array_equal(node.y[:, len(own) :], read[np.ix_(site.fit, other)])
        assert not node.read.columns


def test_read_thresholds_are_judged_where_the_scenario_has_a_reading(data) -> None:  # type: ignore[no-untyped-def]
    x, y, space = data
    sc = scenario(x, y, space, Protocol(n_nodes=3, federation=FAST), 1)
    (plain,) = run_method([sc], METHODS["surgical"], FAST)
    assert not {"read_rows_f1", "read_mean_f1"} & set(plain.metrics)
    # rules that read every report right: every row labelled, as the central model's
    # all-rows thresholds see it
    (read,) = run_method([replace(sc, read=y.astype(np.float32))], METHODS["surgical"], FAST)
    assert {"read_rows_f1", "read_mean_f1"} <= set(read.metrics)
    assert read.metrics["auroc"] == pytest.approx(plain.metrics["auroc"], abs=1e-12)
    assert read.metrics["read_rows_f1"] != pytest.approx(read.metrics["all_rows_f1"], abs=1e-6)
