"""One way to build a site's node: the in-process labeler, a Flower node and an experiment run
build the same node from the same tables and seed (validation rows, report rows, template rows,
what is read), and the labelling thresholds and calibration come from one place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from experiments.baselines import METHODS, Scenario, method_nodes
from experiments.protocol import site_rows
from reportfed.core.config import FederationConfig, NodeSettings, RunSettings
from reportfed.core.labels import LabelSpace
from reportfed.data.table import read_table
from reportfed.reports.node import Node, with_read
from reportfed.reports.site import load_report_node
from reportfed.text.states import read_labels

#: sentence level with template rows and reading: every part of a node the builder makes
CONFIG = FederationConfig(rounds=1, hidden=(16,), seed=5, templates=True, read=True)
VAL_FRACTION = 0.2


def _trimmed(x: np.ndarray) -> np.ndarray:
    """Sentence bags without their trailing all-zero (padding) sentences."""
    width = int(((x != 0).any(-1)).sum(-1).max())
    assert not x[:, width:].any()
    return x[:, :width]


def _assert_same_node(a: Node, b: Node, template_atol: float = 1e-6) -> None:
    assert a.labels == b.labels and a.templates == b.templates and a.reports == b.reports
    np.testing.assert_array_equal(a.y, b.y)
    xa, xb = _trimmed(a.x), _trimmed(b.x)
    assert xa.shape == xb.shape
    np.testing.assert_allclose(xa[: a.reports], xb[: b.reports], atol=1e-6)
    np.testing.assert_allclose(xa[a.reports :], xb[b.reports :], atol=template_atol)


def test_the_labeler_a_flower_node_and_an_experiment_build_the_same_node(
    tables: dict[str, Path], embeddings_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = ("a", "b")  # a: Cardiomegaly, Pleural Effusion, Atelectasis; b: Cardiomegaly, ...
    read = [read_table(str(tables[n]), require_labels=True) for n in names]
    union = LabelSpace.union(t.label_space for t in read)

    # a Flower node, from its table alone
    flower = {
        n: load_report_node(
            NodeSettings(
                data=str(tables[n]), name=n, cache_dir=str(embeddings_cache), val_fraction=0.2
            ),
            CONFIG,
            RunSettings(granularity="sentence"),
        )
        for n in names
    }

    # the in-process labeler, on the same rows: the nodes it trains, as run_federation gets them
    from reportfed import labeler as labeler_module

    trained: list[Node] = []
    run = labeler_module.run_federation

    def spy(nodes: list[Node], *args: Any, **kwargs: Any) -> Any:
        trained.extend(nodes)
        return run(nodes, *args, **kwargs)

    monkeypatch.setattr(labeler_module, "run_federation", spy)
    texts = [s for t in read for s in t.texts]
    y = np.full((len(texts), len(union)), np.nan, dtype=np.float32)
    start = 0
    for t in read:
        y[start : start + len(t), union.indices(t.label_space)] = t.labels
        start += len(t)
    sites = [n for n, t in zip(names, read, strict=True) for _ in range(len(t))]
    labeler = labeler_module.ReportLabeler(
        config=CONFIG, val_fraction=VAL_FRACTION, cache_dir=embeddings_cache, progress=False
    )
    labeler.fit(texts, y, union, nodes=sites)
    in_process = {n.name: n for n in trained}

    # an experiment's run on a scenario of the same rows (the labeler's embeddings of them)
    x = labeler.embed(texts)
    site = np.repeat(np.arange(len(names)), [len(t) for t in read])
    spaces = [t.label_space for t in read]
    rows = site_rows(np.arange(len(texts)), site, spaces, VAL_FRACTION, CONFIG.seed)
    rows = [type(r)(n, r.fit, r.val, r.labels) for n, r in zip(names, rows, strict=True)]
    full = np.nan_to_num(y)  # an experiment's corpus is fully labelled; sites see their own
    scenario = Scenario(
        x=x,
        y=full,
        labels=union,
        sites=rows,
        test=np.arange(0),
        seed=CONFIG.seed,
        read=read_labels(texts, list(union)),
    )
    experiment = {n.name: n for n in method_nodes(scenario, METHODS["sentence"], CONFIG)}

    for k, name in enumerate(names):
        node = flower[name].node
        offset = sum(len(t) for t in read[:k])
        # the same validation rows: the Flower node's held-out labels are the labeler's
        np.testing.assert_array_equal(flower[name].val_y, read[k].labels[rows[k].val - offset])
        assert node.read.columns and set(node.read.columns) == set(in_process[name].read.columns)
        for label, column in node.read.columns.items():
            np.testing.assert_array_equal(column, in_process[name].read.columns[label])
        _assert_same_node(node, in_process[name])
        # each node learns the labels it lacks once it knows the federation's; the experiments'
        # lockstep engine knows them from the start, and embeds template rows in bf16
        _assert_same_node(with_read(node, union), experiment[name], template_atol=0.05)


def test_what_is_read_of_a_label_does_not_depend_on_the_labels_asked(
    tables: dict[str, Path],
) -> None:
    """A Flower node reads the findings it lacks, an experiment every finding of its corpus:
    each label's column is the same ("opacity or atelectasis" hedges atelectasis either way)."""
    texts = [s for path in tables.values() for s in read_table(str(path)).texts]
    labels = ["Lung Opacity", "Atelectasis", "Pneumonia", "Edema", "Consolidation"]
    every = read_labels(texts, labels)
    for c, name in enumerate(labels):
        np.testing.assert_array_equal(read_labels(texts, [name])[:, 0], every[:, c])


def test_a_flower_node_sends_a_threshold_for_each_label_it_reads(
    tables: dict[str, Path], embeddings_cache: Path
) -> None:
    """With reading, a Flower node's evaluation carries a threshold for each label of the
    federation it reads, best F1 on its training reports as read (it holds none of them out),
    and with every threshold the positives it rests on, which the server averages the nodes'
    thresholds by: the rule the in-process labeler follows (site_thresholds)."""
    from reportfed.core.metrics import f1_thresholds
    from reportfed.flower.node_service import evaluation_metrics
    from reportfed.reports.node import initial_state
    from reportfed.text.scoring import predict_state

    site = load_report_node(
        NodeSettings(data=str(tables["a"]), name="a", cache_dir=str(embeddings_cache)),
        CONFIG,
        RunSettings(granularity="sentence"),
    )
    node = site.node
    union = LabelSpace.union([node.labels, LabelSpace(("Edema", "Pneumonia"))])
    state = initial_state(site.dim, union, CONFIG)
    found = site.evaluate(state)
    own = [name for name in union if name in node.labels]
    assert found.labels == [*own, "Edema", "Pneumonia"]
    assert found.thresholds is not None and found.weights is not None
    reading = with_read(node, union)
    read_y = reading.y[: node.reports, reading.labels.indices(["Edema", "Pneumonia"])]
    read_p = predict_state(state, node.x[: node.reports])[:, union.indices(["Edema", "Pneumonia"])]
    np.testing.assert_array_equal(found.thresholds[len(own) :], f1_thresholds(read_y, read_p))
    np.testing.assert_array_equal(found.weights[len(own) :], (read_y == 1).sum(axis=0))
    assert np.isnan(found.y[:, len(own) :]).all() and (found.weights[len(own) :] > 0).all()
    _, metrics = evaluation_metrics(found)
    assert metrics["threshold-positives"] == [int(w) for w in found.weights]
    assert metrics["n"][len(own) :] == [0, 0]


def test_the_server_weighs_a_nodes_thresholds_by_their_positives() -> None:
    """A node's threshold weighs the positives it rests on: nothing for a label the node
    neither annotates nor reads; where it sent no positives (an image node), its held-out rows
    of a label it could judge (a finite AUROC); a claim of more positives than its rows is
    refused."""
    from reportfed.flower.registry import Member
    from reportfed.flower.strategy import _threshold_weights
    from reportfed.flower.wire import NodeEvaluation

    member = Member(1, "a", LabelSpace(("Edema",)), 0, rows=10, reads=LabelSpace(("Pneumonia",)))
    stats = np.array([[5, 0, 0], [0.9, np.nan, np.nan], [0.4, 0.3, 0.2], [2, 0, 0]], float)
    coef, fitted = np.zeros((0, 6)), np.zeros(0, bool)
    labels = ["Edema", "Pneumonia", "Fracture"]
    sent = NodeEvaluation(labels, stats, coef, fitted, np.array([3.0, 2.0, 4.0]))
    np.testing.assert_array_equal(_threshold_weights(sent, member), [3, 2, 0])
    older = NodeEvaluation(labels, stats, coef, fitted)
    np.testing.assert_array_equal(_threshold_weights(older, member), [5, 0, 0])
    claimed = NodeEvaluation(labels, stats, coef, fitted, np.array([16.0, 2.0, 0.0]))
    with pytest.raises(ValueError, match="beyond its rows"):
        _threshold_weights(claimed, member)
