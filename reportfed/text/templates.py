"""Template sentences that state and that negate each label, which a node trains on beside its
reports (``FederationConfig.templates``; :func:`reportfed.reports.node.with_templates` adds them).

When sites label different findings, a rare finding is learned by the one site that labels it,
from the handful of its reports that state it. Three sentences stating the finding ("There is
pneumothorax.") and three negating it ("No evidence of pneumothorax.") teach its head what a
stated and a negated mention read like. The ``beyond`` experiment measures the gain
(docs/experiments.md). The sentences are built from the label's name, the same patterns for
every label. Five CheXpert labels are categories whose names reports do not write ("Enlarged
Cardiomediastinum", "Pleural Other"...); each of those is named by the phrases in ``NAMES``, which
say what the category means, instead; a finding a hospital defines is named by its phrases
(:mod:`reportfed.text.findings`). "No Finding" gets none, since its name is a negation.
"""

from __future__ import annotations

from itertools import product

import numpy as np

from reportfed.core.labels import LabelSpace
from reportfed.text.lexicon import PLAIN, Lexicon

#: sentences that state a finding, ``{}`` its name
STATING = ("{}.", "There is {}.", "Findings consistent with {}.")
#: sentences that negate it
NEGATING = ("No {}.", "No evidence of {}.", "There is no {}.")
#: labels without templates: the name is a negation itself
UNSTATED = frozenset({"No Finding"})
#: the phrases that name a label whose name is a category reports do not write (what the
#: CheXpert category means, in words radiologists use); every other label is named by its name
NAMES: dict[str, tuple[str, ...]] = {
    "Enlarged Cardiomediastinum": (
        "enlarged cardiomediastinum",
        "widened mediastinum",
        "enlarged cardiomediastinal silhouette",
    ),
    "Lung Lesion": ("lung lesion", "pulmonary nodule", "lung mass"),
    "Lung Opacity": ("lung opacity", "airspace opacity"),
    "Pleural Other": ("pleural thickening", "pleural scarring"),
    "Support Devices": ("support device", "catheter", "pacemaker"),
}


#: the most phrases of a hospital's finding that its template sentences use
DEFINED_NAMES = 3


def names(label: str, lexicon: Lexicon = PLAIN) -> tuple[str, ...]:
    """The phrases template sentences use for ``label``: ``NAMES``'s; for a finding a hospital
    defined (in ``lexicon``) its first :data:`DEFINED_NAMES` phrases; else its name."""
    findings = lexicon.findings
    if findings is not None and label in findings:
        phrases = findings.finding(label).phrases[:DEFINED_NAMES]
        if phrases:
            return tuple(" ".join(p.lower().split()) for p in phrases)
    return NAMES.get(label, (label.lower(),))


def template_rows(
    labels: LabelSpace, of: LabelSpace | None = None, lexicon: Lexicon = PLAIN
) -> tuple[list[str], np.ndarray]:
    """The template sentences of every label of ``of`` (default: of ``labels``) and their labels
    over ``labels``: 1 for the label a stating sentence names, 0 for every other entry but the
    ``UNSTATED`` labels of a negating sentence, which are not annotated (NaN): "No pneumothorax."
    does not say whether anything else was found. A finding a hospital defined is named by its
    phrases (:func:`names`)."""
    unstated = [j for j, name in enumerate(labels) if name in UNSTATED]
    texts: list[str] = []
    rows: list[np.ndarray] = []
    for j, name in enumerate(labels):
        if name in UNSTATED or (of is not None and name not in of):
            continue
        for (patterns, value), finding in product(
            ((STATING, 1.0), (NEGATING, 0.0)), names(name, lexicon)
        ):
            for pattern in patterns:
                sentence = pattern.format(finding)
                texts.append(sentence[0].upper() + sentence[1:])
                row = np.zeros(len(labels), dtype=np.float32)
                row[j] = value
                if not value:
                    row[unstated] = np.nan
                rows.append(row)
    return texts, np.array(rows, dtype=np.float32).reshape(len(rows), len(labels))


def lacked_negatives(head: LabelSpace, own: LabelSpace) -> list[int]:
    """The columns of ``head`` that template rows of ``own`` labels are negatives for beyond
    ``own`` (under distill a node's head holds labels it lacks): each template sentence names
    one finding and mentions no other, so every lacked label but the ``UNSTATED`` ones."""
    return [j for j, name in enumerate(head) if name not in own and name not in UNSTATED]
