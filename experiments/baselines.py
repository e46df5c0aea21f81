"""Surgical aggregation and the baselines it is compared with, on the same sites and splits.

A :class:`Scenario` is one repeat's data: every site's training and validation rows, the labels
each site annotates, and the test rows. A :class:`Method` says how the sites train (which labels
a node's head has, what a label the site does not annotate means in its loss, what the server
does); :func:`run_method` trains one method on many scenarios in lockstep
(:func:`~experiments.lockstep.run_federations`) and evaluates it on the test rows.

Methods with a global model (surgical aggregation, FedAvg variants, central) are evaluated on
every label; methods without one (local heads, split learning, site-alone models) are evaluated
per site on the site's own labels, a label's metric averaged over the sites that have it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal

import numpy as np

from experiments.lockstep import Compute, Mode, run_federations
from reportfed.core.aggregation import GlobalState
from reportfed.core.config import PAPER, FederationConfig, Granularity
from reportfed.core.labels import LabelSpace
from reportfed.core.metrics import (
    auroc,
    f1_thresholds,
    label_metrics,
    matched_thresholds,
    site_thresholds,
)
from reportfed.core.paths import embeddings_cache_dir
from reportfed.embed import DEFAULT_EMBEDDER, shared_embedder
from reportfed.embed.granularity import embed_reports
from reportfed.reports.engine import round_traffic
from reportfed.reports.node import Node, Reading, reading_of, with_read
from reportfed.reports.site import build_site
from reportfed.text.assertion import FINDINGS
from reportfed.text.scoring import predict_state

#: how the sweeps compute vectors, whatever this machine's default: the stored runs' way, so that
#: a resumed sweep and a new arm pair with the stored runs on the same vectors
SWEEP_NUMERICS = {"backend": "torch", "precision": "bf16"}


@dataclass(frozen=True)
class SiteRows:
    """One site of a repeat: training and validation rows, the labels it annotates and, where they
    differ from the scenario's, the site's own embeddings (section shift) or labels (another
    labeller) of every row."""

    name: str
    fit: np.ndarray
    val: np.ndarray
    labels: LabelSpace
    x: np.ndarray | None = None
    y: np.ndarray | None = None


@dataclass(frozen=True)
class Scenario:
    """One repeat: embeddings ``x`` and full labels ``y`` of every row over ``labels``, the sites,
    the test rows, and the seed that made them; ``sentences``, where given, holds the same rows
    as sentence bags ``(n, S, dim)`` for methods of sentence granularity; ``embedder``: the spec
    that made the embeddings (it embeds the template rows); ``views``: the same rows embedded
    otherwise (every row, by name; e.g. written in another hospital's style), on whose test rows
    the models are judged too (metrics ``<metric>@<view>``, :data:`VIEW_METRICS`); ``read``,
    where given, what the product's text rules read in each row's report over ``labels``
    (:func:`reportfed.text.states.read_labels`), which sites train for the labels they do not
    annotate where the config's ``read`` says so."""

    x: np.ndarray
    y: np.ndarray
    labels: LabelSpace
    sites: list[SiteRows]
    test: np.ndarray
    seed: int
    sentences: np.ndarray | None = None
    embedder: str = DEFAULT_EMBEDDER
    views: Mapping[str, np.ndarray] = field(default_factory=dict)
    read: np.ndarray | None = None

    def at(self, granularity: Granularity) -> Scenario:
        """This repeat with the embeddings of ``granularity`` as ``x`` (a scenario built of
        sentence bags is at sentence level already)."""
        if granularity == "report" or self.x.ndim == 3:
            return self
        if self.sentences is None or any(s.x is not None for s in self.sites):
            raise ValueError("this scenario has no sentence bags for its rows")
        return replace(self, x=self.sentences)

    def site_x(self, site: SiteRows) -> np.ndarray:
        return self.x if site.x is None else site.x

    def site_view(self, site: SiteRows, rows: np.ndarray) -> np.ndarray:
        """``y[rows]`` over the union of the sites' labels, NaN where ``site`` does not annotate."""
        union = self.union()
        out = np.full((len(rows), len(union)), np.nan, dtype=np.float32)
        y = self.y if site.y is None else site.y
        out[:, union.indices(site.labels)] = y[np.ix_(rows, self.labels.indices(site.labels))]
        return out

    def union(self) -> LabelSpace:
        return LabelSpace.union(s.labels for s in self.sites)


@dataclass(frozen=True)
class Method:
    """How sites train.

    ``heads``: a node's head has its own labels or the union of all sites' labels.
    ``missing``: what a union label the site does not annotate is in its loss: masked out, a
    negative, or its true value (``observed``: the central baseline with every label known).
    ``pooled``: all sites' rows on one node (central). ``continuous``: one optimiser run of
    ``rounds x local_epochs`` epochs instead of rounds (methods without a server round).
    ``options``: :class:`FederationConfig` fields this method sets (e.g. ``{"distill": 1.0}``).
    ``granularity``: whole-report embeddings (the papers') or sentence bags.
    """

    name: str
    description: str
    mode: Mode
    heads: Literal["own", "union"] = "own"
    missing: Literal["masked", "negative", "observed"] = "masked"
    pooled: bool = False
    continuous: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    granularity: Granularity = "report"

    @property
    def per_site(self) -> bool:
        """Evaluated per site: no global model to evaluate."""
        return self.mode != "surgical" and not self.pooled


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("surgical", "surgical aggregation", "surgical"),
        Method(
            "sentence",
            "surgical aggregation, sentence-level (each sentence scored, max over sentences)",
            "surgical",
            granularity="sentence",
        ),
        Method(
            "central-sentence",
            "central, every row fully labelled, sentence-level",
            "none",
            heads="union",
            missing="observed",
            pooled=True,
            continuous=True,
            granularity="sentence",
        ),
        Method(
            "central",
            "central, every row fully labelled (the papers' baseline)",
            "none",
            heads="union",
            missing="observed",
            pooled=True,
            continuous=True,
        ),
        Method(
            "central-masked",
            "central, pooled rows, labels a site does not annotate masked",
            "none",
            heads="union",
            pooled=True,
            continuous=True,
        ),
        Method(
            "central-negatives",
            "central, pooled rows, labels a site does not annotate as negatives",
            "none",
            heads="union",
            missing="negative",
            pooled=True,
            continuous=True,
        ),
        Method(
            "fl-zero-fill",
            "FedAvg, labels a site does not annotate as negatives (vanilla FL)",
            "surgical",
            heads="union",
            missing="negative",
        ),
        Method(
            "fl-partial-loss",
            "FedAvg of full-width heads, loss on annotated labels only",
            "surgical",
            heads="union",
        ),
        Method(
            "local-heads",
            "shared backbone averaged, heads stay local (personalized FL)",
            "local-heads",
        ),
        Method(
            "split",
            "split learning: input layer and head on the site, a shared body on the server",
            "split",
            continuous=True,
        ),
        Method("local", "each site trains alone (lower reference)", "none", continuous=True),
    )
}


@dataclass
class Outcome:
    """One method on one repeat: macro metrics, per-label metrics (label -> metric -> value) and,
    for methods with a server round, the global model's macro AUROC on the test rows after each
    round (``curve``) and the megabytes its nodes send and receive in one round."""

    seed: int
    metrics: dict[str, float]
    per_label: dict[str, dict[str, float]] = field(default_factory=dict)
    curve: list[float] = field(default_factory=list)
    round_megabytes: float = float("nan")


def _targets(scenario: Scenario, site: SiteRows, rows: np.ndarray, method: Method) -> np.ndarray:
    if method.missing == "observed":
        return scenario.y[np.ix_(rows, scenario.labels.indices(scenario.union()))].astype(
            np.float32
        )
    view = scenario.site_view(site, rows)
    return np.nan_to_num(view, nan=0.0) if method.missing == "negative" else view


def method_nodes(
    scenario: Scenario, method: Method, config: FederationConfig = PAPER
) -> list[Node]:
    """The nodes ``method`` trains on ``scenario`` (one pooled node for central methods), built
    as the product builds a site (:func:`reportfed.reports.site.build_site`) from the rows the
    protocol drew: the template rows of their labels where ``config.templates`` says so, and the
    labels they lack as the text rules read them (:attr:`Scenario.read`) where ``config.read``
    does, trained from the start (the lockstep engine knows the federation's labels)."""
    union = scenario.union()
    embed = partial(
        embed_reports,
        embedder=shared_embedder(scenario.embedder, **SWEEP_NUMERICS),
        granularity=method.granularity,
        cache_dir=embeddings_cache_dir(),
        progress=False,
    )
    if method.pooled:
        x = np.concatenate([scenario.site_x(s)[s.fit] for s in scenario.sites])
        y = np.concatenate([_targets(scenario, s, s.fit, method) for s in scenario.sites])
        every = (np.arange(len(x)), np.arange(0))
        return [build_site("central", x, y, union, config, split=every, embed=embed).node]
    nodes = []
    for site in scenario.sites:
        rows = np.concatenate([site.fit, site.val])
        y = _targets(scenario, site, rows, method)
        if method.heads == "own":
            y = y[:, union.indices(site.labels)]
        labels = site.labels if method.heads == "own" else union
        reading = None
        if config.read:
            reading = _reading(scenario, site, labels, embed if config.templates else None)
        split = (np.arange(len(site.fit)), np.arange(len(site.fit), len(rows)))
        x = scenario.site_x(site)[rows]
        built = build_site(
            site.name, x, y, labels, config, split=split, embed=embed, reading=reading
        )
        nodes.append(with_read(built.node, union) if config.read else built.node)
    return nodes


def _reading(
    scenario: Scenario,
    site: SiteRows,
    labels: LabelSpace,
    embed: Callable[[Sequence[str]], np.ndarray] | None,
) -> Reading:
    """What the text rules read in ``site``'s training reports of the labels it lacks
    (:attr:`Scenario.read`, read once for every IU report), with their template rows embedded
    where ``embed`` is given (:func:`reportfed.reports.node.reading_of`), as
    :func:`reportfed.reports.node.read_lacked` reads a table."""
    if scenario.read is None:
        raise ValueError("this scenario has no text-rule labels (Scenario.read)")
    lacked = LabelSpace(tuple(n for n in scenario.labels if n not in labels and n in FINDINGS))
    return reading_of(
        lacked, scenario.read[np.ix_(site.fit, scenario.labels.indices(lacked))], embed
    )


@dataclass(frozen=True)
class Judged:
    """A model to evaluate: its weights, the validation rows of every site it serves, their
    labels where the site annotates them (NaN elsewhere), and the same for every row of those
    sites (training and validation)."""

    state: GlobalState
    val_x: np.ndarray
    val_y: np.ndarray
    all_x: np.ndarray
    all_y: np.ndarray
    #: ``all_y`` with what the text rules read where a row's site does not annotate the label
    #: (:attr:`Scenario.read`), and each of those rows' site; ``None`` without a reading
    read_y: np.ndarray | None = None
    sites: np.ndarray | None = None


#: the ways of choosing thresholds besides the validation rows' best F1 (:func:`_thresholds`),
#: each judged as ``<rule>_f1``; the last two where the scenario has the text rules' reading
RULES = ("all_rows", "matched", "matched_all", "read_rows", "read_mean")
#: the metrics judged on each of a scenario's views
VIEW_METRICS = ("auroc", "leakfree_f1")


def _thresholds(model: Judged) -> dict[str, np.ndarray]:
    """``model``'s thresholds chosen four ways, none from a test row: best F1 on the validation
    rows annotated (``f1``) or on every annotated row, training rows too (``all_rows``), and the
    score above which each label's share of rows matches its prevalence over the annotated rows
    (what the sites holding it can count), no label seen, over all validation rows
    (``matched``) or all rows (``matched_all``). Where the text rules read every site's reports
    (:attr:`Judged.read_y`), best F1 on every row of every site, a label read where its site does
    not annotate it (``read_rows``: pooled scores), and each site's best F1 on its own rows so
    labelled, averaged over the sites weighted by their positives (``read_mean``: the product's
    labelling thresholds where sites read, :func:`~reportfed.core.metrics.site_thresholds`)."""
    val_p = predict_state(model.state, model.val_x)
    all_p = predict_state(model.state, model.all_x)
    prevalence = np.nanmean(model.all_y, axis=0)
    chosen = {
        "f1": f1_thresholds(model.val_y, val_p),
        "all_rows": f1_thresholds(model.all_y, all_p),
        "matched": matched_thresholds(val_p, prevalence),
        "matched_all": matched_thresholds(all_p, prevalence),
    }
    if model.read_y is not None and model.sites is not None:
        chosen["read_rows"] = f1_thresholds(model.read_y, all_p)
        chosen["read_mean"] = site_thresholds(model.read_y, all_p, model.sites)
    return chosen


def _evaluate(
    scenario: Scenario,
    models: Sequence[Judged],
    thresholds: Sequence[dict[str, np.ndarray]],
    x_test: np.ndarray,
) -> Outcome:
    """Metrics of ``models`` on the test rows embedded as ``x_test``, at their ``thresholds``
    (:func:`_thresholds`): ``leakfree_*`` at ``f1``, and ``<rule>_f1`` at each of
    :data:`RULES`."""
    y_true, names, probs = [], [], []
    for model in models:
        cols = scenario.labels.indices(model.state.labels)
        probs.append(predict_state(model.state, x_test))
        y_true.append(scenario.y[np.ix_(scenario.test, cols)])
        names += list(model.state.labels)
    per_label = label_metrics(
        np.concatenate(y_true, axis=1),
        np.concatenate(probs, axis=1),
        thresholds=np.concatenate([t["f1"] for t in thresholds]),
        rules={
            r: np.concatenate([t[r] for t in thresholds])
            for r in RULES
            if all(r in t for t in thresholds)
        },
    )
    by_label: dict[str, dict[str, list[float]]] = {}
    for j, name in enumerate(names):
        for metric, values in per_label.items():
            by_label.setdefault(name, {}).setdefault(metric, []).append(float(values[j]))
    labels = {
        name: {m: float(np.nanmean(v)) if not np.isnan(v).all() else np.nan for m, v in ms.items()}
        for name, ms in by_label.items()
    }
    macro = {
        m: float(np.nanmean([labels[n][m] for n in labels])) for m in next(iter(labels.values()))
    }
    return Outcome(scenario.seed, macro, labels)


def run_method(
    scenarios: Sequence[Scenario],
    method: Method,
    config: FederationConfig | None = None,
    compute: Compute | None = None,
) -> list[Outcome]:
    """Train ``method`` on every scenario (seeded by the scenario's seed) with the lockstep
    engine computing as ``compute`` says (its defaults when not given), and evaluate it
    (``config``: the paper's, :data:`~reportfed.core.config.PAPER`, by default)."""
    scenarios = [s.at(method.granularity) for s in scenarios]
    config = replace(config or PAPER, **method.options)
    base = config
    if method.continuous:
        base = replace(config, rounds=1, local_epochs=config.rounds * config.local_epochs)
    configs = [replace(base, seed=s.seed) for s in scenarios]
    federations = [method_nodes(s, method, config) for s in scenarios]
    results = run_federations(federations, configs, mode=method.mode, compute=compute or Compute())
    outcomes = []
    for scenario, result, federation in zip(scenarios, results, federations, strict=True):
        val_x = {s.name: scenario.site_x(s)[s.val] for s in scenario.sites}
        all_rows = {s.name: np.concatenate([s.fit, s.val]) for s in scenario.sites}
        all_x = {s.name: scenario.site_x(s)[all_rows[s.name]] for s in scenario.sites}
        # thresholds come from what a site knows: its annotations (every label for "observed")
        known = method if method.missing == "observed" else replace(method, missing="masked")
        val_y = {s.name: _targets(scenario, s, s.val, known) for s in scenario.sites}
        counted = {s.name: _targets(scenario, s, all_rows[s.name], known) for s in scenario.sites}
        union = scenario.union()
        if method.per_site:
            models = [
                Judged(
                    result.nodes[s.name],
                    val_x[s.name],
                    val_y[s.name][:, union.indices(result.nodes[s.name].labels)],
                    all_x[s.name],
                    counted[s.name][:, union.indices(result.nodes[s.name].labels)],
                )
                for s in scenario.sites
            ]
        else:
            state = result.state if result.state is not None else result.nodes["central"]
            cols = union.indices(state.labels)
            every_y = np.concatenate(list(counted.values()))[:, cols]
            read_y = sites = None
            if scenario.read is not None:
                # what the text rules read of every row, over the model's labels
                read = np.concatenate([scenario.read[rows] for rows in all_rows.values()])
                read_y = np.where(
                    np.isnan(every_y), read[:, scenario.labels.indices(state.labels)], every_y
                )
                sites = np.concatenate(
                    [np.full(len(r), k) for k, r in enumerate(all_rows.values())]
                )
            models = [
                Judged(
                    state,
                    np.concatenate(list(val_x.values())),
                    np.concatenate(list(val_y.values()))[:, cols],
                    np.concatenate(list(all_x.values())),
                    every_y,
                    read_y,
                    sites,
                )
            ]
        chosen = [_thresholds(m) for m in models]
        x_test = scenario.x[scenario.test]
        outcome = _evaluate(scenario, models, chosen, x_test)
        for view, x in scenario.views.items():
            seen = _evaluate(scenario, models, chosen, x[scenario.test]).metrics
            outcome.metrics.update({f"{m}@{view}": seen[m] for m in VIEW_METRICS})
        if result.state is not None:  # a server round: the curve over rounds and its bytes
            final = result.state
            y_test = scenario.y[np.ix_(scenario.test, scenario.labels.indices(final.labels))]
            outcome.curve = [
                float(np.nanmean(auroc(y_test, predict_state(s, x_test)))) for s in result.rounds
            ]
            traffic = round_traffic(final, federation, config).values()
            outcome.round_megabytes = sum(b["down"] + b["up"] for b in traffic) / 1e6
        outcomes.append(outcome)
    return outcomes
