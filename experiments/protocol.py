"""The papers' simulation protocol on one labelled corpus: split, partition, train, evaluate.

One call of :func:`simulate` is one repeat: an 80/20 train/test split, the training rows cut into
``n_nodes`` IID chunks, labels assigned with :func:`~reportfed.data.partition.split_labels`, and a
:class:`~reportfed.labeler.ReportLabeler` trained on them (each node holds out ``val_fraction`` of
its rows, with its own labels only, to choose the leak-free thresholds). ``n_nodes=1`` is the
central baseline (``rounds * local_epochs`` epochs in one optimiser run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from sklearn.base import clone

from experiments.baselines import Scenario, SiteRows
from reportfed.core.config import PAPER, FederationConfig, check_fraction
from reportfed.core.labels import LabelSpace
from reportfed.core.metrics import evaluate, f1_thresholds
from reportfed.data.partition import (
    TEST_FRACTION,
    dirichlet_rows,
    iid_rows,
    site_splits,
    split_labels,
    split_rows,
)
from reportfed.embed import DEFAULT_EMBEDDER
from reportfed.labeler import ReportLabeler


@dataclass(frozen=True)
class Protocol:
    """One simulated setting (the papers' defaults). ``rows="dirichlet"`` gives label-skewed
    sites (:func:`~reportfed.data.partition.dirichlet_rows` with ``alpha``) instead of IID ones."""

    n_nodes: int = 2
    n_shared: int = 0
    rows: Literal["iid", "dirichlet"] = "iid"
    alpha: float = 0.5
    test_fraction: float = TEST_FRACTION
    val_fraction: float = 0.1
    federation: FederationConfig = PAPER

    def __post_init__(self) -> None:
        """Refuse a protocol no repeat can run (before any embedding or training)."""
        for name in ("test_fraction", "val_fraction"):
            check_fraction(name, getattr(self, name))


@dataclass
class SimulationResult:
    """Metrics of one repeat and the labeler that produced them."""

    metrics: dict[str, float]
    labeler: ReportLabeler
    node_labels: list[LabelSpace]
    seed: int


def partition(
    y: np.ndarray, labels: LabelSpace, protocol: Protocol, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[LabelSpace]]:
    """Train rows, test rows, each train row's node index, and each node's labels."""
    train, test = split_rows(len(y), protocol.test_fraction, rng)
    site = np.empty(len(train), dtype=int)
    chunks = (
        iid_rows(len(train), protocol.n_nodes, rng)
        if protocol.rows == "iid"
        else dirichlet_rows(y[train], protocol.n_nodes, protocol.alpha, rng)
    )
    for k, chunk in enumerate(chunks):
        site[chunk] = k
    spaces = (
        split_labels(labels, protocol.n_nodes, protocol.n_shared, rng)
        if protocol.n_nodes > 1
        else [labels]
    )
    return train, test, site, spaces


def node_view_labels(
    y: np.ndarray, labels: LabelSpace, site: np.ndarray, spaces: list[LabelSpace]
) -> np.ndarray:
    """``y`` with NaN wherever a row's node does not annotate the label."""
    out = np.full(y.shape, np.nan, dtype=np.float32)
    for k, space in enumerate(spaces):
        rows, cols = np.flatnonzero(site == k), labels.indices(space)
        out[np.ix_(rows, cols)] = y[np.ix_(rows, cols)]
    return out


def simulate(
    x: np.ndarray,
    y: np.ndarray,
    labels: LabelSpace,
    protocol: Protocol,
    seed: int,
    *,
    labeler: ReportLabeler | None = None,
    fingerprint: str | None = "precomputed",
    texts: Sequence[str] | None = None,
    progress: bool = False,
) -> SimulationResult:
    """Run one repeat of ``protocol`` with ``seed`` on embeddings ``x`` and full labels ``y``.

    ``labeler`` (default: a new one) lends its embedder and settings to the labeler trained with
    the protocol's federation config and seed (``SimulationResult.labeler``; ``labeler`` itself is
    left unfitted);
    ``fingerprint`` names the embedder of ``x`` (``None``: the labeler's own embedder); ``x`` is
    ``(n, dim)`` (reports) or ``(n, S, dim)`` (sentence bags); ``texts``, the reports ``x``
    embeds, let the sites read the labels they lack (the config's ``read``) and calibrate with
    the mentions.
    """
    rng = np.random.default_rng(seed)
    train, test, site, spaces = partition(y, labels, protocol, rng)
    config = replace(protocol.federation, seed=seed)
    if protocol.n_nodes == 1:
        config = replace(config, rounds=1, local_epochs=config.rounds * config.local_epochs)
    labeler = clone(
        labeler
        or ReportLabeler(granularity="sentence" if x.ndim == 3 else "report", progress=progress)
    ).set_params(config=config, val_fraction=protocol.val_fraction)
    view = node_view_labels(y[train], labels, site, spaces)
    nodes = np.array([f"node{k}" for k in site])
    labeler.fit_embeddings(
        x[train],
        view,
        labels,
        nodes=list(nodes),
        fingerprint=fingerprint,
        texts=None if texts is None else [texts[i] for i in train],
    )
    cols = labels.indices(labeler.state_.labels)
    p_test = labeler.predict_scores_embeddings(x[test])
    thresholds = _validation_thresholds(labeler, x[train], view[:, cols], nodes, seed)
    metrics = evaluate(y[np.ix_(test, cols)], p_test, thresholds=thresholds)
    return SimulationResult(metrics=metrics, labeler=labeler, node_labels=spaces, seed=seed)


def _validation_thresholds(
    labeler: ReportLabeler, x: np.ndarray, y: np.ndarray, nodes: np.ndarray, seed: int
) -> np.ndarray | None:
    """The leak-free metrics' thresholds: best F1 on the validation rows ``labeler`` held out of
    the training rows ``x`` (labels ``y`` over its ``classes_``, NaN where a site does not
    annotate; each row's site in ``nodes``), each site's drawn as its fit drew them with ``seed``
    (:func:`~reportfed.data.partition.site_splits`); ``None`` without validation rows. The
    labeler's own thresholds take every annotated row, or where sites read each site's rows
    (:func:`~reportfed.text.calibration.labelling_thresholds`), rules the experiments judge
    beside this one (``all_rows_f1``, ``read_mean_f1``)."""
    splits = site_splits(nodes, labeler.val_fraction, seed).values()
    val = np.concatenate([held for _, held in splits])
    if not len(val):
        return None
    return f1_thresholds(y[val], labeler.predict_scores_embeddings(x[val]))


def site_rows(
    train: np.ndarray, site: np.ndarray, spaces: list[LabelSpace], val_fraction: float, seed: int
) -> list[SiteRows]:
    """Each site's training and validation rows (``val_fraction`` of its ``train`` rows held
    out, as the product holds them out with ``seed``:
    :func:`~reportfed.data.partition.site_splits`) and its labels: ``site`` gives each
    training row's site index, ``spaces`` each site's labels."""
    names = np.array([f"node{k}" for k in site])
    return [
        SiteRows(name, train[kept], train[held], spaces[int(name[4:])])
        for name, (kept, held) in site_splits(names, val_fraction, seed).items()
    ]


def scenario(
    x: np.ndarray,
    y: np.ndarray,
    labels: LabelSpace,
    protocol: Protocol,
    seed: int,
    *,
    sentences: np.ndarray | None = None,
    embedder: str = DEFAULT_EMBEDDER,
) -> Scenario:
    """One repeat of ``protocol`` as sites and test rows, split exactly as :func:`simulate` splits
    it (same partition, same validation rows), for :func:`~experiments.baselines.run_method`;
    ``sentences``: the same rows as sentence bags, for sentence-level methods; ``embedder``: the
    spec that embedded them."""
    train, test, site, spaces = partition(y, labels, protocol, np.random.default_rng(seed))
    return Scenario(
        x=x,
        y=y,
        labels=labels,
        sites=site_rows(train, site, spaces, protocol.val_fraction, seed),
        test=test,
        seed=seed,
        sentences=sentences,
        embedder=embedder,
    )
