"""What a node reads from its own disk: its reports table, embedded through its own cache, split
into training rows and held-out rows (for evaluation and thresholds). No text leaves the node.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reportfed.assertion import Mention
from reportfed.data.partition import split_rows
from reportfed.data.table import Blank, Uncertain, read_reports
from reportfed.embed import DEFAULT_EMBEDDER, make_embedder
from reportfed.embed.granularity import embed_reports
from reportfed.errors import ReportfedError
from reportfed.engine import Node
from reportfed.labels import LabelSpace, warn_if_all_positive
from reportfed.sentences import Granularity
from reportfed.states import report_mentions


@dataclass
class NodeData:
    """A node's training data (``node``), held-out rows (embeddings, labels and the mentions
    of each held-out report, for calibration) and embedder fingerprint."""

    node: Node
    val_x: np.ndarray
    val_y: np.ndarray
    val_mentions: list[dict[str, Mention | None]]
    fingerprint: str


def load_node_data(
    data: str | Path,
    *,
    name: str,
    embedder: str = DEFAULT_EMBEDDER,
    base_url: str | None = None,
    granularity: Granularity = "sentence",
    cache_dir: str | Path | None = None,
    val_fraction: float = 0.1,
    seed: int = 0,
    uncertain: Uncertain = "zeros",
    blank: Blank = "negative",
) -> NodeData:
    """Read, embed and split a node's reports table (label columns in any vocabulary).

    The node's labels are the label columns with at least one annotated row; ``granularity``
    is the run's (:mod:`reportfed.embed.granularity`).
    """
    table = read_reports(data, uncertain=uncertain, blank=blank, require_labels=True)
    annotated = ~np.isnan(table.labels).all(axis=0)
    if not annotated.any():
        raise ReportfedError(f"{data}: no label column has an annotated row")
    table = table.select_labels(LabelSpace(tuple(np.array(table.label_space.names)[annotated])))
    warn_if_all_positive(name, table.labels, table.label_space)
    emb = make_embedder(embedder, base_url=base_url)
    x = embed_reports(
        table.texts, emb, granularity=granularity, cache_dir=cache_dir, progress=False
    )
    fit, val = split_rows(len(table), val_fraction, np.random.default_rng(seed))
    if not len(fit):
        raise ReportfedError(f"{data}: no training rows left after holding out {val_fraction:.0%}")
    node = Node(name, x[fit], table.labels[fit], table.label_space)
    mentions = report_mentions([table.texts[i] for i in val], list(table.label_space))
    return NodeData(node, x[val], table.labels[val], mentions, emb.fingerprint)
