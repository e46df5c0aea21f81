"""Template sentences that state and that negate each label, which a node trains on beside its
reports (``FederationConfig.templates``).

When sites label different findings, a rare finding is learned by the one site that labels it,
from the handful of its reports that state it. Three sentences stating the finding ("There is
pneumothorax.") and three negating it ("No evidence of pneumothorax.") teach its head what a
stated and a negated mention read like. The ``beyond`` experiment measures the gain
(docs/experiments.md). The sentences are built from the label's name, the same for every
label: no per-finding phrase lists. "No Finding" gets none, since its name is already a negation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from reportfed.labels import LabelSpace

if TYPE_CHECKING:
    from reportfed.report_node import Node

#: sentences that state a finding, ``{}`` its name
STATING = ("{}.", "There is {}.", "Findings consistent with {}.")
#: sentences that negate it
NEGATING = ("No {}.", "No evidence of {}.", "There is no {}.")
#: labels without templates: the name is a negation itself
UNSTATED = frozenset({"No Finding"})


def template_rows(labels: LabelSpace) -> tuple[list[str], np.ndarray]:
    """The template sentences of every label of ``labels`` and their labels over ``labels``:
    1 for the label a stating sentence names, 0 for every other entry."""
    texts: list[str] = []
    rows: list[np.ndarray] = []
    for j, name in enumerate(labels):
        if name in UNSTATED:
            continue
        finding = name.lower()
        for patterns, value in ((STATING, 1.0), (NEGATING, 0.0)):
            for pattern in patterns:
                sentence = pattern.format(finding)
                texts.append(sentence[0].upper() + sentence[1:])
                row = np.zeros(len(labels), dtype=np.float32)
                row[j] = value
                rows.append(row)
    return texts, np.array(rows, dtype=np.float32).reshape(len(rows), len(labels))


def _stack(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a`` over ``b``; sentence bags are zero-padded to the wider of the two."""
    if a.ndim == 3:
        width = max(a.shape[1], b.shape[1])
        a, b = (np.pad(v, ((0, 0), (0, width - v.shape[1]), (0, 0))) for v in (a, b))
    return np.concatenate([a, b.astype(a.dtype)])


def with_templates(node: Node, embed: Callable[[Sequence[str]], np.ndarray]) -> Node:
    """``node`` with the template rows of its labels after its reports; ``embed`` turns texts
    into embeddings as the node's were made (same embedder and granularity)."""
    texts, y = template_rows(node.labels)
    if not texts:
        return node
    return replace(
        node,
        x=_stack(node.x, embed(texts)),
        y=np.concatenate([node.y, y]),
        templates=node.templates + len(texts),
    )
