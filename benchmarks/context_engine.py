"""ConText (Harkema et al. 2009) as medspaCy 1.3 implements it, driven by reportfed's lexicon: an
engine for ``yardsticks.py`` to compare scope algorithms on one lexicon.

reportfed's sentences (:func:`reportfed.text.sentences.findings_sentences`, so both engines
read the same text) each become a spaCy document of a blank English pipeline (nothing is
downloaded) with medspaCy's target matcher and ConText. Targets are the lexicon's finding
patterns; an anatomy phrase ("heart size") is a target of its finding that counts only beside
a normal word (negated) or an abnormal one (affirmed), two categories of ConText modifier made
from the lexicon's word lists. ConText's trigger categories come from the lexicon's cues:
negation before (forward) and after (backward) a target, uncertainty likewise (possible
existence), hedged causes (forward), "versus" (both ways), pseudo-negations ("no change") and
terminators. A report's state per finding is aggregated as the CheXpert labeler does (affirmed,
else uncertain, else negated).

It runs where medspaCy installs: on Python 3.11 that is spaCy 3.7 and NumPy 1, an environment
of its own beside reportfed's (``pip install "numpy<2" "pandas<3" "py3langid<0.4" google-re2
platformdirs medspacy==1.3.1`` and reportfed without its dependencies; py3langid 0.4 needs
NumPy 2).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import spacy
from medspacy.context import ConTextRule
from medspacy.target_matcher import TargetRule

from reportfed.text.assertion import decide
from reportfed.text.lexicon import BUILTIN
from reportfed.text.sentences import findings_sentences

#: the findings the engine reads (yardsticks.FINDINGS' order)
FINDINGS = (
    "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion", "Edema",
    "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion",
    "Pleural Other", "Fracture", "Support Devices",
)  # fmt: skip
_STATE = {"affirmed": 1.0, "uncertain": -1.0, "negated": 0.0}
_ANATOMY = "ANATOMY"  #: the metadata key that marks an anatomy target


def _word(words: Sequence[str]) -> str:
    return r"\b(?:" + "|".join(words) + r")\b"


@spacy.Language.component("reportfed_one_sentence")
def _one_sentence(doc: spacy.tokens.Doc) -> spacy.tokens.Doc:
    """The document is one sentence (reportfed's own splitter made it)."""
    for k, token in enumerate(doc):
        token.is_sent_start = k == 0
    return doc


@lru_cache(maxsize=1)
def _nlp() -> spacy.language.Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("reportfed_one_sentence")
    matcher = nlp.add_pipe("medspacy_target_matcher")
    targets = []
    for label in FINDINGS:
        targets += [TargetRule(f"{label} {k}", label, pattern=p)
                    for k, p in enumerate(BUILTIN.findings[label])]  # fmt: skip
        targets += [
            TargetRule(f"{label} anatomy {k}", label, pattern=p, metadata={_ANATOMY: True})
            for k, p in enumerate(BUILTIN.anatomy.get(label, ()))
        ]
        targets += [
            TargetRule(f"{label} gone {k}", label, pattern=p, metadata={"GONE": True})
            for k, p in enumerate(BUILTIN.gone.get(label, ()))
        ]
        targets += [
            TargetRule(f"{label} hedged {k}", label, pattern=p, metadata={"HEDGED": True})
            for k, p in enumerate(BUILTIN.uncertain.get(label, ()))
        ]
    matcher.add(targets)
    # medspaCy prunes overlapping modifiers by default; here that loses most negations of IU's
    # lists ("No pneumothorax, effusion or consolidation": OpenI macro F1 0.596 against 0.797
    # without it, on the lexicon before round five), so the comparison keeps every modifier
    prune = os.environ.get("CONTEXT_PRUNE", "0") == "1"
    context = nlp.add_pipe(
        "medspacy_context", config={"rules": None, "prune_on_modifier_overlap": prune}
    )
    cue = BUILTIN.cues
    rules = []
    for name, category, direction in (
        ("negated_before", "NEGATED_EXISTENCE", "FORWARD"),
        ("negated_after", "NEGATED_EXISTENCE", "BACKWARD"),
        ("uncertain_before", "POSSIBLE_EXISTENCE", "FORWARD"),
        ("uncertain_after", "POSSIBLE_EXISTENCE", "BACKWARD"),
        ("hedged_cause", "POSSIBLE_EXISTENCE", "FORWARD"),
        ("versus", "POSSIBLE_EXISTENCE", "BIDIRECTIONAL"),
    ):
        rules += [ConTextRule(f"{name} {k}", category, pattern=p.rstrip("$"), direction=direction)
                  for k, p in enumerate(cue[name]) if p.strip() not in ("^\\s*any\\b",)]  # fmt: skip
    negations = r"\b(?:no|not|without)"
    rules += [ConTextRule("pseudo", "PSEUDO", pattern=negations + cue["pseudo_negation"][0],
                          direction="PSEUDO")]  # fmt: skip
    rules += [ConTextRule("terminate", "TERMINATE", pattern=_word(BUILTIN.words["terminate"]),
                          direction="TERMINATE"),
              ConTextRule("marks", "TERMINATE", pattern=r"[;:]", direction="TERMINATE"),
              ConTextRule("new clause", "TERMINATE",
                          pattern=r",\s*(?:and\s+)?" + _word(BUILTIN.words["new_clause"]),
                          direction="TERMINATE")]  # fmt: skip
    for name, category in (("normal", "NORMAL"), ("abnormal", "ABNORMAL")):
        rules.append(ConTextRule(name, category, pattern=_word(BUILTIN.words[name]),
                                 direction="BIDIRECTIONAL"))  # fmt: skip
    rules.append(ConTextRule("borderline", "POSSIBLE_EXISTENCE",
                             pattern=_word(BUILTIN.words["borderline"]), direction="BIDIRECTIONAL"))  # fmt: skip
    context.add(rules)
    return nlp


class _Mention:
    """What :func:`reportfed.text.assertion.decide` needs of a mention."""

    def __init__(self, label: str, assertion: str) -> None:
        self.label, self.assertion = label, assertion


def _mentions(sentence: str) -> list[_Mention]:
    doc = _nlp()(sentence)
    out = []
    for ent in doc.ents:
        modifiers = {m.category for m in ent._.modifiers}
        anatomy = bool(getattr(ent._, "target_rule", None) and ent._.target_rule.metadata
                       and ent._.target_rule.metadata.get(_ANATOMY))  # fmt: skip
        gone = bool(getattr(ent._, "target_rule", None) and ent._.target_rule.metadata
                    and ent._.target_rule.metadata.get("GONE"))  # fmt: skip
        if gone:
            out.append(_Mention(ent.label_, "negated"))
            continue
        hedged = bool(getattr(ent._, "target_rule", None) and ent._.target_rule.metadata
                      and ent._.target_rule.metadata.get("HEDGED"))  # fmt: skip
        if anatomy:
            if "ABNORMAL" in modifiers and "NEGATED_EXISTENCE" not in modifiers:
                state = "uncertain" if "POSSIBLE_EXISTENCE" in modifiers else "affirmed"
            elif "NORMAL" in modifiers or "ABNORMAL" in modifiers:
                state = "negated"
            else:
                continue  # an anatomy phrase that says neither is no mention
        elif "POSSIBLE_EXISTENCE" in modifiers:
            state = "uncertain"
        elif "NEGATED_EXISTENCE" in modifiers:
            state = "negated"
        else:
            state = "uncertain" if hedged else "affirmed"
        out.append(_Mention(ent.label_, state))
    return out


def context_engine(texts: Sequence[str]) -> np.ndarray:
    """The four states of :data:`FINDINGS` that ConText reads in each report."""
    out = np.full((len(texts), len(FINDINGS)), np.nan, dtype=np.float32)
    for i, text in enumerate(texts):
        mentions = [m for s in findings_sentences(text) for m in _mentions(s)]
        for c, mention in enumerate(decide(mentions, FINDINGS).values()):  # type: ignore[arg-type]
            if mention is not None:
                out[i, c] = _STATE[mention.assertion]
    return out
