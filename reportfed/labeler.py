"""``ReportLabeler``: a report labeler trained by federation, with scikit-learn's estimator
contract (``BaseEstimator``: ``get_params``/``set_params``, so ``sklearn.base.clone``, ``Pipeline``
and ``GridSearchCV`` work; parameters are stored as given and validated at fit).

It reads reports as :class:`~reportfed.reader.ReportReader` does (scores, probabilities, states,
evidence, the model file) and adds training: :meth:`ReportLabeler.fit` on texts,
:meth:`~ReportLabeler.fit_tables` with one node per table, :meth:`~ReportLabeler.fit_embeddings`
on precomputed embeddings.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.utils import Tags

from reportfed.core.aggregation import GlobalState, node_arrays
from reportfed.core.config import FederationConfig, Granularity, check_fraction
from reportfed.core.errors import ConfigError, ReportfedError, warn
from reportfed.core.labels import LabelSpace, warn_if_all_positive, warn_if_too_few
from reportfed.core.metrics import FEW_POSITIVES, auroc, f1_at
from reportfed.core.record import POOLED, Evaluation
from reportfed.data.table import ReportTable
from reportfed.embed import DEFAULT_EMBEDDER
from reportfed.reader import ReportReader, _check_embeddings
from reportfed.reports.engine import run_federation
from reportfed.reports.site import Site, build_site
from reportfed.text.calibration import labelling_rules, labelling_thresholds
from reportfed.text.corrections import Corrections, learn
from reportfed.text.findings import read_findings
from reportfed.text.lexicon import Lexicon
from reportfed.text.scoring import predict_state
from reportfed.text.sentences import check_granularity
from reportfed.text.states import read_labels, report_mentions


class NotFitted(NotFittedError, ReportfedError):
    """A :class:`ReportLabeler` used before ``fit`` or ``load``: scikit-learn's
    ``NotFittedError``, and reportfed's error (one line on the command line)."""


class ReportLabeler(ReportReader, BaseEstimator):
    """Federated report labeler.

    Parameters
    ----------
    embedder:
        Embedder spec (see :mod:`reportfed.embed`), default all-MiniLM-L6-v2.
    granularity:
        ``"sentence"`` (default): every sentence is embedded and scored, and each label takes the
        largest logit over a report's sentences; ``"report"``: one embedding per report (the
        papers' method). See :mod:`reportfed.embed.granularity`.
    base_url:
        Base URL for an ``openai:`` embedder.
    config:
        Federation hyperparameters (rounds, local epochs, MLP sizes, learning rate, seed...);
        ``None``: :class:`~reportfed.core.config.FederationConfig`'s defaults.
    val_fraction:
        Share of each node's rows held out, in [0, 1): the calibration is fitted on them and
        the held-out quality measured (``provenance_["held_out"]``: AUROC, and F1 at thresholds
        chosen on the training rows alone, with a caveat under ten positives). The labelling
        thresholds are each label's best F1 on every row annotated with it, held out or not;
        where some site reads a label it lacks (the config's ``read``, given the texts), each
        site's best on its own rows, those labels as read, averaged by the sites' positives
        (:func:`~reportfed.text.calibration.labelling_thresholds`, by the rules of
        docs/experiments.md). So they never measure themselves.
    cache_dir:
        Embedding cache directory; ``None``: :func:`~reportfed.core.paths.embeddings_cache_dir`
        (``$REPORTFED_EMBEDDINGS_CACHE``, else a source checkout's ``embeddings_cache/``, else
        ``embeddings`` in the user cache dir).
    cache:
        Cache embeddings on disk (``False``: embed every time).
    progress:
        Show progress bars.
    findings:
        A findings file (:mod:`reportfed.text.findings`): the findings the hospital defines,
        read by the text rules as the built-in ones are (states, evidence, what sites read of
        the labels they lack); the model keeps the definitions (``findings_``).
    backend, precision:
        How a local embedder computes (:mod:`reportfed.embed`; ``None``: the user's settings
        ``$REPORTFED_BACKEND`` / ``$REPORTFED_PRECISION``, else ``auto``).

    Learned attributes: ``classes_`` (label names), ``thresholds_`` (on the model's scores),
    ``calibration_`` (:mod:`reportfed.text.calibration`), ``state_`` (global weights),
    ``embedder_fingerprint_``, ``input_dim_``, ``provenance_``, and from :meth:`fit` the
    ``history_`` of its rounds (a :class:`~reportfed.core.record.RunHistory`, the record a
    Flower server writes: seconds, nodes, bytes, losses, pooled validation AUROC per label).
    """

    def __init__(
        self,
        embedder: str = DEFAULT_EMBEDDER,
        *,
        granularity: Granularity = "sentence",
        base_url: str | None = None,
        config: FederationConfig | None = None,
        val_fraction: float = 0.1,
        cache_dir: str | Path | None = None,
        cache: bool = True,
        progress: bool = True,
        backend: str | None = None,
        precision: str | None = None,
        findings: str | Path | None = None,
    ) -> None:
        super().__init__(
            embedder,
            granularity=granularity,
            base_url=base_url,
            config=config,
            cache_dir=cache_dir,
            cache=cache,
            progress=progress,
            backend=backend,
            precision=precision,
        )
        self.val_fraction = val_fraction
        self.findings = findings

    def __sklearn_tags__(self) -> Tags:
        """scikit-learn's description of the estimator: it reads report texts (a list of strings,
        not a 2-D numeric array) and learns several labels at once from a required ``y``."""
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = False
        return tags

    def _check_fitted(self) -> None:
        if not hasattr(self, "state_"):
            raise NotFitted("this ReportLabeler is not fitted: call fit() or load()")

    def _validate(self) -> None:
        """Refuse parameters no fit can use (scikit-learn validates at fit, not in ``__init__``)."""
        check_fraction("val_fraction", self.val_fraction)
        check_granularity(self.granularity)
        if self.config is not None and not isinstance(self.config, FederationConfig):
            raise ConfigError(
                f"config must be a FederationConfig, got {type(self.config).__name__}"
            )

    # -- training ----------------------------------------------------------------------------
    def fit(
        self,
        texts: Sequence[str],
        y: np.ndarray,
        labels: Iterable[str],
        nodes: Sequence[str] | None = None,
        *,
        corrections: Corrections | None = None,
    ) -> ReportLabeler:
        """Train on ``texts`` with labels ``y`` ``(n, len(labels))`` (NaN = not annotated).

        ``nodes`` gives each row's site; each site trains on the labels it annotates (a column with
        at least one non-NaN value in its rows). ``None`` trains a single site (central).
        ``classes_`` keeps the order of ``labels`` (those some site annotates); :meth:`fit_tables`
        and a Flower federation, which merge several sites' label lists, use the union order
        (CheXpert labels first, then NIH-14, then custom labels). ``corrections``: phrasings a
        hospital's readers corrected, read as corrected (:meth:`fit_tables` learns them).
        """
        self._validate()  # before the embedding, which may take minutes
        y = np.asarray(y, dtype=np.float32)
        space = LabelSpace.of(labels, allow_unknown=True)
        if y.shape != (len(texts), len(space)):
            raise ConfigError(f"y has shape {y.shape}, expected ({len(texts)}, {len(space)})")
        x = self.embed(texts)
        return self.fit_embeddings(x, y, space, nodes, texts=texts, corrections=corrections)

    def fit_tables(self, tables: Sequence[ReportTable]) -> ReportLabeler:
        """Train with one node per table (each with its own label columns, in any vocabulary);
        the phrasings a table's reader corrected on a review page
        (:attr:`~reportfed.data.table.ReportTable.corrected`) are learnt as rules
        (:mod:`reportfed.text.corrections`) and kept in the model."""
        self._validate()
        defined = read_findings(self.findings) if self.findings is not None else None
        corrections = Corrections()
        for t in tables:
            learnt = learn(t.texts, t.ids, t.corrected, Lexicon(defined), t.source)
            corrections = corrections.merged(learnt, where=f"{t.source}: ")
        space = LabelSpace.union(t.label_space for t in tables)
        y = np.full((sum(len(t) for t in tables), len(space)), np.nan, dtype=np.float32)
        start = 0
        for t in tables:
            y[start : start + len(t), space.indices(t.label_space)] = t.labels
            start += len(t)
        texts = [s for t in tables for s in t.texts]
        nodes = [
            f"node{k}:{Path(t.source).name}" for k, t in enumerate(tables) for _ in range(len(t))
        ]
        return self.fit(texts, y, space, nodes, corrections=corrections)

    def fit_embeddings(
        self,
        x: np.ndarray,
        y: np.ndarray,
        labels: LabelSpace,
        nodes: Sequence[str] | None = None,
        *,
        fingerprint: str | None = None,
        texts: Sequence[str] | None = None,
        corrections: Corrections | None = None,
    ) -> ReportLabeler:
        """:meth:`fit` on precomputed embeddings ``x``.

        ``fingerprint`` names the embedder that made ``x`` (default: this labeler's embedder);
        ``x`` is ``(n, dim)`` or sentence bags ``(n, S, dim)``, as :meth:`embed` makes them.
        ``texts``, the reports ``x`` embeds, lets the probabilities be calibrated with the
        mentions (:mod:`reportfed.text.calibration`); without them they are the model's scores.
        ``corrections``: phrasings a hospital's readers corrected
        (:mod:`reportfed.text.corrections`), read as corrected and kept in the model.
        """
        self._validate()
        site = _check_fit_inputs(x, y, nodes, self.granularity)
        config = self.federation
        fingerprint = self._fingerprint_of(fingerprint)
        defined = read_findings(self.findings) if self.findings is not None else None
        lexicon = Lexicon(defined, corrections)
        warn_if_too_few(y, labels)
        sites, held = self._sites(x, y, labels, site, texts, lexicon)
        vrows = np.concatenate([s.val for s in sites.values()])
        frows = np.concatenate([s.fit for s in sites.values()])
        watch = _validation_auroc(x[vrows], y[vrows], labels) if len(vrows) else None
        result = run_federation(
            [s.node for s in sites.values()], config, evaluate=watch, progress=self.progress
        )
        self.history_ = result.history
        # the caller's label order (the federation merges in union order)
        kept = LabelSpace(tuple(name for name in labels if name in result.state.labels))
        self._set_fitted(
            GlobalState(kept, *node_arrays(result.state, kept)),
            fingerprint=fingerprint,
            input_dim=int(x.shape[-1]),
            thresholds=None,
            calibration=None,
            provenance={
                "config": asdict(config),
                "val_fraction": self.val_fraction,
                "nodes": held,
                "final_loss": result.history[-1]["loss"] if result.history else {},
                **({"findings": defined.record()} if defined is not None else {}),
                **({"corrections": corrections.record()} if corrections else {}),
            },
        )
        self._choose_thresholds(x, y, labels, kept, site, sites, vrows, frows, texts, lexicon)
        _warn_if_untrained(result.history[-1]["loss"], self.thresholds_, kept, config)
        return self

    def _fingerprint_of(self, fingerprint: str | None) -> str:
        """The embedder that made a fit's vectors: ``fingerprint``, else this labeler's (its
        templates are embedded with this labeler's embedder, which must then be the same)."""
        if fingerprint is None:
            return self._embedder().fingerprint
        if self.federation.templates and fingerprint != (own := self._embedder().fingerprint):
            raise ConfigError(
                f"x comes from {fingerprint}, but templates are embedded with this labeler's "
                f"embedder ({own}): set the config's templates=False"
            )
        return fingerprint

    def _sites(
        self,
        x: np.ndarray,
        y: np.ndarray,
        labels: LabelSpace,
        site: np.ndarray,
        texts: Sequence[str] | None,
        lexicon: Lexicon,
    ) -> tuple[dict[str, Site], dict[str, dict[str, Any]]]:
        """One node per site of ``site`` (each row's), training the labels its rows annotate,
        its rows split into fit and validation rows (indices into ``x``); and what the model's
        provenance says of each (rows, labels, the labels it reads from its texts)."""
        config = self.federation
        # the labels some site annotates: what reading sites also train (as a Flower server
        # merges the labels its nodes register)
        annotated = LabelSpace(
            tuple(n for j, n in enumerate(labels) if not np.isnan(y[:, j]).all())
        )
        embed = self.embed if config.templates else None
        sites: dict[str, Site] = {}
        held: dict[str, dict[str, Any]] = {}
        for name in sorted(set(site.tolist())):
            rows = np.flatnonzero(site == name)
            cols = np.flatnonzero(~np.isnan(y[rows]).all(axis=0))
            if not len(cols):
                raise ReportfedError(f"node {name!r} has no annotated label")
            own = LabelSpace(tuple(labels[c] for c in cols))
            if config.read and texts is None and len(own) < len(annotated):
                raise ConfigError(
                    f"node {name!r} lacks labels other sites annotate, and the config's read "
                    "needs the reports' texts to read them: pass texts=, or set read=False"
                )
            warn_if_all_positive(name, y[np.ix_(rows, cols)], own)
            built = build_site(
                name,
                x[rows],
                y[np.ix_(rows, cols)],
                own,
                config,
                split=self.val_fraction,
                embed=embed,
                texts=None if texts is None else [texts[i] for i in rows.tolist()],
                lexicon=lexicon,
            )
            sites[name] = replace(built, fit=rows[built.fit], val=rows[built.val])
            held[name] = {"rows": len(built.fit), "labels": list(own)}
            read = built.node.trains(annotated).names[len(own) :]
            if read:
                held[name]["read"] = list(read)
        return sites, held

    def _choose_thresholds(
        self,
        x: np.ndarray,
        y: np.ndarray,
        labels: LabelSpace,
        kept: LabelSpace,
        site: np.ndarray,
        sites: dict[str, Site],
        vrows: np.ndarray,
        frows: np.ndarray,
        texts: Sequence[str] | None,
        lexicon: Lexicon,
    ) -> None:
        """The labelling thresholds and calibration, chosen on every row (each row's site in
        ``site``, built as ``sites``: ``frows`` training, ``vrows`` held out), and the held-out
        quality users read, measured at thresholds the held-out rows did not choose. Where some
        site reads a label it lacks, so do the thresholds
        (:func:`~reportfed.text.calibration.labelling_thresholds`)."""
        columns = labels.indices(kept)
        every = self.predict_scores_embeddings(x)  # every row scored once, indexed below
        known = y[:, columns]
        read = mentions = None
        if texts is not None:
            lacked = _read_lacked(known, sites, texts, kept, lexicon)
            read = None if lacked is None else (lacked, site)
            mentions = report_mentions([texts[i] for i in vrows], list(kept), lexicon)
        # a site's rows are NaN in the labels it does not annotate: every row is its site's
        self.thresholds_, calibration = labelling_rules(
            known, every, vrows, mentions, list(kept), read
        )
        if calibration is not None:
            self.calibration_ = calibration[0]
        held_out: dict[str, dict[str, Any]] = {}
        if len(vrows):
            fit_read = None if read is None else (read[0][frows], site[frows])
            chosen = labelling_thresholds(known[frows], every[frows], fit_read)
            held_out = _held_out(known[vrows], every[vrows], chosen, kept)
        self.provenance_["val_rows"] = len(vrows)
        self.provenance_["held_out"] = held_out


def _read_lacked(
    y: np.ndarray,
    sites: dict[str, Site],
    texts: Sequence[str],
    labels: LabelSpace,
    lexicon: Lexicon,
) -> np.ndarray | None:
    """``y`` (over ``labels``) with each label a site reads (:attr:`Node.read
    <reportfed.reports.node.Node.read>`: one it lacks and the text rules read, where the config
    reads) as its node trains it: its training rows as the node read them, its held-out rows
    read the same way (:func:`read_labels`); ``None`` where no site reads a label."""
    out, lacking = y.copy(), False
    for built in sites.values():
        read = [name for name in labels.names if name in built.node.read.columns]
        if not read:
            continue
        lacking, cols = True, labels.indices(read)
        columns = [built.node.read.columns[name] for name in read]
        out[np.ix_(built.fit, cols)] = np.stack(columns, axis=1)
        held = [texts[i] for i in built.val.tolist()]
        out[np.ix_(built.val, cols)] = read_labels(held, read, lexicon)
    return out if lacking else None


def _check_fit_inputs(
    x: np.ndarray, y: np.ndarray, nodes: Sequence[str] | None, granularity: str
) -> np.ndarray:
    """Refuse a fit's inputs that do not fit together; each row's site (``central`` without
    ``nodes``)."""
    _check_embeddings(x, check_granularity(granularity))
    if len(x) != len(y):
        raise ReportfedError(f"{len(x)} embeddings but {len(y)} label rows")
    if nodes is not None and len(nodes) != len(x):
        raise ReportfedError(f"nodes names {len(nodes)} rows, but there are {len(x)}")
    if not np.isin(y[~np.isnan(y)], (0.0, 1.0)).all():
        raise ReportfedError("labels must be 1, 0 or NaN (not annotated)")
    return np.asarray(nodes if nodes is not None else ["central"] * len(x))


def _validation_auroc(
    x: np.ndarray, y: np.ndarray, labels: LabelSpace
) -> Callable[[int, GlobalState], dict[str, Any]]:
    """The per-round evaluation of a fit: each label's AUROC on the validation rows ``x`` (labels
    ``y`` over ``labels``, NaN where the row's site does not annotate), their mean, and each
    label's held-out positives (what its AUROC rests on)."""

    def evaluate(_: int, state: GlobalState) -> dict[str, Any]:
        truth = y[:, labels.indices(state.labels)]
        aucs = auroc(truth, predict_state(state, x))
        found = Evaluation(
            POOLED,
            auroc={n: float(a) for n, a in zip(state.labels, aucs, strict=True) if not np.isnan(a)},
            positives={n: int((truth[:, c] == 1).sum()) for c, n in enumerate(state.labels)},
        )
        return {"evaluation": found.to_json()}

    return evaluate


def _chance_loss(config: FederationConfig) -> float:
    """At least the training loss of a model that says 0.5 everywhere: the binary cross-entropy
    ln 2 per annotated entry (at most twice that with ``balance``, where a positive weighs its
    label's negatives/positives: the weights of a label's entries average to at most 2), plus
    ``distill`` x ln 2 for the soft targets."""
    return math.log(2) * ((2 if config.balance else 1) + config.distill)


def _held_out(
    y: np.ndarray, scores: np.ndarray, thresholds: np.ndarray, labels: LabelSpace
) -> dict[str, dict[str, Any]]:
    """Per label, what the held-out rows ``y`` say of a fitted model: annotated rows, positives,
    AUROC, F1 at ``thresholds`` (chosen on the training rows, never on these; None where a label
    has one class only) and, under :data:`FEW_POSITIVES` positives, a caveat saying so."""
    aucs, f1s = auroc(y, scores), f1_at(y, scores, thresholds)
    known = ~np.isnan(y)
    out: dict[str, dict[str, Any]] = {}
    for c, name in enumerate(labels):
        one_class = bool(np.isnan(aucs[c]))
        positives = int((y[known[:, c], c] == 1).sum())
        rows = int(known[:, c].sum())
        caveat = None
        if one_class:
            caveat = "no held-out positive" if not positives else "no held-out negative"
        elif positives < FEW_POSITIVES:
            caveat = f"{positives} held-out positive(s): too few to measure"
        out[name] = {
            "rows": rows,
            "positives": positives,
            "auroc": None if one_class else round(float(aucs[c]), 4),
            "f1_training_threshold": None if one_class else round(float(f1s[c]), 4),
            "caveat": caveat,
        }
    return out


def _warn_if_untrained(
    losses: dict[str, float], thresholds: np.ndarray, labels: LabelSpace, config: FederationConfig
) -> None:
    """Warn when training ran but did not learn: a node's final training loss no better than a
    coin flip's (:func:`_chance_loss`), or validation scores saturated at 0 or 1 (a threshold at
    the end of the range)."""
    chance = _chance_loss(config)
    stuck = {n: v for n, v in losses.items() if not v < chance}
    if stuck:
        worst = max(stuck, key=lambda n: stuck[n])
        warn(
            f"training did not converge: the final training loss of node {worst!r} is "
            f"{stuck[worst]:.3g}, no better than a coin flip ({chance:.3f}); the learning rate "
            f"{config.lr:g} is likely too high"
        )
    saturated = [n for n, t in zip(labels, thresholds, strict=True) if not 0 < t < 1]
    if saturated:
        warn(
            f"scores saturated at 0 or 1 on the validation rows for {saturated} (thresholds "
            f"at the end of the range); the model is overconfident, lower the learning rate "
            f"(now {config.lr:g})"
        )
