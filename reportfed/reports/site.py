"""A site's rows made into its node: the one builder of the in-process labeler
(:meth:`reportfed.labeler.ReportLabeler.fit_embeddings`), the Flower node
(:func:`load_report_node`) and the experiments (:func:`experiments.baselines.method_nodes`).

A site draws its held-out rows from its own generator
(:func:`~reportfed.data.partition.validation_split`), as a Flower node that knows only its own
rows must; its node holds its training rows, the template rows of its labels and what the text
rules read of the labels it lacks (:class:`~reportfed.reports.node.Reading`), which the node
trains once it knows the federation's labels (:func:`~reportfed.reports.node.with_read`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from reportfed.core import schema
from reportfed.core.aggregation import Arrays
from reportfed.core.config import FederationConfig, NodeSettings, RunSettings
from reportfed.core.errors import ReportfedError
from reportfed.core.labels import LabelSpace, warn_if_all_positive
from reportfed.data.partition import validation_split
from reportfed.reports.node import (
    Node,
    Reading,
    ReportAlgorithm,
    initial_state,
    read_lacked,
    with_templates,
)
from reportfed.text.lexicon import PLAIN, Lexicon

Embed = Callable[[Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class Site:
    """A site built for training: its ``node`` (training rows, template rows, reading) and which
    of its rows it trains on (``fit``) and holds out (``val``)."""

    node: Node
    fit: np.ndarray
    val: np.ndarray


def build_site(
    name: str,
    x: np.ndarray,
    y: np.ndarray,
    labels: LabelSpace,
    config: FederationConfig,
    *,
    split: float | tuple[np.ndarray, np.ndarray],
    embed: Embed | None = None,
    texts: Sequence[str] | None = None,
    reading: Reading | None = None,
    lexicon: Lexicon = PLAIN,
) -> Site:
    """Site ``name`` of embedded rows ``x`` with labels ``y`` over ``labels`` (NaN = not
    annotated), made into its node as ``config`` says; the node's labels are in reportfed's
    order (:meth:`~reportfed.core.labels.LabelSpace.union`), whatever the order of ``labels``.

    ``split`` is the share of rows held out (:func:`~reportfed.data.partition.validation_split`
    with ``config.seed``) or the (training, held-out) rows themselves (the experiments' protocol
    draws them). ``embed`` embeds sentences as ``x`` was embedded, for the template rows
    (``config.templates``). Where
    ``config.read``, the node carries what the text rules read with ``lexicon`` of the labels it
    lacks: read in ``texts`` (every row's report) or given as ``reading`` (read once
    elsewhere); with neither, it reads nothing.
    """
    if isinstance(split, tuple):
        fit, val = split
    else:
        fit, val = validation_split(len(x), split, config.seed)
    if not len(fit):
        raise ReportfedError(f"site {name!r} has no training rows left after holding some out")
    order = LabelSpace.union([labels])  # a table's column order is not the node's
    node = Node(name, x[fit], y[np.ix_(fit, labels.indices(order))], order)
    template_embed = embed if config.templates else None
    if config.templates and embed is None:
        raise ReportfedError(f"site {name!r}: template rows need an embedder")
    if config.read:
        if reading is None and texts is not None:
            reading = read_lacked(
                [texts[i] for i in fit],
                order,
                template_embed,
                site=name,
                lexicon=lexicon,
            )
        if reading is not None:
            node = replace(node, read=reading)
    if template_embed is not None:
        node = with_templates(node, template_embed, lexicon)
    return Site(node, fit, val)


def load_report_node(
    settings: NodeSettings, config: FederationConfig, run: RunSettings = RunSettings()
) -> ReportAlgorithm:
    """Read, embed (through the node's cache) and build (:func:`build_site`) a node's reports
    table.

    The node's labels are the label columns with at least one annotated row; empty settings take
    reportfed's defaults (name: the table's stem; the embedder; the cache directory). The node
    embeds with its own embedder alone, never one a run names: a run that declares another is
    refused before the table is read (:func:`check_run_embedder`), and the node's text and
    weights stay on its machine unless its own ``allow_remote`` setting says otherwise. The
    phrasings a reader corrected in the table (a review page's download) are learnt
    (:mod:`reportfed.text.corrections`) and sent to the server with the node's description.
    """
    from reportfed.core.paths import embeddings_cache_dir
    from reportfed.data.table import read_table
    from reportfed.embed import make_embedder
    from reportfed.embed.granularity import embed_reports
    from reportfed.text.corrections import learn
    from reportfed.text.findings import read_findings
    from reportfed.text.states import report_mentions

    if not settings.data:
        raise ReportfedError("node config has no 'data' (the path of this node's reports table)")
    own = check_run_embedder(settings, run)
    data = settings.data
    name = settings.name or Path(data).stem
    findings = read_findings(settings.findings) if settings.findings else None
    table = read_table(
        data,
        aliases=findings.columns() if findings is not None else None,
        uncertain=settings.uncertain,
        blank=settings.blank,
        require_labels=True,
    )
    annotated = ~np.isnan(table.labels).all(axis=0)
    if not annotated.any():
        raise ReportfedError(f"{data}: no label column has an annotated row")
    table = table.select_labels(
        LabelSpace(tuple(n for n, kept in zip(table.label_space, annotated, strict=True) if kept))
    )
    warn_if_all_positive(name, table.labels, table.label_space)
    lexicon = Lexicon(findings)
    lexicon = Lexicon(findings, learn(table.texts, table.ids, table.corrected, lexicon, data))
    embedder = make_embedder(
        own, base_url=settings.base_url or None, remote=settings.allow_remote_embedder
    )
    embed = partial(
        embed_reports,
        embedder=embedder,
        granularity=run.granularity,
        cache_dir=settings.cache_dir or embeddings_cache_dir(),
        progress=False,
    )
    x = embed(table.texts)
    site = build_site(
        name,
        x,
        table.labels,
        table.label_space,
        config,
        split=settings.val_fraction,
        embed=embed,
        texts=table.texts,
        lexicon=lexicon,
    )
    return ReportAlgorithm(
        site.node,
        config,
        embedder.fingerprint,
        x[site.val],
        table.labels[site.val],
        report_mentions([table.texts[i] for i in site.val], list(table.label_space), lexicon),
        settings,
        lexicon,
    )


def check_run_embedder(settings: NodeSettings, run: RunSettings) -> str:
    """The node's own embedder spec (its setting, else reportfed's default); a
    :class:`ReportfedError` naming both where the run declares another: what a node embeds with,
    and so where its text may go, is the node's to decide."""
    from reportfed.embed import DEFAULT_EMBEDDER
    from reportfed.embed.weights import same_embedder

    own = settings.embedder or DEFAULT_EMBEDDER
    if run.embedder and not same_embedder(own, run.embedder):
        raise ReportfedError(
            f"this node embeds with {own!r} and the run declares {run.embedder!r}: a node embeds "
            "only with its own embedder (federation node --embedder), so it refuses the run"
        )
    return own


class _Reports:
    """The modality of report tables."""

    name = "reports"
    config_class = FederationConfig

    def initial_arrays(
        self, config: FederationConfig, dim: int, labels: LabelSpace
    ) -> tuple[Arrays, Arrays]:
        state = initial_state(dim, labels, config)
        return state.shared, state.task

    def model_input(self, run: RunSettings) -> tuple[str, str]:
        return run.granularity, run.embedder

    def space(self, config: FederationConfig, run: RunSettings) -> tuple[str, int]:
        from reportfed.core.errors import ConfigError, EmbeddingError
        from reportfed.embed.weights import declared_space

        if run.fingerprint and run.dim:
            return run.fingerprint, run.dim
        try:
            fingerprint, dim = declared_space(run.embedder)
        except EmbeddingError as exc:
            raise ConfigError(
                f"the server reads the nodes' vector space from the run's embedder, and {exc}: "
                "declare it with --fingerprint and --dim"
            ) from None
        return run.fingerprint or fingerprint, run.dim or dim

    def node(
        self, settings: NodeSettings, config: FederationConfig, run: Mapping[str, Any]
    ) -> ReportAlgorithm:
        return load_report_node(settings, config, schema.decode(RunSettings, run))


REPORTS = _Reports()
