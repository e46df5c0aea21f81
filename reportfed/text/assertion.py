"""Which findings a report mentions, and whether each mention is affirmed, negated or uncertain.

Rules in the NegEx / ConText tradition, with a lexicon written for the CheXpert findings (and the
NIH-14 labels beyond them):

* a **finding phrase** ("cardiomegaly", "pleural effusion", "central venous catheter") mentions
  its label; an **anatomy phrase** ("heart size", "cardiomediastinal silhouette", "costophrenic
  angles") mentions it only next to a word that says normal ("heart size is normal": negated) or
  abnormal ("the heart is enlarged": affirmed);
* a **cue** before a mention ("no", "without", "free of", "possible", "concerning for") or after
  it ("has resolved", "is not seen", "cannot be excluded") sets its state, within its clause: the
  scope ends at ``but``/``however``/``which``..., at a semicolon, or at a comma that starts a new
  finding ("no pneumothorax, small effusion");
* pseudo-cues that do not negate ("no change in the effusion", "not changed") are skipped.

A report's state for a label aggregates its mentions as the CheXpert labeler does: affirmed if
any mention is, else uncertain if any is, else negated if any is, else not mentioned.

Limits: the lexicon is finite (a paraphrase outside it is not a mention; the presence model can
still call the finding), scopes are clause-level rather than parsed (and a clause is cut
:data:`_SCOPE_CHARS` characters either side of its mention), and double negation ("cannot rule
out no effusion") is not handled.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from reportfed.text.lexicon import BUILTIN, PLAIN, Lexicon
from reportfed.text.sentences import addendum_start, findings_sentences

Assertion = Literal["affirmed", "negated", "uncertain"]
#: how a report aggregates its mentions of a label: the first state any mention has
_PRECEDENCE: tuple[Assertion, ...] = ("affirmed", "uncertain", "negated")

# -- the lexicon (reportfed/text/lexicon.toml) ---------------------------------------------------
#: label -> regular expressions of phrases that name the finding itself
FINDINGS: dict[str, tuple[str, ...]] = BUILTIN.findings
#: label -> anatomy phrases that mention the label only beside a normal or abnormal word
ANATOMY: dict[str, tuple[str, ...]] = BUILTIN.anatomy
#: label -> phrases that say the finding is gone (a negated mention: "the patient was extubated")
GONE: dict[str, tuple[str, ...]] = BUILTIN.gone

#: words that end a cue's scope, and the marks that do
_TERMINATORS = re.compile(rf"\b(?:{BUILTIN.word('terminate')})\b|[;:]", re.IGNORECASE)
#: a comma followed by these starts a new finding, ending the scope; so does a coordinated
#: clause of its own ("the heart is normal and there is a large effusion": "large" is the
#: effusion's)
_NEW_CLAUSE = re.compile(
    rf",\s*(?:and\s+)?(?:{BUILTIN.word('new_clause')})\b|"
    r"\s(?:and|but)\s+there\s+(?:is|are|was|were|has|have|appears?|remains?)\b",
    re.IGNORECASE,
)


def _compile(patterns: Iterable[str]) -> re.Pattern[str]:
    """One pattern matching any of ``patterns``, each starting at a word boundary (looked for
    once per place, not once per pattern)."""
    return re.compile(rf"(?<![\w-])(?:{'|'.join(patterns)})", re.IGNORECASE)


#: a suspicion stated after the finding ("atelectasis suspected": uncertain) and its denial, by a
#: "not" ("pneumonia is not suspected") or by a negation before the finding ("no pneumothorax is
#: suspected"): negated
_SUSPECTED = re.compile(r"(?:(?:is|are)\s+)?(not\s+)?suspected\b", re.IGNORECASE)
#: a hedge that leans to present ("atelectasis or scarring", "probable pneumonia"), at the start
#: of an uncertain mention's cue
_LIKELY = re.compile(rf"\s*(?:{BUILTIN.cue('likely')})", re.IGNORECASE)
#: a cause offered with a hedge: what follows it is uncertain ("may be due to fluid overload")
_HEDGED_CAUSE = re.compile(BUILTIN.cue("hedged_cause"), re.IGNORECASE)
#: between two mentions: they are offered as alternatives ("atelectasis or pneumonia")
_ALTERNATIVE = re.compile(r"^\s*,?\s*(?:and/)?or\s+(?:\w+\s+){0,2}$", re.IGNORECASE)
#: a differential: it hedges the findings named next to it on either side ("atelectasis versus
#: pneumonia", "effusion versus thickening"), not those further off ("opacity, atelectasis versus
#: pneumonia": the opacity is seen, its cause is in doubt)
_VERSUS = re.compile(BUILTIN.cue("versus"), re.IGNORECASE)
#: between two findings after a "versus": the differential goes on ("atelectasis versus
#: consolidation, aspiration"); an "and" ends it ("..., and a small effusion")
_DIFFERENTIAL_GOES_ON = re.compile(r"^\s*,\s*(?:or\s+)?$", re.IGNORECASE)
#: per finding, what names it: its patterns, then those that name it hedged
_FINDING_RE = {
    label: _compile((*p, *BUILTIN.uncertain.get(label, ()))) for label, p in FINDINGS.items()
}
#: per finding, the patterns that name it hedged, by convention ("vascular congestion": Edema -1)
_HEDGED_NAME_RE = {label: _compile(p) for label, p in BUILTIN.uncertain.items()}
#: what rules out No Finding beyond the findings (a blunted costophrenic angle, aspiration)
_BREAKS_NO_FINDING = _compile(BUILTIN.breaks_no_finding)
#: a hedge right before these governs what they name, not the finding before it ("opacity,
#: possibly representing pneumonia": the opacity is seen, pneumonia is the doubt)
_CAUSE_NEXT = re.compile(
    r"\s*(?:represent|reflect|due to|secondary to|related to|(?:\w+\s+){0,2}?(?:"
    + "|".join(p for phrases in FINDINGS.values() for p in phrases)
    + "))",
    re.IGNORECASE,
)
#: a finding named within three words after a word: that word qualifies it
_NAMES_NEXT = re.compile(
    r"\s+(?:[\w-]+\s+){0,3}?(?:"
    + "|".join(p for phrases in FINDINGS.values() for p in phrases)
    + ")",
    re.IGNORECASE,
)
#: a finding named inside a caveat about the study is not a mention ("sensitivity for
#: pneumothorax is reduced on a portable film")
_CAVEAT = re.compile(BUILTIN.cue("caveat"), re.IGNORECASE)
#: a fracture of hardware is the device's, not a bone's ("fractured sternal wire")
_HARDWARE = rf"(?:{BUILTIN.word('hardware')})"
_HARDWARE_FRACTURE = re.compile(
    rf"fractur\w*\s+(?:\w+\s+){{0,3}}?{_HARDWARE}\b|\b{_HARDWARE}\s+(?:is|are|was|were|appears?|"
    rf"remains?)?\s*(?:\w+\s+)?fractur",
    re.IGNORECASE,
)
_ANATOMY_RE = {label: _compile(p) for label, p in ANATOMY.items() if p}
_GONE_RE = {label: _compile(p) for label, p in GONE.items()}
#: a finding, its naming expressions, anatomy phrases and unmention expressions
Expressions = tuple[
    str, tuple[re.Pattern[str], ...], re.Pattern[str] | None, tuple[re.Pattern[str], ...]
]
#: each lexicon label with its expressions
_UNMENTION_RE = {label: _compile(p) for label, p in BUILTIN.unmention.items()}
_LEXICON: list[Expressions] = [
    (label, (_FINDING_RE[label],), _ANATOMY_RE.get(label),
     (_UNMENTION_RE[label],) if label in _UNMENTION_RE else ())
    for label in FINDINGS
]  # fmt: skip
#: a field of a structured report: "Pneumothorax: none.", "Lines and tubes: ..." (the name, the
#: colon, the value); its value says what the name's finding is
_FIELD = re.compile(r"^\s*[A-Za-z][A-Za-z /&,-]{0,40}?:\s*")
#: a field's value that says its finding is absent ("Pneumothorax: None.")
_ABSENT_VALUE = re.compile(BUILTIN.cue("absent_value"), re.IGNORECASE)
_NEG_BEFORE = re.compile(BUILTIN.cue("negated_before"), re.IGNORECASE)
_NEG_AFTER = re.compile(BUILTIN.cue("negated_after"), re.IGNORECASE)
_UNC_BEFORE = re.compile(BUILTIN.cue("uncertain_before"), re.IGNORECASE)
_UNC_AFTER = re.compile(BUILTIN.cue("uncertain_after"), re.IGNORECASE)
_PSEUDO_RE = re.compile(BUILTIN.cue("pseudo_negation"), re.IGNORECASE)
_NORMAL_RE = re.compile(rf"\b(?:{BUILTIN.word('normal')})\b", re.IGNORECASE)
_ABNORMAL_RE = re.compile(rf"\b(?:{BUILTIN.word('abnormal')})\b", re.IGNORECASE)
_BORDERLINE_RE = re.compile(rf"\b(?:{BUILTIN.word('borderline')})\b", re.IGNORECASE)


@dataclass(frozen=True)
class Mention:
    """One mention of ``label`` in the report's ``sentence``-th read sentence (``text``,
    characters ``span``), its state and the ``cue`` that set it ("" for a plain affirmation);
    ``corrected``: the state is a hospital's correction of that phrasing
    (:mod:`reportfed.text.corrections`), not the rules' reading."""

    label: str
    sentence: int
    span: tuple[int, int]
    assertion: Assertion
    text: str = ""
    cue: str = ""
    corrected: bool = False

    @property
    def likely(self) -> bool:
        """An uncertain mention whose hedge leans to present (the lexicon's ``likely`` cues:
        alternatives, "probable", "borderline"); still uncertain, CheXpert's -1."""
        return self.assertion == "uncertain" and _LIKELY.match(self.cue) is not None


def has_lexicon(label: str, lexicon: Lexicon = PLAIN) -> bool:
    """Whether mentions of ``label`` can be found (a built-in finding, or one a hospital defined
    in ``lexicon``)."""
    return label in FINDINGS or (lexicon.findings is not None and label in lexicon.findings)


#: how far a mention's clause reaches at most on either side, in characters: past every clause of
#: real reports (IU's longest findings sentence has 276), so that a long unpunctuated run of text
#: reads in time linear in its length
_SCOPE_CHARS = 1000


def _inside(start: int, end: int, matches: list[re.Match[str]], starts: list[int]) -> bool:
    """Whether characters ``start:end`` lie inside one of ``matches`` (in order, not
    overlapping; ``starts``: their starts)."""
    i = bisect.bisect_right(starts, start) - 1  # the only match that can hold them
    return i >= 0 and end <= matches[i].end()


@functools.lru_cache(maxsize=2**12)
def _boundaries(sentence: str) -> tuple[list[int], list[int], list[int], list[int]]:
    """Where ``sentence``'s clauses end: the starts and ends of its scope terminators (less those
    inside a hedge whose words they are: "may be secondary to", "may be compatible with", the
    hedge governs what follows), then the starts and ends of its new clauses
    (:data:`_NEW_CLAUSE`). Each list is in order: the matches do not overlap."""
    hedges = list(_UNC_BEFORE.finditer(sentence))
    hedge_starts = [m.start() for m in hedges]
    terminators = [
        m for m in _TERMINATORS.finditer(sentence) if not _inside(*m.span(), hedges, hedge_starts)
    ]
    clauses = list(_NEW_CLAUSE.finditer(sentence))
    return (
        [m.start() for m in terminators],
        [m.end() for m in terminators],
        [m.start() for m in clauses],
        [m.end() for m in clauses],
    )


def _clause(sentence: str, start: int, end: int) -> tuple[int, int]:
    """The clause around characters ``start:end``: from the last terminator before to the next,
    and no further than :data:`_SCOPE_CHARS` either side."""
    t_starts, t_ends, c_starts, c_ends = _boundaries(sentence)
    lo, hi = max(0, start - _SCOPE_CHARS), min(len(sentence), end + _SCOPE_CHARS)
    if (i := bisect.bisect_right(t_ends, start) - 1) >= 0:
        lo = max(lo, t_ends[i])
    if (i := bisect.bisect_left(t_starts, end)) < len(t_starts):
        hi = min(hi, t_starts[i])
    if (i := bisect.bisect_right(c_ends, start) - 1) >= 0:
        lo = max(lo, c_starts[i] + 1)
    if (i := bisect.bisect_left(c_starts, end)) < len(c_starts):
        hi = min(hi, c_starts[i])
    return lo, hi


def _negation_cue(before: str) -> str:
    """The last negation cue in ``before`` that is neither part of an uncertainty cue ("cannot
    exclude") nor a pseudo-negation ("no change in"); "" if none."""
    masked = _UNC_BEFORE.sub(lambda m: " " * len(m.group()), before)
    cues = [m for m in _NEG_BEFORE.finditer(masked) if not _PSEUDO_RE.match(masked, m.end())]
    return before[cues[-1].start() : cues[-1].end()] if cues else ""


def _assert(sentence: str, start: int, end: int) -> tuple[Assertion, str]:
    """The state of the mention at ``start:end`` from the cues in its clause, and the cue."""
    lo, hi = _clause(sentence, start, end)
    before, after = sentence[lo:start], sentence[end:hi]
    if suspected := _SUSPECTED.search(after):
        if suspected.group(1):
            return "negated", suspected.group().strip()
        if negation := _negation_cue(before):
            return "negated", negation
        return "uncertain", suspected.group().strip()
    if (cue := _UNC_AFTER.search(after)) and not _CAUSE_NEXT.match(sentence, end + cue.end()):
        return "uncertain", cue.group().strip()
    if negation := _negation_cue(before):
        return "negated", negation
    if cue := _NEG_AFTER.search(after):
        return "negated", cue.group().strip()
    if cue := _UNC_BEFORE.search(before) or _HEDGED_CAUSE.search(
        sentence, max(0, start - _SCOPE_CHARS), start
    ):
        return "uncertain", cue.group().strip()
    return "affirmed", ""


def _anatomy_state(sentence: str, start: int, end: int) -> tuple[Assertion, str] | None:
    """State of an anatomy mention from the normal / abnormal words of its clause ("heart size is
    normal": negated, "the heart is enlarged": affirmed) and that word, or ``None`` when it says
    neither."""
    lo, hi = _clause(sentence, start, end)
    clause = sentence[lo:hi]
    if borderline := _BORDERLINE_RE.search(clause):
        return "uncertain", borderline.group()
    chunk_lo = max(lo, sentence.rfind(",", lo, start) + 1)
    chunk_hi = sentence.find(",", end, hi)
    chunk = sentence[chunk_lo : chunk_hi if chunk_hi >= 0 else hi]
    # an abnormal word that qualifies another finding named right after it is that finding's
    # ("the heart is unremarkable and a large left effusion is present": "large" is the
    # effusion's), whatever the words between the two clauses
    abnormal = next(
        (
            m
            for m in _ABNORMAL_RE.finditer(chunk)
            if not _NAMES_NEXT.match(sentence, chunk_lo + m.end())
        ),
        None,
    )
    if abnormal and not _negation_cue(chunk[: abnormal.start()]):
        state, cue = _assert(sentence, start, end)
        return ("uncertain", cue) if state == "uncertain" else ("affirmed", abnormal.group())
    if abnormal:
        return "negated", _negation_cue(chunk[: abnormal.start()]) + " " + abnormal.group()
    if normal := _NORMAL_RE.search(clause):
        return "negated", normal.group()
    return None


def _hedged(sentence: str, mentions: list[Mention]) -> list[Mention]:
    """Affirmed mentions of two findings offered as alternatives ("atelectasis or pneumonia")
    made uncertain, and those next to a differential's "versus" (:data:`_VERSUS`); after a
    negation or a pseudo-negation ("no change in pneumothorax or effusion") the ``or`` joins a
    list instead."""
    ordered = sorted(mentions, key=lambda m: m.span)
    hedged: dict[int, str] = {}  # id of a mention -> the words that hedge it
    for a, b in itertools.pairwise(ordered):
        between = sentence[a.span[1] : b.span[0]]
        lo, _ = _clause(sentence, *a.span)
        listed = _NEG_BEFORE.search(sentence[lo : a.span[0]])
        if a.label != b.label and _ALTERNATIVE.match(between) and not listed:
            hedged[id(a)] = hedged[id(b)] = between.strip(" ,")
    starts = [m.span[0] for m in ordered]
    for versus in _VERSUS.finditer(sentence):
        lo, hi = _clause(sentence, *versus.span())
        near_cue = ordered[bisect.bisect_left(starts, lo) : bisect.bisect_left(starts, hi)]
        before = [m for m in near_cue if m.span[1] <= versus.start()]
        after = [m for m in near_cue if versus.end() <= m.span[0] and m.span[1] <= hi]
        # the mention next to the cue on each side, the findings listed after the second, and
        # the mentions on the same words as any of them
        differential = after[:1]
        for m in after[1:]:
            if _DIFFERENTIAL_GOES_ON.match(sentence[differential[-1].span[1] : m.span[0]]):
                differential.append(m)
        near = [max(before, key=lambda m: m.span[1])] if before else []
        for m in before + after:
            if any(m.span[0] < n.span[1] and n.span[0] < m.span[1] for n in near + differential):
                hedged[id(m)] = versus.group()
    return [
        replace(m, assertion="uncertain", cue=hedged[id(m)], corrected=False)
        if id(m) in hedged and m.assertion == "affirmed"
        else m
        for m in ordered
    ]


def breaks_no_finding(text: str) -> Mention | None:
    """The first affirmed or hedged mention in ``text`` of what rules out No Finding beyond the
    findings (the lexicon's ``[no_finding] breaks``: a blunted costophrenic angle, aspiration),
    or ``None``."""
    for sentence in findings_sentences(text):
        found = _sentence_breaks(sentence)
        if found is not None:
            return found
    return None


@functools.lru_cache(maxsize=2**12)
def _sentence_breaks(sentence: str) -> Mention | None:
    for m in _BREAKS_NO_FINDING.finditer(sentence):
        state, cue = _assert(sentence, *m.span())
        if state != "negated":
            return Mention("No Finding", 0, m.span(), state, text=sentence, cue=cue)
    return None


def find_mentions(
    text: str, labels: Iterable[str] | None = None, lexicon: Lexicon = PLAIN
) -> list[Mention]:
    """Every mention of ``labels`` (default: every label with a lexicon, and every finding of
    ``findings``, those a hospital defined: :mod:`reportfed.text.findings`) in ``text``. Each is
    read among the mentions of every finding, so that what is read of a label does not depend on
    which others are asked ("opacity or atelectasis" hedges atelectasis either way)."""
    defined = lexicon.findings
    every = (*FINDINGS, *(defined.names if defined is not None else ()))
    wanted = set(labels if labels is not None else every)
    out: list[Mention] = []
    for i, sentence in enumerate(findings_sentences(text)):
        found = [m for m in _sentence_mentions(sentence, lexicon) if m.label in wanted]
        out += found if i == 0 else [replace(m, sentence=i) for m in found]
    return out


@functools.lru_cache(maxsize=8)
def _expressions(lexicon: Lexicon) -> list[Expressions]:
    """Each finding's naming expressions, anatomy phrases and ``unmention`` expressions: the
    built-ins with a hospital's changes to them, then the findings it defined."""
    if lexicon.findings is None:
        return _LEXICON
    changes = lexicon.findings.changes()
    out: list[Expressions] = []
    for label, named, anatomy, unmention in _LEXICON:
        more, less = changes.get(label, (None, None))
        out.append((label, named + ((more,) if more else ()), anatomy,
                    unmention + ((less,) if less else ())))  # fmt: skip
    for name, (defined, defined_anatomy) in lexicon.findings.compiled().items():
        less = changes.get(name, (None, None))[1]
        out.append((name, (defined,), defined_anatomy, (less,) if less else ()))
    return out


def names_finding(sentence: str, label: str, lexicon: Lexicon = PLAIN) -> bool:
    """Whether a naming expression of ``label`` matches in ``sentence``, whatever the rules then
    read of it. Where the report holds no mention of ``label``, such words are ones the rules
    read as no mention (an ``unmention`` phrase, a device's fracture, a caveat): the text's
    decision, which the model does not overrule from that sentence."""
    return any(
        pattern.search(sentence)
        for name, named, _, _ in _expressions(lexicon)
        if name == label
        for pattern in named
    )


def _spans(
    sentence: str, named: tuple[re.Pattern[str], ...], unmention: tuple[re.Pattern[str], ...]
) -> list[tuple[int, int]]:
    """Where ``named`` name a finding in ``sentence``: each match that shares no character with
    an earlier one or with a match of ``unmention``, in order."""
    if len(named) == 1 and not unmention:  # the built-in lexicon alone: no overlap to judge
        return [m.span() for m in named[0].finditer(sentence)]
    taken = bytearray(len(sentence))  # 1 where a character is an unmention's or a span's
    for p in unmention:
        for m in p.finditer(sentence):
            taken[m.start() : m.end()] = b"\1" * (m.end() - m.start())
    spans: list[tuple[int, int]] = []
    for pattern in named:
        for m in pattern.finditer(sentence):
            a, b = m.span()
            if not any(taken[a:b]):
                spans.append((a, b))
                taken[a:b] = b"\1" * (b - a)
    return sorted(spans)


@functools.lru_cache(maxsize=2**15)
def _sentence_mentions(sentence: str, lexicon: Lexicon = PLAIN) -> tuple[Mention, ...]:
    """The mentions of every finding in one sentence, as the report's sentence 0. Remembered:
    hospitals' reports repeat their sentences ("No pneumothorax."), and a sentence reads the same
    in any report."""
    found: list[Mention] = []
    hardware = list(_HARDWARE_FRACTURE.finditer(sentence))
    hardware_starts = [m.start() for m in hardware]
    for label, named, anatomy, unmention in _expressions(lexicon):
        spans = [
            (start, end)
            for start, end in _spans(sentence, named, unmention)
            if not _CAVEAT.search(sentence, max(0, start - _SCOPE_CHARS), start)
            and not (label == "Fracture" and _inside(start, start + 1, hardware, hardware_starts))
        ]
        hedged = _HEDGED_NAME_RE.get(label)
        for span in spans:
            state, cue = _assert(sentence, *span)
            if state == "affirmed" and hedged is not None and hedged.fullmatch(sentence, *span):
                state, cue = "uncertain", sentence[span[0] : span[1]]  # the convention's hedge
            found.append(Mention(label, 0, span, state, text=sentence, cue=cue))
        if label in _GONE_RE:
            found += [
                Mention(label, 0, m.span(), "negated", text=sentence, cue=m.group())
                for m in _GONE_RE[label].finditer(sentence)
            ]
        if spans or anatomy is None:
            continue
        for m in anatomy.finditer(sentence):
            said = _anatomy_state(sentence, *m.span())
            if said is not None:
                found.append(Mention(label, 0, m.span(), said[0], text=sentence, cue=said[1]))
                break
    found = _fields(sentence, found)
    if lexicon.corrections:  # a corrected phrasing is read as the hospital reads it, and then
        # under the sentence's scope like any other: alternatives and "versus" still hedge it
        found = lexicon.corrections.apply(found)
    return tuple(_hedged(sentence, found))


def _fields(sentence: str, found: list[Mention]) -> list[Mention]:
    """The mentions of a structured field's name ("Lines and tubes: ...", "Pneumothorax: none.")
    read from its value: dropped where the value mentions the same finding itself (the value
    decides: "Lines and tubes: the endotracheal tube has been removed."), negated where the value
    says it is absent ("none", "no", "negative"), else in the state the value's cues give the
    name read after it ("Pneumothorax: questionable small left apical.": uncertain; "Pleural
    effusion: small right.": affirmed)."""
    field = _FIELD.match(sentence)
    if field is None:
        return found
    named = [m for m in found if m.span[1] <= field.end()]
    in_value = {m.label for m in found if m.span[0] >= field.end()}
    value = sentence[field.end() :].rstrip(" .;")
    absent = _ABSENT_VALUE.fullmatch(sentence, field.end())
    out = [m for m in found if m not in named]
    for m in named:
        if m.label in in_value:
            continue
        if absent:
            out.append(replace(m, assertion="negated", cue=absent.group().strip(" .;")))
            continue
        probe = f"{value} {sentence[m.span[0] : m.span[1]]}"
        state, cue = _assert(probe, len(value) + 1, len(probe))
        out.append(replace(m, assertion=state, cue=cue))
    return out


def decisive_mentions(
    text: str,
    labels: Iterable[str],
    lexicon: Lexicon = PLAIN,
) -> dict[str, Mention | None]:
    """Per label, the mention of ``text`` that decides the report's state (:func:`decide`); where
    an addendum mentions the label, the addendum's mentions alone decide it (a later read corrects
    the first). The findings a hospital defined (``lexicon.findings``) are read as the built-ins
    are (an affirmed or uncertain mention of one with a ``parent`` is one of its parent too: a
    hiatal hernia is a hernia, but no hiatal hernia says nothing of other hernias); the phrasings
    its readers corrected (``lexicon.corrections``) are read as corrected."""
    labels = list(labels)
    children = _children(labels, lexicon)
    mentions = find_mentions(text, [*labels, *children], lexicon)
    mentions += [
        replace(m, label=children[m.label])
        for m in mentions
        if m.label in children and m.assertion != "negated"
    ]
    start = addendum_start(text)
    if start is not None:  # an addendum that mentions a label corrects the first read of it
        late = {m.label for m in mentions if m.sentence >= start}
        mentions = [m for m in mentions if m.label not in late or m.sentence >= start]
    return decide(mentions, labels)


def _children(labels: list[str], lexicon: Lexicon) -> dict[str, str]:
    """The findings a hospital defined whose parent is one of ``labels`` -> that parent."""
    findings = lexicon.findings
    if findings is None:
        return {}
    return {f.name: f.parent for f in findings.findings if f.parent in labels}


def decide(mentions: Iterable[Mention], labels: Iterable[str]) -> dict[str, Mention | None]:
    """Per label, the mention that decides a report's state as the CheXpert labeler aggregates
    ``mentions`` (the first affirmed one, else the first uncertain, else the first negated), or
    ``None`` (not mentioned)."""
    mentions = list(mentions)
    out: dict[str, Mention | None] = {}
    for lab in labels:
        own = [m for m in mentions if m.label == lab]
        out[lab] = next((m for state in _PRECEDENCE for m in own if m.assertion == state), None)
    return out


def report_assertions(text: str, labels: Iterable[str]) -> dict[str, Assertion | None]:
    """Per label, the report's state: affirmed if any mention is, else uncertain if any is, else
    negated if any is, else ``None`` (not mentioned)."""
    return {
        lab: None if m is None else m.assertion
        for lab, m in decisive_mentions(text, labels).items()
    }
