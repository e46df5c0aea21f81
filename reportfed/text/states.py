"""The CheXpert labeler's four output states from presence probabilities and mentions.

Per report and finding, with ``p`` the model's presence probability, ``t`` the label's labelling
threshold and the report's assertion for the label (:mod:`reportfed.text.assertion`):

==========================  =====================
assertion                   state
==========================  =====================
negated ("no effusion")     0.0
uncertain ("possible ...")  -1.0
affirmed ("effusion")       1.0
not mentioned               1.0 if ``p >= max(t, 0.5)`` and ``q >= 0.5`` (``q >= 0.75``
                            from a sentence that names other findings), else blank (NaN)
==========================  =====================

``q`` is the calibrated probability (:mod:`reportfed.text.calibration`), the one users read. One
rule ties it to the state (:func:`consistent_proba`): a state 1 never has ``q < 0.5`` and a state
0 never has ``q > 0.5``. The model calls a finding the text does not mention only where the
calibrated probability says so too; where the text decides against the calibration (an
affirmed mention the calibration scores below even odds, which happens when it was fitted on a
few validation rows), the reported probability is moved to 0.5, the state's side of even odds.

An explicit negation or hedge in the text wins over the model; the model calls findings that the
lexicon does not know how to name, when it gives them at least even odds
(:data:`UNMENTIONED_FLOOR`; measured on IU, central, seeds 0-2: macro F1 0.817 against 0.800
with the labelling threshold alone, and 0.83% of unmentioned findings called positive against
1.15%). Where the sentence behind the model's score names other findings, the text has read
it, and what the model adds is an inference the CheXpert labeler does not make (Lung Opacity
from "consolidation, possibly representing pneumonia", a device from "small left PTX",
Cardiomegaly from "widened mediastinum"): such a call needs :data:`INFERRED_MARGIN`. The model
never reads a context section (:func:`~reportfed.text.sentences.report_units`). A label without
a lexicon (a custom label) has two states: 1.0 at ``p >= t``, else 0.0. **No Finding** follows
the CheXpert labeler's rule: 1.0 when no other finding except Support Devices is 1.0 or -1.0,
and nothing else the lexicon says rules it out is either (a blunted costophrenic angle,
aspiration: :func:`~reportfed.text.assertion.breaks_no_finding`), else blank; its probability is at least 0.5 where it is 1. A report the labeler cannot read (:func:`readable`: only section headers, or another
language) gets no state at all, neither No Finding nor a finding.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from reportfed.core.errors import ConfigError
from reportfed.text.assertion import Mention, breaks_no_finding, decisive_mentions, has_lexicon
from reportfed.text.lexicon import PLAIN, Lexicon
from reportfed.text.sentences import findings_sentences, other_language_sentences

NO_FINDING = "No Finding"
#: findings that do not rule out "No Finding"
NOT_DISEASE = frozenset({"Support Devices", NO_FINDING})
_STATE = {"affirmed": 1.0, "uncertain": -1.0, "negated": 0.0}
#: the least probability at which a finding the text does not mention is called positive
UNMENTIONED_FLOOR = 0.5
#: the least calibrated probability at which the model calls a finding the text does not name
#: from a sentence that names others. Measured on our suites (behaviour, layouts, MIMIC-style)
#: with the default model: each of the 13 such calls, on 11 sentences, names a finding the
#: text does not (the suites' conventions), with at most 0.743; the one kind of right call came
#: from a sentence that names no finding ("overlying monitoring wires": Support Devices, 0.959)
INFERRED_MARGIN = 0.75


#: common words of English radiology prose: a report with none of them in its findings and no
#: mention says nothing the labeler can read (only section headers, or another language)
_ENGLISH = re.compile(
    r"\b(the|is|are|was|were|of|and|with|without|there|normal|clear|unremarkable|stable|"
    r"unchanged|seen|noted|identified|acute|active|disease|abnormal\w*|process|findings?|"
    r"cardiopulmonary|changes?|degenerative|size|silhouette|lungs?|heart|chest|evidence)\b",
    re.IGNORECASE,
)


def other_language(text: str) -> bool:
    """Whether ``text`` describes its study in another language than English alone: it has
    such sentences (:func:`~reportfed.text.sentences.other_language_sentences`) and no English
    one, so the labeler reads nothing of it."""
    return bool(other_language_sentences(text)) and not findings_sentences(text)


def readable(text: str, mentions: dict[str, Mention | None]) -> bool:
    """Whether the labeler can read ``text``: it is English (:func:`other_language`) and names
    a finding (``mentions``, as :func:`report_mentions` gives them) or one of its findings
    sentences is English prose. A report it cannot read gets no state at all."""
    if other_language(text):
        return False
    return any(m is not None for m in mentions.values()) or any(
        _ENGLISH.search(s) for s in findings_sentences(text)
    )


def report_mentions(
    texts: Sequence[str],
    labels: Sequence[str],
    lexicon: Lexicon = PLAIN,
) -> list[dict[str, Mention | None]]:
    """Per report, the mention that decides each label of ``labels`` the ``lexicon`` reads
    (``None``: the text does not name it; the labels it does not read are absent)."""
    lexical = [name for name in labels if has_lexicon(name, lexicon)]
    return [decisive_mentions(text, lexical, lexicon) for text in texts]


def rule_states(
    texts: Sequence[str],
    labels: Sequence[str],
    lexicon: Lexicon = PLAIN,
) -> np.ndarray:
    """The four states the text rules alone read with ``lexicon`` of each of ``labels`` in each
    report: 1.0 affirmed, 0.0 negated, -1.0 uncertain, NaN not mentioned (or not read by the
    lexicon), or every label NaN in a report in another language (:func:`other_language`),
    which the rules cannot read."""
    return _rule_reading(texts, labels, lexicon)[0]


def _rule_reading(
    texts: Sequence[str],
    labels: Sequence[str],
    lexicon: Lexicon,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`rule_states`, and which reports are in another language."""
    out = np.full((len(texts), len(labels)), np.nan, dtype=np.float32)
    foreign = np.array([other_language(t) for t in texts], dtype=bool)
    for i, found in enumerate(report_mentions(texts, labels, lexicon)):
        if foreign[i]:
            continue
        for c, name in enumerate(labels):
            mention = found[name]
            if mention is not None:
                out[i, c] = _STATE[mention.assertion]
    return out, foreign


def read_labels(
    texts: Sequence[str],
    labels: Sequence[str],
    lexicon: Lexicon = PLAIN,
) -> np.ndarray:
    """What the text alone says of each of ``labels`` (:func:`rule_states`) as training labels
    for a site that does not annotate them: 1.0 where a mention affirms the finding, 0.0 where
    one negates it or none names it, NaN (not annotated) where the report hedges it or is in
    another language, as the CheXpert labeler's U-Ignore policy trains: on IU, hedged findings
    are mostly not indexed, and counting them positive halves Pneumonia's agreement with MeSH."""
    states, foreign = _rule_reading(texts, labels, lexicon)
    out = np.where(np.isnan(states), np.float32(0.0), states)
    out[states == -1.0] = np.nan
    out[foreign] = np.nan  # says nothing: not 0
    return out


def chexpert_states(
    texts: Sequence[str],
    proba: np.ndarray,
    labels: Sequence[str],
    thresholds: np.ndarray,
    mentions: Sequence[dict[str, Mention | None]] | None = None,
    calibrated: np.ndarray | None = None,
    inferred: np.ndarray | None = None,
    lexicon: Lexicon = PLAIN,
    set_aside: np.ndarray | None = None,
) -> np.ndarray:
    """``(len(texts), len(labels))`` states: 1.0, 0.0, -1.0 or NaN (see the module docstring)
    from the model's probabilities ``proba`` and, where given, the ``calibrated`` ones;
    ``mentions`` reuses :func:`report_mentions` of ``texts``; ``inferred`` marks the cells whose
    score comes from a sentence naming other findings (:func:`unmentioned_candidates` says
    which cells to look at); ``lexicon``: what the text rules read with; ``set_aside`` marks the
    cells whose sentence names the finding in words the rules read as no mention of it, which
    the model never calls."""
    if proba.shape != (len(texts), len(labels)):
        raise ConfigError(f"proba has shape {proba.shape}, expected ({len(texts)}, {len(labels)})")
    mentions = report_mentions(texts, labels, lexicon) if mentions is None else mentions
    present = proba >= np.asarray(thresholds)
    unmentioned_present = unmentioned_candidates(proba, labels, thresholds, mentions, lexicon)
    if calibrated is not None:
        floor = (
            UNMENTIONED_FLOOR
            if inferred is None
            else np.where(inferred, INFERRED_MARGIN, UNMENTIONED_FLOOR)
        )
        unmentioned_present &= calibrated >= floor
    if set_aside is not None:
        unmentioned_present &= ~set_aside
    out = np.full(proba.shape, np.nan, dtype=np.float32)
    lexical = [c for c, name in enumerate(labels) if has_lexicon(name, lexicon)]
    other = [
        c for c, name in enumerate(labels) if not has_lexicon(name, lexicon) and name != NO_FINDING
    ]
    out[:, other] = present[:, other]
    unread = np.array([not readable(t, m) for t, m in zip(texts, mentions, strict=True)])
    for i, found in enumerate(mentions):
        if unread[i]:
            out[i] = np.nan  # no state at all: never a finding read from words it cannot read
            continue
        for c in lexical:
            mention = found[labels[c]]
            if mention is not None:
                out[i, c] = _STATE[mention.assertion]
            elif unmentioned_present[i, c]:
                out[i, c] = 1.0
    if NO_FINDING in labels:
        disease = [c for c, name in enumerate(labels) if name not in NOT_DISEASE]
        stated = np.isin(out[:, disease], (1.0, -1.0)).any(axis=1)
        ruled_out = np.array([breaks_no_finding(t) is not None for t in texts], dtype=bool)
        out[:, list(labels).index(NO_FINDING)] = np.where(stated | unread | ruled_out, np.nan, 1.0)
    return out


def unmentioned_candidates(
    proba: np.ndarray,
    labels: Sequence[str],
    thresholds: np.ndarray,
    mentions: Sequence[dict[str, Mention | None]],
    lexicon: Lexicon = PLAIN,
) -> np.ndarray:
    """The cells :func:`chexpert_states` may call from the model alone: a label ``lexicon``
    reads that the report does not name, scored at least ``max(t, 0.5)``."""
    out = proba >= np.maximum(thresholds, UNMENTIONED_FLOOR)
    for c, name in enumerate(labels):
        if has_lexicon(name, lexicon):
            out[:, c] &= np.array([m.get(name) is None for m in mentions], dtype=bool)
        else:
            out[:, c] = False
    return out


def consistent_proba(proba: np.ndarray, states: np.ndarray) -> np.ndarray:
    """Calibrated probabilities ``proba`` on their state's side of even odds: at least 0.5 where
    ``states`` is 1, at most 0.5 where it is 0 (uncertain and blank keep theirs)."""
    out = np.array(proba, dtype=np.float32, copy=True)
    out[states == 1.0] = np.maximum(out[states == 1.0], 0.5)
    out[states == 0.0] = np.minimum(out[states == 0.0], 0.5)
    return out
