"""``ReportReader``: a trained report labeler reading reports: presence scores, calibrated
probabilities, the CheXpert labeler's four states and the evidence behind them, and the model
file that holds it.

It is :class:`~reportfed.labeler.ReportLabeler` without training: ``reportfed label`` loads
models with it, so labelling imports neither torch nor scikit-learn (about 2.5 s of every start;
the model's forward pass runs in NumPy, :mod:`reportfed.text.scoring`). ``ReportLabeler`` adds
``fit`` and scikit-learn's estimator contract; a model either of them saves, both load.

A model file (safetensors) holds everything needed to use it: label names in order, the embedder
spec and fingerprint, architecture, weights, per-label thresholds and training provenance. Loading
it with an embedder of another fingerprint is an error, not a silently wrong answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import numpy as np
import pandas as pd

from reportfed import __version__
from reportfed.core.aggregation import GlobalState, node_arrays
from reportfed.core.config import FederationConfig, Granularity
from reportfed.core.errors import ModelFileError, ReportfedError
from reportfed.core.labels import LabelSpace
from reportfed.core.paths import embeddings_cache_dir
from reportfed.core.schema import architecture, architecture_fields
from reportfed.data.table import REPORT_CHUNK
from reportfed.embed import DEFAULT_EMBEDDER, Embedder, shared_embedder
from reportfed.embed.granularity import embed_reports, embed_units
from reportfed.text.assertion import Mention, find_mentions, names_finding
from reportfed.text.calibration import calibrate, calibration_features, identity_calibration
from reportfed.text.corrections import Corrections
from reportfed.text.findings import Findings
from reportfed.text.lexicon import Lexicon
from reportfed.text.model_file import ModelFile, read_model, write_model
from reportfed.text.scoring import check_architecture, decisive_sentences, predict_state
from reportfed.text.sentences import check_granularity, other_language_sentences, report_units
from reportfed.text.states import (
    NO_FINDING,
    chexpert_states,
    consistent_proba,
    readable,
    report_mentions,
    unmentioned_candidates,
)

#: reports embedded and scored at once by :meth:`ReportReader.predict_proba` (bounds memory)
PREDICT_CHUNK = 2048
#: the most sentence rows scored at once (reports x the most sentences one of them has): a long
#: report is scored apart from short ones instead of padding every one to its length
PREDICT_SENTENCES = PREDICT_CHUNK * 64
#: the columns of :meth:`ReportReader.predict_evidence` (and of ``reportfed label --evidence``)
EVIDENCE_COLUMNS = (
    "id", "row", "label", "state", "probability", "score", "sentence", "cue", "source"
)  # fmt: skip


@dataclass(frozen=True)
class _ScoredChunk:
    """One chunk of reports read: embeddings, the model's scores and the decisive mentions."""

    start: int
    texts: list[str]
    units: list[list[str]]
    x: np.ndarray
    scores: np.ndarray
    mentions: list[dict[str, Mention | None]]


@dataclass(frozen=True)
class Annotation:
    """What :meth:`ReportReader.annotate` gives: calibrated ``proba``, ``states``, (when
    asked for) the ``evidence`` table, the positions of the reports the labeler cannot read
    (``unreadable``: only section headers, or another language; no state, not No Finding), and
    of those it reads that hold sentences in another language, which it leaves out, with the
    first of them (``other_language``: "Pas de pneumothorax.")."""

    proba: np.ndarray
    states: np.ndarray
    evidence: pd.DataFrame | None
    unreadable: list[int]
    other_language: list[tuple[int, str]] = field(default_factory=list)


class ReportReader:
    """A trained report labeler that reads reports (load one with :meth:`load`).

    Parameters (as :class:`~reportfed.labeler.ReportLabeler`'s): ``embedder`` spec,
    ``granularity`` (``"sentence"`` or ``"report"``), ``base_url`` of an ``openai:`` embedder,
    ``config`` (the architecture; ``None``: the defaults), embedding ``cache_dir`` and ``cache``,
    ``progress`` bars, and how a local embedder computes: ``backend`` and ``precision``
    (``None``: :func:`reportfed.embed.numerics`, the user's settings, else ``auto``).

    Attributes once loaded or fitted: ``classes_`` (label names), ``thresholds_`` (on the
    model's scores), ``calibration_`` (:mod:`reportfed.text.calibration`), ``state_`` (global
    weights), ``embedder_fingerprint_``, ``input_dim_``, ``provenance_``, and ``findings_``:
    the findings the hospital defined that the model was trained with (its provenance keeps
    them, :mod:`reportfed.text.findings`; ``None``: none), read as the lexicon's, and
    ``corrections_``: the phrasings its readers corrected, read as corrected
    (:mod:`reportfed.text.corrections`); ``lexicon_`` holds both beside the built-in lexicon
    (:class:`~reportfed.text.lexicon.Lexicon`), what its text rules read with.
    """

    def __init__(
        self,
        embedder: str = DEFAULT_EMBEDDER,
        *,
        granularity: Granularity = "sentence",
        base_url: str | None = None,
        config: FederationConfig | None = None,
        cache_dir: str | Path | None = None,
        cache: bool = True,
        progress: bool = True,
        backend: str | None = None,
        precision: str | None = None,
    ) -> None:
        self.embedder = embedder
        self.granularity = granularity
        self.base_url = base_url
        self.config = config
        self.cache_dir = cache_dir
        self.cache = cache
        self.progress = progress
        self.backend = backend
        self.precision = precision

    @property
    def federation(self) -> FederationConfig:
        """The hyperparameters in force: ``config``, else the defaults."""
        return self.config if self.config is not None else FederationConfig()

    # -- embedding ---------------------------------------------------------------------------
    def _embedder(self) -> Embedder:
        return shared_embedder(
            self.embedder, self.base_url, backend=self.backend, precision=self.precision
        )

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

    # -- a fitted model ----------------------------------------------------------------------
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
        record = provenance.get("findings")
        self.findings_ = None if record is None else Findings.from_record(record)
        self.corrections_ = Corrections.from_record(provenance.get("corrections", []))
        self.lexicon_ = Lexicon(self.findings_, self.corrections_)

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
    ) -> Self:
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

    def select_labels(self, labels: Iterable[str]) -> Self:
        """A fitted copy predicting only ``labels`` (aliases allowed), without training: how a new
        site imports tasks from a global model."""
        self._check_fitted()
        space = LabelSpace.of(labels, allow_unknown=True)
        rows = self.state_.labels.indices(space)
        state = GlobalState(space, *node_arrays(self.state_, space))
        return type(self).from_state(
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
            raise ReportfedError("this ReportReader holds no model: ReportReader.load(path)")

    def predict_scores_embeddings(self, x: np.ndarray) -> np.ndarray:
        """The model's presence scores for precomputed embeddings ``x`` (no fingerprint check)."""
        self._check_fitted()
        _check_embeddings(x, self.granularity_)
        return predict_state(self.state_, x)

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

    def _read(self, texts: Sequence[str], *, mentions: bool = True) -> Iterator[_ScoredChunk]:
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
                found = report_mentions(part, names, self.lexicon_) if mentions else []
                scores = self.predict_scores_embeddings(x)
                yield _ScoredChunk(first + lo, part, units[lo:hi], x, scores, found)

    def _proba_states(self, reading: _ScoredChunk) -> tuple[np.ndarray, np.ndarray]:
        """The calibrated probabilities and the states of one chunk, bound by one rule
        (:func:`~reportfed.text.states.consistent_proba`)."""
        names = list(self.classes_)
        x = calibration_features(reading.scores, reading.mentions, names)
        calibrated = calibrate(self.calibration_, x)
        inferred, set_aside = self._model_sentences(reading)
        states = chexpert_states(
            reading.texts,
            reading.scores,
            names,
            self.thresholds_,
            reading.mentions,
            calibrated,
            inferred,
            self.lexicon_,
            set_aside,
        )
        return consistent_proba(calibrated, states), states

    def _model_sentences(self, reading: _ScoredChunk) -> tuple[np.ndarray | None, np.ndarray]:
        """Of the cells the model might call alone (:func:`unmentioned_candidates`): those whose
        score comes from a sentence naming other findings (``None`` at report granularity, where
        the score is the whole report's), and those whose sentence (the report, at report
        granularity) names the finding in words the rules read as no mention of it
        (:func:`~reportfed.text.assertion.names_finding`)."""
        names = list(self.classes_)
        candidates = unmentioned_candidates(
            reading.scores, names, self.thresholds_, reading.mentions, self.lexicon_
        )
        sentences = reading.x.ndim == 3
        inferred, set_aside = np.zeros_like(candidates), np.zeros_like(candidates)
        rows = np.flatnonzero(candidates.any(axis=1))
        top = decisive_sentences(self.state_, reading.x[rows]) if sentences and rows.size else None
        for k, i in enumerate(rows):
            for c in np.flatnonzero(candidates[i]):
                said = reading.texts[i] if top is None else reading.units[i][top[k, c]]
                if top is not None:
                    inferred[i, c] = bool(find_mentions(said, None, self.lexicon_))
                set_aside[i, c] = names_finding(said, names[c], self.lexicon_)
        return (inferred if sentences else None), set_aside

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
        """0/1 presence: the model's score at the stored per-label thresholds (chosen on every
        row of the fit, :func:`~reportfed.text.calibration.labelling_thresholds`; the held-out
        quality in the provenance is measured at thresholds the held-out rows did not
        choose)."""
        return (self.predict_scores(texts) >= self.thresholds_).astype(np.float32)

    def predict_states(self, texts: Sequence[str]) -> np.ndarray:
        """The CheXpert labeler's four states ``(len(texts), len(classes_))``: 1 positive,
        0 mentioned and negated, -1 uncertain, NaN not mentioned (see :mod:`reportfed.text.states`)."""
        return self._stack([self._proba_states(r)[1] for r in self._read(texts)])

    def label_dataset(
        self,
        dataset: Any,
        *,
        text_column: str | None = None,
        prefix: str = "",
        num_proc: int | None = None,
        batch_size: int = REPORT_CHUNK,
    ) -> Any:
        """A Hugging Face ``Dataset`` (or each split of a ``DatasetDict``) with one float32
        column per finding of ``classes_`` (``prefix`` before its name) after its own: the
        states :meth:`predict_states` gives (null: not mentioned; a report without a word has
        none), through ``Dataset.map(batched=True)``, read from the dataset's memory-mapped
        files ``batch_size`` reports at a time. ``num_proc``: in that many processes, each
        loading the embedder once. An ``IterableDataset`` (streamed) is labelled as it is
        read. The report column is found as in a table (``text_column``
        when ambiguous). Needs ``pip install "reportfed[datasets]"``."""
        from reportfed.data.hf import is_dict, labelled

        if is_dict(dataset):
            return type(dataset)(
                {
                    name: labelled(self, part, text_column, prefix, num_proc, batch_size)
                    for name, part in dataset.items()
                }
            )
        return labelled(self, dataset, text_column, prefix, num_proc, batch_size)

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
        ``source``: ``text`` (a mention decided), ``correction`` (a mention whose phrasing the
        hospital corrected, :mod:`reportfed.text.corrections`), ``model`` (no mention; the model's score, its
        sentence the one max pooling took, the whole report at report granularity) or ``rule``
        (No Finding)."""
        ids = [str(i) for i in range(len(texts))] if ids is None else [str(i) for i in ids]
        if len(ids) != len(texts):
            raise ReportfedError(f"{len(ids)} ids for {len(texts)} reports")
        names = list(self.classes_)
        probas, states, rows, unreadable = [], [], [], []
        other_language: list[tuple[int, str]] = []
        for r in self._read(texts):
            proba, state = self._proba_states(r)
            probas.append(proba)
            states.append(state)
            for i, (text, found) in enumerate(zip(r.texts, r.mentions, strict=True)):
                if not readable(text, found):
                    unreadable.append(r.start + i)
                elif foreign := other_language_sentences(text):
                    other_language.append((r.start + i, foreign[0]))
            if not evidence:
                continue
            top = decisive_sentences(self.state_, r.x) if r.x.ndim == 3 else None
            for i, units in enumerate(r.units):
                for c, name in enumerate(names):
                    if np.isnan(state[i, c]):
                        continue
                    mention = r.mentions[i].get(name)
                    if mention is not None:
                        source = "correction" if mention.corrected else "text"
                        why = (mention.text, mention.cue, source)
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
            other_language,
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
        backend: str | None = None,
        precision: str | None = None,
    ) -> Self:
        """Load a model file. ``embedder`` overrides the stored spec (it must have the same
        fingerprint); ``backend`` and ``precision`` say how a local embedder computes."""
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
                backend=backend,
                precision=precision,
            )
            labeler._set_fitted(
                model.state,
                fingerprint=emb["fingerprint"],
                input_dim=int(emb["dim"]),
                thresholds=model.thresholds,
                calibration=model.calibration,
                provenance=model.provenance,
            )
            check_architecture(labeler.state_, labeler.input_dim_, labeler.federation)
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
