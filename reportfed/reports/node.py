"""The node algorithm of report tables (:class:`~reportfed.core.node.NodeAlgorithm`): a site's
embedded reports and labels, trained as :class:`~reportfed.text.model.ReportMLP` rows from the global
state. The in-process engine (:func:`reportfed.reports.engine.run_federation`) and the Flower ClientApp
drive the same :class:`ReportAlgorithm`; :mod:`reportfed.reports.site` builds its node.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from reportfed.core import schema
from reportfed.core.aggregation import Arrays, GlobalState, NodeUpdate, node_arrays
from reportfed.core.config import FederationConfig, SiteSettings
from reportfed.core.errors import ReportfedError, warn
from reportfed.core.labels import LabelSpace, check_label_matrix
from reportfed.core.metrics import f1_thresholds
from reportfed.core.node import Description, Evaluation
from reportfed.core.rounds import round_seed
from reportfed.nn.arrays import load_arrays, to_arrays
from reportfed.text.assertion import FINDINGS, Mention
from reportfed.text.calibration import identity_calibration, labelling_rules
from reportfed.text.lexicon import PLAIN, Lexicon
from reportfed.text.model import ReportMLP, node_model, predict_proba
from reportfed.text.scoring import predict_state
from reportfed.text.states import other_language, read_labels
from reportfed.text.templates import lacked_negatives, template_rows
from reportfed.text.train import positive_weights, train_local


@dataclass(frozen=True)
class Reading:
    """What the text rules read in a site's reports of the labels it does not annotate: per
    label, a column over its reports (:func:`reportfed.text.states.read_labels`) and, where the
    site trains template sentences, that label's template rows already embedded (in
    :func:`~reportfed.text.templates.template_rows`' order), so that :func:`with_read` needs no
    embedder when a Flower node learns the federation's labels in its first round; ``lexicon``:
    what they were read and their templates made with."""

    columns: Mapping[str, np.ndarray] = field(default_factory=dict)
    templates: Mapping[str, np.ndarray] = field(default_factory=dict)
    lexicon: Lexicon = PLAIN


@dataclass
class Node:
    """One site's training data: embeddings ``x`` ``(n, d)`` and labels ``y`` ``(n, len(labels))``
    (NaN = not annotated); the last ``templates`` rows are template sentences, not reports
    (:mod:`reportfed.text.templates`); ``read``: what the text rules read of the labels it does
    not annotate, which :func:`with_read` trains where ``FederationConfig.read`` says so."""

    name: str
    x: np.ndarray
    y: np.ndarray
    labels: LabelSpace
    templates: int = 0
    read: Reading = field(default_factory=Reading)

    def __post_init__(self) -> None:
        check_label_matrix(self.y, len(self.x), self.labels, f"node {self.name!r}")
        for name, column in self.read.columns.items():
            if name in self.labels or column.shape != (self.reports,):
                raise ReportfedError(
                    f"node {self.name!r}: what was read of {name!r} must be a column over its "
                    f"{self.reports} reports, of a label it does not annotate"
                )

    @property
    def reports(self) -> int:
        """The node's training reports: what it reports as its examples."""
        return len(self.x) - self.templates

    def trains(self, federation: LabelSpace) -> LabelSpace:
        """The labels the node trains in a federation of ``federation``'s labels: its own, then
        those it has read (:func:`with_read`)."""
        read = tuple(name for name in federation if name in self.read.columns)
        return LabelSpace(self.labels.names + read)


def _stack(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a`` over ``b``; sentence bags are zero-padded to the wider of the two."""
    if a.ndim == 3:
        width = max(a.shape[1], b.shape[1])
        a, b = (np.pad(v, ((0, 0), (0, width - v.shape[1]), (0, 0))) for v in (a, b))
    return np.concatenate([a, b.astype(a.dtype)])


def _with_template_rows(node: Node, x: np.ndarray, y: np.ndarray) -> Node:
    """``node`` with template rows ``x`` (embedded) and ``y`` (over its labels) after its rows."""
    if not len(y):
        return node
    return replace(
        node,
        x=_stack(node.x, x),
        y=np.concatenate([node.y, y]),
        templates=node.templates + len(y),
    )


def with_templates(
    node: Node,
    embed: Callable[[Sequence[str]], np.ndarray],
    lexicon: Lexicon = PLAIN,
) -> Node:
    """``node`` with the template rows of its labels (:mod:`reportfed.text.templates`; a finding
    a hospital defined in ``lexicon`` named by its phrases) after its rows; ``embed`` turns
    texts into embeddings as the node's were made (same embedder and granularity)."""
    texts, y = template_rows(node.labels, lexicon=lexicon)
    return _with_template_rows(node, embed(texts), y) if texts else node


#: the share of a site's reports in another language above which its reading is warned about
OTHER_LANGUAGE_SHARE = 0.5


def read_lacked(
    texts: Sequence[str],
    labels: LabelSpace,
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
    site: str = "this site",
    lexicon: Lexicon = PLAIN,
) -> Reading:
    """What the text rules read with ``lexicon`` in ``texts`` (a site's reports) of every
    finding it names that ``labels`` (the site's own) lack, with each one's template rows
    embedded by ``embed``
    where given (see :func:`with_templates`). Reports in another language read as not
    annotated; warns where they are most of ``site``'s."""
    other = sum(other_language(t) for t in texts)
    if texts and other / len(texts) > OTHER_LANGUAGE_SHARE:
        warn(
            f"site {site!r}: {other} of its {len(texts)} reports are not in English, which the "
            "text rules cannot read: the labels it does not annotate are learnt from its other "
            "reports alone"
        )
    defined = lexicon.findings
    every = (*FINDINGS, *(defined.names if defined is not None else ()))
    lacked = LabelSpace(tuple(name for name in every if name not in labels))
    found = read_labels(texts, list(lacked), lexicon)
    return reading_of(lacked, found, embed, lexicon)


def reading_of(
    labels: LabelSpace,
    found: np.ndarray,
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
    lexicon: Lexicon = PLAIN,
) -> Reading:
    """The :class:`Reading` of ``labels`` whose columns ``found`` holds (one per label, over a
    site's reports, as :func:`reportfed.text.states.read_labels` gives them), with each label's
    template sentences (a finding a hospital defined in ``lexicon`` named by its phrases)
    embedded by ``embed`` where given."""
    columns = {name: found[:, c] for c, name in enumerate(labels)}
    if embed is None or not len(labels):  # a site that lacks no label has nothing to embed
        return Reading(columns, lexicon=lexicon)
    per_label = [template_rows(LabelSpace((name,)), lexicon=lexicon)[0] for name in labels]
    x = embed([t for texts in per_label for t in texts])
    ends = np.cumsum([len(texts) for texts in per_label])
    return Reading(columns, dict(zip(labels, np.split(x, ends[:-1]), strict=True)), lexicon)


def with_read(node: Node, labels: LabelSpace) -> Node:
    """``node`` also annotating the labels of ``labels`` (the federation's) that it lacks and has
    read (:attr:`Node.read`): its reports as read, its template rows, which name one other
    finding each, as negatives, and then the template rows of the labels read, where it has them
    (the ``consortium`` experiment: without them, reading lowered F1 below not reading). The
    labels it annotates itself stay first."""
    read = [str(name) for name in labels if name in node.read.columns]
    if not read:
        return node
    y = np.full((len(node.x), len(read)), 0.0, dtype=np.float32)
    for c, name in enumerate(read):
        y[: node.reports, c] = node.read.columns[name]
    rest = Reading(
        {k: v for k, v in node.read.columns.items() if k not in read},
        {k: v for k, v in node.read.templates.items() if k not in read},
        node.read.lexicon,
    )
    out = replace(
        node,
        y=np.concatenate([node.y, y], axis=1),
        labels=LabelSpace(node.labels.names + tuple(read)),
        read=rest,
    )
    stated = [name for name in read if name in node.read.templates]
    if not stated:
        return out
    _, ty = template_rows(out.labels, LabelSpace(tuple(stated)), node.read.lexicon)
    return _with_template_rows(out, np.concatenate([node.read.templates[n] for n in stated]), ty)


def initial_state(input_dim: int, labels: LabelSpace, config: FederationConfig) -> GlobalState:
    """The global model every node starts from (weights drawn from ``config.seed``)."""
    shared, task = to_arrays(node_model(input_dim, len(labels), config, seed=config.seed))
    return GlobalState(labels=labels, shared=shared, task=task)


def _with_own_labels(
    state: GlobalState, labels: LabelSpace, dim: int, config: FederationConfig
) -> GlobalState:
    """``state`` plus freshly initialised rows for the labels in ``labels`` that it lacks (a label
    a node brings into the federation)."""
    new = [name for name in labels if name not in state.labels]
    if not new:
        return state
    fresh = initial_state(dim, LabelSpace(tuple(new)), config)
    task = {k: np.concatenate([v, fresh.task[k]]) for k, v in state.task.items()}
    return GlobalState(LabelSpace(state.labels.names + tuple(new)), state.shared, task)


@dataclass
class ReportAlgorithm:
    """A report site's algorithm: training rows ``node``, the hyperparameters, the embedder's
    fingerprint, and the held-out rows (embeddings, labels, each report's mentions, for
    evaluation and calibration). Its model is kept between rounds in one process."""

    node: Node
    config: FederationConfig = field(default_factory=FederationConfig)
    fingerprint: str = "precomputed"
    val_x: np.ndarray | None = None
    val_y: np.ndarray | None = None
    val_mentions: list[dict[str, Mention | None]] = field(default_factory=list)
    settings: SiteSettings = field(default_factory=SiteSettings)
    lexicon: Lexicon = PLAIN
    _model: ReportMLP | None = field(default=None, init=False, repr=False)
    _with_read: tuple[LabelSpace, Node] | None = field(default=None, init=False, repr=False)

    @property
    def dim(self) -> int:
        """The embedding dimension."""
        return int(self.node.x.shape[-1])

    def describe(self) -> Description:
        """Name, labels, embedder fingerprint, dimension, training rows, table settings, the
        definitions of the findings the hospital defined (``findings``: JSON of
        :meth:`~reportfed.text.findings.Findings.record`), which the server holds to agree, and
        the phrasings its readers corrected (``corrections``: JSON of
        :meth:`~reportfed.text.corrections.Corrections.record`, phrasings, never reports), both
        of its lexicon."""
        settings = schema.encode(self.settings, public=True)
        if self.lexicon.findings is not None:
            settings["findings"] = json.dumps(self.lexicon.findings.record(), sort_keys=True)
        if self.lexicon.corrections:
            corrections = self.lexicon.corrections.record()
            settings["corrections"] = json.dumps(corrections, sort_keys=True)
        return Description(
            self.node.name,
            self.node.labels,
            self.fingerprint,
            self.dim,
            self.node.reports,
            settings,
        )

    def train(
        self, state: GlobalState, round_: int, index: int
    ) -> tuple[NodeUpdate, dict[str, float]]:
        """Load the node's view of ``state``, train ``local_epochs``, return its own rows.

        With ``config.read`` its own rows include the labels of ``state`` it lacks and has read
        (:func:`with_read`). The view is the shared block and the node's rows, or every row with
        ``config.distill``:
        the global model's predictions then become soft targets for the labels the node lacks on
        its reports, and its template rows, which name one finding and mention no other, are
        negatives for those labels.
        """
        config, node = self.config, self.node
        if config.read:
            node = self._reading(state.labels)
        state = _with_own_labels(state, node.labels, self.dim, config)
        head = state.labels if config.distill > 0 else node.labels
        if self._model is None or self._model.task.out_features != len(head):
            self._model = node_model(self.dim, len(head), config)
        model = self._model
        load_arrays(model, *node_arrays(state, head))
        x = torch.from_numpy(node.x)
        own = head.indices(node.labels)
        y, soft = node.y, None
        if config.distill > 0:
            y = np.full((len(node.x), len(head)), np.nan, dtype=np.float32)
            y[:, own] = node.y
            y[node.reports :, lacked_negatives(head, node.labels)] = 0.0
            soft = predict_proba(model, x)
            soft[:, own] = np.nan
            soft[node.reports :] = np.nan
        loss = train_local(
            model,
            x,
            torch.from_numpy(y),
            epochs=config.local_epochs,
            lr=config.node_lr.get(node.name, config.lr),
            batch_size=config.batch_size,
            seed=round_seed(config.seed, round_, index),
            soft=None if soft is None else torch.from_numpy(soft),
            distill=config.distill,
            weight_decay=config.weight_decay,
            pos_weight=torch.from_numpy(positive_weights(y)) if config.balance else None,
            prox=config.prox,
        )
        shared, task = to_arrays(model)
        task = {k: v[own] for k, v in task.items()}
        update = NodeUpdate(node.name, node.labels, shared, task, num_examples=node.reports)
        return update, {"loss": loss}

    def evaluate(self, state: GlobalState) -> Evaluation:
        """AUROC inputs of the global rows on the held-out rows, and what the node would label
        with (:func:`~reportfed.text.calibration.labelling_rules`, on the labelling forward pass
        :func:`~reportfed.text.scoring.predict_state`): thresholds from every report the node
        annotates, training and held-out, and the calibration fitted on the held-out ones. With
        ``config.read``, the labels of ``state`` it reads have thresholds too, best F1 on its
        training reports as read, and each threshold comes with the positives it rests on,
        which the server averages the nodes' thresholds by (the rule of
        :func:`~reportfed.core.metrics.site_thresholds`); without, the server weighs them by
        the held-out rows."""
        if self.val_x is None or self.val_y is None:
            raise ReportfedError(f"node {self.node.name!r} holds no rows out for evaluation")
        labels = [name for name in state.labels if name in self.node.labels]
        own, cols = self.node.labels.indices(labels), state.labels.indices(labels)
        y = self.val_y[:, own]
        val_p = predict_state(state, self.val_x)
        p = val_p[:, cols]
        reports = self.node.reports  # the template rows after them are not the node's reports
        fit_p = predict_state(state, self.node.x[:reports])
        known = np.concatenate([self.node.y[:reports, own], y])
        thresholds, calibration = labelling_rules(
            known,
            np.concatenate([fit_p[:, cols], p]),
            np.arange(reports, reports + len(y)),
            self.val_mentions,
            labels,
        )
        if not self.config.read:  # the server weighs its thresholds by its held-out rows
            return Evaluation(labels, y, p, calibration, thresholds)
        weights = (known == 1).sum(axis=0)
        reading = self._reading(state.labels)
        read = [name for name in reading.labels.names if name not in self.node.labels]
        if not read:
            return Evaluation(labels, y, p, calibration, thresholds, weights)
        read_y = reading.y[:reports, reading.labels.indices(read)]
        read_p = fit_p[:, state.labels.indices(read)]
        if calibration is not None:
            coefficients, fitted = calibration
            calibration = (
                np.concatenate([coefficients, identity_calibration(len(read))]),
                np.concatenate([fitted, np.zeros(len(read), dtype=fitted.dtype)]),
            )
        return Evaluation(
            labels + read,
            np.concatenate([y, np.full((len(y), len(read)), np.nan, dtype=y.dtype)], axis=1),
            np.concatenate([p, val_p[:, state.labels.indices(read)]], axis=1),
            calibration,
            np.concatenate([thresholds, f1_thresholds(read_y, read_p)]),
            np.concatenate([weights, (read_y == 1).sum(axis=0)]),
        )

    def _reading(self, labels: LabelSpace) -> Node:
        """The node also annotating the labels of ``labels`` it reads (:func:`with_read`),
        prepared once for a federation's labels."""
        if self._with_read is None or self._with_read[0] != labels:
            self._with_read = (labels, with_read(self.node, labels))
        return self._with_read[1]

    def local_arrays(self) -> Arrays:
        """Nothing stays on a report node but its data."""
        return {}

    def restore(self, local: Arrays) -> None:
        """Nothing to restore."""
