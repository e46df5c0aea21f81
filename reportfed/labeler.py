"""``ReportLabeler``: a report labeler trained by federation, with scikit-learn's estimator
contract (``BaseEstimator``: ``get_params``/``set_params``, so ``sklearn.base.clone``, ``Pipeline``
and ``GridSearchCV`` work; parameters are stored as given and validated at fit).

A model file (safetensors) holds everything needed to use it: label names in order, the embedder
spec and fingerprint, architecture, weights, per-label thresholds and training provenance. Loading
it with an embedder of another fingerprint is an error, not a silently wrong answer.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator

from reportfed import __version__
from reportfed.core.aggregation import GlobalState, node_arrays
from reportfed.core.config import FederationConfig, Granularity, check_fraction
from reportfed.core.errors import ConfigError, ModelFileError, ReportfedError, ReportfedWarning
from reportfed.core.labels import LabelSpace, warn_if_all_positive, warn_if_too_few
from reportfed.core.metrics import auroc, f1_at, f1_thresholds
from reportfed.core.paths import embeddings_cache_dir
from reportfed.core.schema import architecture, architecture_fields
from reportfed.data.partition import holdout
from reportfed.data.table import ReportTable
from reportfed.embed import DEFAULT_EMBEDDER, Embedder, shared_embedder
from reportfed.embed.granularity import embed_reports, embed_units
from reportfed.reports.engine import run_federation
from reportfed.reports.node import Node, with_templates
from reportfed.text.assertion import Mention
from reportfed.text.calibration import (
    calibrate,
    calibration_features,
    fit_calibration,
    identity_calibration,
)
from reportfed.text.model import decisive_sentences, global_model, predict_state
from reportfed.text.model_file import ModelFile, read_model, write_model
from reportfed.text.sentences import check_granularity, report_units
from reportfed.text.states import (
    NO_FINDING,
    chexpert_states,
    consistent_proba,
    readable,
    report_mentions,
)

#: reports embedded and scored at once by :meth:`ReportLabeler.predict_proba` (bounds memory)
PREDICT_CHUNK = 2048
#: the most sentence rows scored at once (reports x the most sentences one of them has): a long
#: report is scored apart from short ones instead of padding every one to its length
PREDICT_SENTENCES = PREDICT_CHUNK * 64
#: the columns of :meth:`ReportLabeler.predict_evidence` (and of ``reportfed label --evidence``)
EVIDENCE_COLUMNS = (
    "id", "row", "label", "state", "probability", "score", "sentence", "cue", "source"
)  # fmt: skip


@dataclass(frozen=True)
class _Reading:
    """One chunk of reports read: embeddings, the model's scores and the decisive mentions."""

    start: int
    texts: list[str]
    units: list[list[str]]
    x: np.ndarray
    scores: np.ndarray
    mentions: list[dict[str, Mention | None]]


@dataclass(frozen=True)
class Annotation:
    """What :meth:`ReportLabeler.annotate` gives: calibrated ``proba``, ``states``, (when
    asked for) the ``evidence`` table, and the positions of the reports the labeler cannot read
    (``unreadable``: only section headers, or another language; no state, not No Finding)."""

    proba: np.ndarray
    states: np.ndarray
    evidence: pd.DataFrame | None
    unreadable: list[int]


class ReportLabeler(BaseEstimator):
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
        Share of each node's rows held out to choose per-label labelling thresholds (best F1),
        in [0, 1).
    cache_dir:
        Embedding cache directory; ``None``: ``$REPORTFED_EMBEDDINGS_CACHE`` or
        ``./embeddings_cache``.
    cache:
        Cache embeddings on disk (``False``: embed every time).
    progress:
        Show progress bars.

    Learned attributes: ``classes_`` (label names), ``thresholds_`` (on the model's scores),
    ``calibration_`` (:mod:`reportfed.text.calibration`), ``state_`` (global weights),
    ``embedder_fingerprint_``, ``input_dim_``, ``provenance_``.
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
    ) -> None:
        self.embedder = embedder
        self.granularity = granularity
        self.base_url = base_url
        self.config = config
        self.val_fraction = val_fraction
        self.cache_dir = cache_dir
        self.cache = cache
        self.progress = progress

    @property
    def federation(self) -> FederationConfig:
        """The hyperparameters in force: ``config``, else the defaults."""
        return self.config if self.config is not None else FederationConfig()

    def _validate(self) -> None:
        """Refuse parameters no fit can use (scikit-learn validates at fit, not in ``__init__``)."""
        check_fraction("val_fraction", self.val_fraction)
        check_granularity(self.granularity)
        if self.config is not None and not isinstance(self.config, FederationConfig):
            raise ConfigError(
                f"config must be a FederationConfig, got {type(self.config).__name__}"
            )

    # -- embedding ---------------------------------------------------------------------------
    def _embedder(self) -> Embedder:
        return shared_embedder(self.embedder, self.base_url)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts`` through the cache: ``(n, dim)`` per report, or ``(n, S, dim)``
        sentence bags with ``granularity="sentence"``."""
        _check_texts(texts)
        return embed_reports(
            texts,
            self._embedder(),
            granularity=check_granularity(self.granularity),
            cache_dir=self._cache_dir(),
            progress=self.progress,
        )

    def _cache_dir(self) -> str | Path | None:
        return (self.cache_dir or embeddings_cache_dir()) if self.cache else None

    # -- training ----------------------------------------------------------------------------
    def fit(
        self,
        texts: Sequence[str],
        y: np.ndarray,
        labels: Iterable[str],
        nodes: Sequence[str] | None = None,
    ) -> ReportLabeler:
        """Train on ``texts`` with labels ``y`` ``(n, len(labels))`` (NaN = not annotated).

        ``nodes`` gives each row's site; each site trains on the labels it annotates (a column with
        at least one non-NaN value in its rows). ``None`` trains a single site (central).
        ``classes_`` keeps the order of ``labels`` (those some site annotates); :meth:`fit_tables`
        and a Flower federation, which merge several sites' label lists, use the union order
        (CheXpert labels first, then NIH-14, then custom labels).
        """
        self._validate()  # before the embedding, which may take minutes
        y = np.asarray(y, dtype=np.float32)
        space = LabelSpace.of(labels, allow_unknown=True)
        if y.shape != (len(texts), len(space)):
            raise ConfigError(f"y has shape {y.shape}, expected ({len(texts)}, {len(space)})")
        x = self.embed(texts)
        return self.fit_embeddings(x, y, space, nodes, texts=texts)

    def fit_tables(self, tables: Sequence[ReportTable]) -> ReportLabeler:
        """Train with one node per table (each with its own label columns, in any vocabulary)."""
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
        return self.fit(texts, y, space, nodes)

    def fit_embeddings(
        self,
        x: np.ndarray,
        y: np.ndarray,
        labels: LabelSpace,
        nodes: Sequence[str] | None = None,
        *,
        fingerprint: str | None = None,
        texts: Sequence[str] | None = None,
    ) -> ReportLabeler:
        """:meth:`fit` on precomputed embeddings ``x``.

        ``fingerprint`` names the embedder that made ``x`` (default: this labeler's embedder);
        ``x`` is ``(n, dim)`` or sentence bags ``(n, S, dim)``, as :meth:`embed` makes them.
        ``texts``, the reports ``x`` embeds, lets the probabilities be calibrated with the
        mentions (:mod:`reportfed.text.calibration`); without them they are the model's scores.
        """
        self._validate()
        _check_embeddings(x, check_granularity(self.granularity))
        if len(x) != len(y):
            raise ReportfedError(f"{len(x)} embeddings but {len(y)} label rows")
        if nodes is not None and len(nodes) != len(x):
            raise ReportfedError(f"nodes names {len(nodes)} rows, but there are {len(x)}")
        if not np.isin(y[~np.isnan(y)], (0.0, 1.0)).all():
            raise ReportfedError("labels must be 1, 0 or NaN (not annotated)")
        site = np.asarray(nodes if nodes is not None else ["central"] * len(x))
        config = self.federation
        if fingerprint is None:
            fingerprint = self._embedder().fingerprint
        elif config.templates and fingerprint != self._embedder().fingerprint:
            raise ConfigError(
                f"x comes from {fingerprint}, but templates are embedded with this labeler's "
                f"embedder ({self._embedder().fingerprint}): set the config's templates=False"
            )
        warn_if_too_few(y, labels)
        splits = holdout(site, self.val_fraction, np.random.default_rng(config.seed))
        fed_nodes, val_rows, val_y = [], [], []
        for name, (val, fit) in splits.items():
            rows = np.concatenate([val, fit])
            cols = np.flatnonzero(~np.isnan(y[rows]).all(axis=0))
            if not len(cols):
                raise ReportfedError(f"node {name!r} has no annotated label")
            own = LabelSpace(tuple(labels[c] for c in cols))
            warn_if_all_positive(name, y[np.ix_(rows, cols)], own)
            node = Node(name, x[fit], y[np.ix_(fit, cols)], own)
            fed_nodes.append(with_templates(node, self.embed) if config.templates else node)
            masked = np.full((len(val), len(labels)), np.nan, dtype=np.float32)
            masked[:, cols] = y[np.ix_(val, cols)]
            val_rows.append(val)
            val_y.append(masked)
        result = run_federation(fed_nodes, config, progress=self.progress)
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
                "nodes": {n.name: {"rows": n.reports, "labels": list(n.labels)} for n in fed_nodes},
                "final_loss": result.history[-1]["loss"] if result.history else {},
            },
        )
        vrows = np.concatenate(val_rows)
        held_out: dict[str, dict[str, float | int | None]] = {}
        if len(vrows):
            truth = np.concatenate(val_y)[:, labels.indices(kept)]
            scores = self.predict_scores_embeddings(x[vrows])
            self.thresholds_ = f1_thresholds(truth, scores)
            held_out = _held_out(truth, scores, self.thresholds_, kept)
            if texts is not None:
                val_texts = [texts[i] for i in vrows]
                found = report_mentions(val_texts, list(kept))
                features = calibration_features(scores, found, list(kept))
                self.calibration_ = fit_calibration(features, truth)[0]
        self.provenance_["val_rows"] = len(vrows)
        self.provenance_["held_out"] = held_out
        _warn_if_untrained(result.history[-1]["loss"], self.thresholds_, kept, config)
        return self

    def _set_fitted(
        self,
        state: GlobalState,
        *,
        fingerprint: str,
        input_dim: int,
        thresholds: Sequence[float] | None,
        calibration: np.ndarray | Sequence[Sequence[float]] | None,
        provenance: dict[str, Any],
    ) -> None:
        self.state_ = state
        self.classes_ = np.array(state.labels.names, dtype=object)
        self.thresholds_ = (
            np.full(len(state.labels), 0.5) if thresholds is None else np.asarray(thresholds)
        )
        self.calibration_ = (
            identity_calibration(len(state.labels))
            if calibration is None
            else np.asarray(calibration)
        )
        self.embedder_fingerprint_ = fingerprint
        self.input_dim_ = input_dim
        self.granularity_ = check_granularity(self.granularity)
        self.provenance_ = {"reportfed": __version__, **provenance}

    @classmethod
    def from_state(
        cls,
        state: GlobalState,
        *,
        embedder: str,
        fingerprint: str,
        input_dim: int,
        config: FederationConfig,
        granularity: Granularity,
        thresholds: Sequence[float] | None = None,
        calibration: np.ndarray | None = None,
        base_url: str | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> ReportLabeler:
        """A fitted labeler around a global state trained elsewhere (e.g. by a Flower server).

        ``thresholds`` default to 0.5; ``fingerprint`` names the embedder the nodes used and
        ``granularity`` how they embedded their reports.
        """
        labeler = cls(
            embedder, granularity=granularity, base_url=base_url, config=config, progress=False
        )
        labeler._set_fitted(
            state,
            fingerprint=fingerprint,
            input_dim=input_dim,
            thresholds=thresholds,
            calibration=calibration,
            provenance=provenance or {},
        )
        return labeler

    def select_labels(self, labels: Iterable[str]) -> ReportLabeler:
        """A fitted copy predicting only ``labels`` (aliases allowed), without training: how a new
        site imports tasks from a global model."""
        self._check_fitted()
        space = LabelSpace.of(labels, allow_unknown=True)
        rows = self.state_.labels.indices(space)
        state = GlobalState(space, *node_arrays(self.state_, space))
        return ReportLabeler.from_state(
            state,
            embedder=self.embedder,
            fingerprint=self.embedder_fingerprint_,
            input_dim=self.input_dim_,
            config=self.federation,
            granularity=self.granularity_,
            thresholds=self.thresholds_[rows],
            calibration=self.calibration_[rows],
            base_url=self.base_url,
            provenance={**self.provenance_, "selected_from": list(self.classes_)},
        )

    # -- prediction --------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "state_"):
            raise ReportfedError("this ReportLabeler is not fitted: call fit() or load()")

    def predict_scores_embeddings(self, x: np.ndarray) -> np.ndarray:
        """The model's presence scores for precomputed embeddings ``x`` (no fingerprint check)."""
        self._check_fitted()
        _check_embeddings(x, self.granularity_)
        return predict_state(self.state_, x, self.federation)

    def _check_predictable(self, texts: Sequence[str]) -> None:
        """Refuse to predict before fitting, with another embedder than the model's, or on one
        string instead of a list of reports."""
        self._check_fitted()
        if self._embedder().fingerprint != self.embedder_fingerprint_:
            raise ModelFileError(
                f"embedder {self._embedder().fingerprint} differs from the model's "
                f"{self.embedder_fingerprint_}: embed with the embedder the model was trained on"
            )
        _check_texts(texts)

    def _read(self, texts: Sequence[str], *, mentions: bool = True) -> Iterator[_Reading]:
        """Embed and score ``texts`` chunk by chunk (:data:`PREDICT_CHUNK` reports, at most
        :data:`PREDICT_SENTENCES` padded sentence rows), reading each report's mentions once
        when ``mentions``."""
        self._check_predictable(texts)
        names = list(self.classes_)
        sentence = self.granularity_ == "sentence"
        for first in range(0, len(texts), PREDICT_CHUNK):
            chunk = list(texts[first : first + PREDICT_CHUNK])
            units = [report_units(t) for t in chunk] if sentence else [[t] for t in chunk]
            for lo, hi in _padded_groups([len(u) for u in units], PREDICT_SENTENCES):
                part = chunk[lo:hi]
                x = (
                    embed_units(
                        units[lo:hi],
                        self._embedder(),
                        cache_dir=self._cache_dir(),
                        progress=self.progress,
                    )
                    if sentence
                    else self.embed(part)
                )
                found = report_mentions(part, names) if mentions else []
                scores = self.predict_scores_embeddings(x)
                yield _Reading(first + lo, part, units[lo:hi], x, scores, found)

    def _proba_states(self, reading: _Reading) -> tuple[np.ndarray, np.ndarray]:
        """The calibrated probabilities and the states of one chunk, bound by one rule
        (:func:`~reportfed.text.states.consistent_proba`)."""
        names = list(self.classes_)
        x = calibration_features(reading.scores, reading.mentions, names)
        calibrated = calibrate(self.calibration_, x)
        states = chexpert_states(
            reading.texts, reading.scores, names, self.thresholds_, reading.mentions, calibrated
        )
        return consistent_proba(calibrated, states), states

    def predict_scores(self, texts: Sequence[str]) -> np.ndarray:
        """The model's presence scores ``(len(texts), len(classes_))``: the sigmoid of its logit
        (the largest over a report's sentences at sentence granularity), before calibration."""
        return self._stack([r.scores for r in self._read(texts, mentions=False)])

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Presence probabilities ``(len(texts), len(classes_))``: the model's score fused with
        the text's mentions by the calibration fitted on the validation rows
        (:mod:`reportfed.text.calibration`), on their state's side of even odds
        (:func:`~reportfed.text.states.consistent_proba`)."""
        return self._stack([self._proba_states(r)[0] for r in self._read(texts)])

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        """0/1 presence: the model's score at the stored per-label thresholds (chosen for F1 on
        the validation rows)."""
        return (self.predict_scores(texts) >= self.thresholds_).astype(np.float32)

    def predict_states(self, texts: Sequence[str]) -> np.ndarray:
        """The CheXpert labeler's four states ``(len(texts), len(classes_))``: 1 positive,
        0 mentioned and negated, -1 uncertain, NaN not mentioned (see :mod:`reportfed.text.states`)."""
        return self._stack([self._proba_states(r)[1] for r in self._read(texts)])

    def predict_evidence(
        self, texts: Sequence[str], ids: Sequence[str] | None = None
    ) -> pd.DataFrame:
        """Why each state is what it is (see :meth:`annotate`)."""
        evidence = self.annotate(texts, ids, evidence=True).evidence
        assert evidence is not None
        return evidence

    def annotate(
        self,
        texts: Sequence[str],
        ids: Sequence[str] | None = None,
        *,
        evidence: bool = True,
        first_row: int = 1,
    ) -> Annotation:
        """Probabilities, states and (with ``evidence``) evidence of ``texts`` in one pass: each
        report is embedded and read for mentions once.

        The evidence has one row per report and non-blank label, in report then label order,
        with columns :data:`EVIDENCE_COLUMNS`: the report's ``id`` (``ids``, else its
        position), its ``row`` (its place among the reports, counted from ``first_row``: two
        reports that share an id differ there), ``label``, ``state``, the calibrated
        ``probability``, the model's ``score``, the ``sentence`` that decided the state and the
        ``cue`` (negation or uncertainty words,
        the normal or abnormal word of an anatomy phrase; "" for a plain mention), and its
        ``source``: ``text`` (a mention decided), ``model`` (no mention; the model's score, its
        sentence the one max pooling took, the whole report at report granularity) or ``rule``
        (No Finding)."""
        ids = [str(i) for i in range(len(texts))] if ids is None else [str(i) for i in ids]
        if len(ids) != len(texts):
            raise ReportfedError(f"{len(ids)} ids for {len(texts)} reports")
        names = list(self.classes_)
        probas, states, rows, unreadable = [], [], [], []
        for r in self._read(texts):
            proba, state = self._proba_states(r)
            probas.append(proba)
            states.append(state)
            unreadable += [
                r.start + i
                for i, (text, found) in enumerate(zip(r.texts, r.mentions, strict=True))
                if not readable(text, found)
            ]
            if not evidence:
                continue
            top = decisive_sentences(self.state_, r.x, self.federation) if r.x.ndim == 3 else None
            for i, units in enumerate(r.units):
                for c, name in enumerate(names):
                    if np.isnan(state[i, c]):
                        continue
                    mention = r.mentions[i].get(name)
                    if mention is not None:
                        why = (mention.text, mention.cue, "text")
                    elif name == NO_FINDING:
                        why = ("", "", "rule")
                    else:
                        why = (units[int(top[i, c]) if top is not None else 0], "", "model")
                    rows.append(
                        (
                            ids[r.start + i],
                            first_row + r.start + i,
                            name,
                            float(state[i, c]),
                            float(proba[i, c]),
                            float(r.scores[i, c]),
                            *why,
                        )
                    )
        return Annotation(
            self._stack(probas),
            self._stack(states),
            pd.DataFrame(rows, columns=list(EVIDENCE_COLUMNS)) if evidence else None,
            unreadable,
        )

    def _stack(self, chunks: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(chunks) if chunks else np.zeros((0, len(self.classes_)), np.float32)

    # -- persistence -------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the model to one safetensors file (:mod:`reportfed.text.model_file`), atomically."""
        return write_model(path, self.model_file())

    def model_file(self) -> ModelFile:
        """What :meth:`save` writes: weights, labels, thresholds, calibration, embedder,
        architecture and provenance."""
        self._check_fitted()
        return ModelFile(
            state=self.state_,
            thresholds=[float(t) for t in self.thresholds_],
            calibration=self.calibration_.tolist(),
            granularity=self.granularity_,
            embedder={
                "spec": self.embedder,
                "base_url": self.base_url,
                "fingerprint": self.embedder_fingerprint_,
                "dim": self.input_dim_,
            },
            architecture=architecture(self.federation),
            provenance=self.provenance_,
        )

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        embedder: str | None = None,
        base_url: str | None = None,
        cache_dir: str | Path | None = None,
        progress: bool = True,
    ) -> ReportLabeler:
        """Load a model file. ``embedder`` overrides the stored spec (it must have the same fingerprint)."""
        model = read_model(path)
        try:
            arch = {
                name: model.architecture[name] for name in architecture_fields(FederationConfig)
            }
            arch["hidden"] = tuple(arch["hidden"])
            emb = model.embedder
            labeler = cls(
                embedder or emb["spec"],
                granularity=model.granularity,  # type: ignore[arg-type]
                base_url=base_url or emb["base_url"],
                config=FederationConfig(**arch),
                cache_dir=cache_dir,
                progress=progress,
            )
            labeler._set_fitted(
                model.state,
                fingerprint=emb["fingerprint"],
                input_dim=int(emb["dim"]),
                thresholds=model.thresholds,
                calibration=model.calibration,
                provenance=model.provenance,
            )
            global_model(labeler.state_, labeler.input_dim_, labeler.federation)  # weights fit
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise ModelFileError(f"{path}: inconsistent model metadata ({exc!r})") from None
        if embedder is not None and labeler._embedder().fingerprint != emb["fingerprint"]:
            raise ModelFileError(
                f"{path}: trained with embedder {emb['fingerprint']}, "
                f"but {embedder!r} is {labeler._embedder().fingerprint}"
            )
        return labeler


def _check_texts(texts: Sequence[str]) -> None:
    """Refuse one string where a list of reports belongs, and empty or non-string reports."""
    if isinstance(texts, str):
        raise ReportfedError("give a list of reports, not one string")
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str) or not t.strip()]
    if bad:
        raise ReportfedError(
            f"{len(bad)} empty or non-string report(s), first at position {bad[0]}"
        )


def _padded_groups(counts: Sequence[int], cells: int) -> Iterator[tuple[int, int]]:
    """Consecutive ``[lo, hi)`` runs of reports with ``counts`` sentences each whose padded size
    (reports x the run's largest count) stays within ``cells`` (a longer report runs alone)."""
    lo, widest = 0, 0
    for i, count in enumerate(counts):
        if i > lo and (i + 1 - lo) * max(widest, count) > cells:
            yield lo, i
            lo, widest = i, 0
        widest = max(widest, count)
    if lo < len(counts):
        yield lo, len(counts)


def _check_embeddings(x: np.ndarray, granularity: Granularity) -> None:
    """Refuse embeddings of the other granularity (as :meth:`ReportLabeler.embed` makes them)."""
    if x.ndim != (3 if granularity == "sentence" else 2):
        wanted = "(n, S, dim) sentence bags" if granularity == "sentence" else "(n, dim) vectors"
        raise ReportfedError(
            f"a {granularity}-level labeler takes {wanted}, got embeddings of shape {x.shape}: "
            "embed with labeler.embed(), or set granularity"
        )


def _chance_loss(config: FederationConfig) -> float:
    """At least the training loss of a model that says 0.5 everywhere: the binary cross-entropy
    ln 2 per annotated entry (at most twice that with ``balance``, where a positive weighs its
    label's negatives/positives: the weights of a label's entries average to at most 2), plus
    ``distill`` x ln 2 for the soft targets."""
    return math.log(2) * ((2 if config.balance else 1) + config.distill)


def _held_out(
    y: np.ndarray, scores: np.ndarray, thresholds: np.ndarray, labels: LabelSpace
) -> dict[str, dict[str, float | int | None]]:
    """Per label, what the held-out rows say of a fitted model: annotated rows, positives,
    AUROC, and F1 at the threshold chosen on these same rows (optimistic; None where a label
    has one class only)."""
    aucs, f1s = auroc(y, scores), f1_at(y, scores, thresholds)
    known = ~np.isnan(y)
    out: dict[str, dict[str, float | int | None]] = {}
    for c, name in enumerate(labels):
        one_class = bool(np.isnan(aucs[c]))
        out[name] = {
            "rows": int(known[:, c].sum()),
            "positives": int((y[known[:, c], c] == 1).sum()),
            "auroc": None if one_class else round(float(aucs[c]), 4),
            "f1": None if one_class else round(float(f1s[c]), 4),
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
        warnings.warn(
            f"training did not converge: the final training loss of node {worst!r} is "
            f"{stuck[worst]:.3g}, no better than a coin flip ({chance:.3f}); the learning rate "
            f"{config.lr:g} is likely too high",
            ReportfedWarning,
            stacklevel=3,
        )
    saturated = [n for n, t in zip(labels, thresholds, strict=True) if not 0 < t < 1]
    if saturated:
        warnings.warn(
            f"scores saturated at 0 or 1 on the validation rows for {saturated} (thresholds "
            f"at the end of the range); the model is overconfident, lower the learning rate "
            f"(now {config.lr:g})",
            ReportfedWarning,
            stacklevel=3,
        )
