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
still call the finding), scopes are clause-level rather than parsed, and double negation
("cannot rule out no effusion") is not handled.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from reportfed.text.findings import Findings
from reportfed.text.sentences import addendum_start, findings_sentences

if TYPE_CHECKING:
    from reportfed.text.corrections import Corrections

Assertion = Literal["affirmed", "negated", "uncertain"]
#: how a report aggregates its mentions of a label: the first state any mention has
_PRECEDENCE: tuple[Assertion, ...] = ("affirmed", "uncertain", "negated")

# -- the lexicon -----------------------------------------------------------------------------------
_PL = r"(?:s|es)?"
#: label -> regular expressions of phrases that name the finding itself
FINDINGS: dict[str, tuple[str, ...]] = {
    "Enlarged Cardiomediastinum": (
        r"widen(?:ed|ing) (?:of the )?(?:superior )?mediastin(?:um|al)(?: silhouette| contours?)?",
        r"mediastinal (?:widening|enlargement|prominence)",
        r"enlarged (?:cardio)?mediastin(?:um|al (?:silhouette|contours?))",
        r"(?:cardio)?mediastinal silhouette (?:is |appears )?(?:enlarged|widened|prominent)",
        r"mediastinum (?:is |appears )?(?:widened|enlarged|prominent)",
        r"prominen(?:t|ce of the) (?:cardio)?mediastin(?:um|al (?:silhouette|contours?))",
    ),
    "Cardiomegaly": (
        r"cardiomegaly",
        r"cardiac (?:enlargement|silhouette enlargement)",
        r"enlarge(?:d|ment of the) (?:heart|cardiac silhouette|cardiac size)",
        r"heart is (?:mildly |moderately |severely |markedly )?enlarged",
        r"(?:heart|cardiac) size is (?:mildly |moderately |severely |markedly )?(?:enlarged|increased)",
        r"(?:biventricular|left ventricular|ventricular) enlargement",
    ),
    "Lung Lesion": (
        rf"nodul(?:e{_PL}|ar (?:opacit(?:y|ies)|densit(?:y|ies)|lesion{_PL}))",
        rf"(?:lung|pulmonary|lobe|hilar|parenchymal|cavitary|spiculated|soft tissue) mass{_PL}",
        rf"(?<!mediastinal )(?<!thyroid )(?<!neck )(?<!breast )(?<!axillary )\bmass{_PL}\b",
        r"\blumps?\b",
        rf"(?:lung|pulmonary|cavitary|parenchymal|lytic|focal|coin) lesion{_PL}",
        r"mass[- ]?like",
        r"neoplasm",
        r"tumou?r",
        r"(?:lung |pulmonary )?(?:carcinoma|cancer|malignancy)",
        r"metasta(?:sis|ses|tic)",
    ),
    "Lung Opacity": (
        r"opaci(?:ty|ties|fication|fied)",
        r"air ?space (?:disease|process|opacit(?:y|ies))",
        r"infiltrat(?:e|es|ion|ive)",
        r"(?:lung|pulmonary|parenchymal|patchy|hazy|ill-defined|air ?space|interstitial|basilar|"
        r"bibasilar|perihilar|lobe|base) densit(?:y|ies)",
        r"densit(?:y|ies) (?:in|within|at|of) the (?:\w+ ){0,6}?(?:lobes?|lungs?|bases?|lingula|"
        r"midlung|mid lung|apex|apices)\b",
        r"ground[- ]glass",
        r"interstitial (?:markings|prominence|opacities|thickening|changes|disease)",
        r"reticul(?:ar|onodular) (?:opacities|markings|pattern|changes)",
        r"haz(?:y|iness)",
    ),
    "Edema": (
        r"o?edema(?:tous)?",
        r"(?:pulmonary |vascular )?(?:vascular )?congestion",
        r"congestive heart failure|\bchf\b|heart failure",
        r"fluid overload",
        r"cephalization",
        r"(?:pulmonary )?venous hypertension",  # venous congestion, as the radiograph shows it
        r"kerley b?[- ]?lines",
        r"vascular (?:engorgement|prominence|indistinctness|redistribution)",
        r"indistinct(?:ness of the)? (?:pulmonary )?vascula(?:r|ture)",
        r"prominen(?:t|ce of the) (?:central )?(?:pulmonary )?vascula(?:ture|rity)",
        r"vascula(?:ture|rity) (?:is |are |appears? )(?:mildly |slightly |moderately |markedly )?"
        r"(?:prominent|engorged)",
        r"increased (?:pulmonary |lung )?vascularity",
        r"engorged (?:pulmonary )?(?:vessels|vasculature|veins)",
    ),
    "Consolidation": (r"consolidat(?:ion|ions|ive|ed)",),
    "Pneumonia": (
        r"(?:broncho)?pneumonia",
        r"pneumonitis",
        r"(?<!granulomatous )infectio(?:n|us process|us)",
        r"aspiration",
    ),
    "Atelectasis": (
        r"atelecta(?:sis|ses|tic)",
        r"(?:lobar|lobe|lung|segmental|postobstructive|post-obstructive) collapse",
        r"collapse of the (?:\w+ ){0,2}(?:lobe|lung)",
        r"volume loss",
    ),
    "Pneumothorax": (
        r"pneumothora(?:x|ces)",
        r"\bptx\b",
        r"hydropneumothorax",
        r"pleural air(?: collections?)?",
        r"air in the (?:\w+ )?pleural space",
    ),
    "Pleural Effusion": (
        r"(?<!pericardial )effusion{_PL}".replace("{_PL}", _PL),
        r"pleural fluid",
        r"hydrothorax",
        r"blunt(?:ing|ed) (?:of )?(?:the )?(?:(?:left|right|bilateral) )?costophrenic",
        r"fluid in the (?:\w+ )?pleural space",
    ),
    "Pleural Other": (
        r"pleural (?:thickening|plaques?|scar(?:ring|s)?|calcifications?|fibrosis)",
        r"(?:pleural|pleuro)[- ]?(?:parenchymal|pericardial) scar(?:ring|s)?",
        r"pleural[- ]based (?:plaques?|calcifications?|thickening|scar(?:ring)?)",
        r"diaphragmatic (?:pleural )?plaques?",
        r"calcified plaques? (?:along|on|over|of) the (?:\w+ )?(?:hemi)?diaphragms?",
        r"thickening of the (?:\w+ )?pleura",
        r"fibrothorax",
        r"apical (?:pleural )?(?:cap|capping|pleural thickening)",
    ),
    "Fracture": (r"fractur(?:e|es|ed)", r"\bfx\b"),
    "Support Devices": (
        r"(?:central venous|central|venous|picc|arterial|dialysis|swan[- ]ganz|pa) (?:line|catheter)s?",
        r"\bpicc\b",
        r"catheters?",
        r"(?:endotracheal|et|nasogastric|ng|orogastric|og|feeding|chest|tracheostomy|enteric|"
        r"dobhoff|gastrostomy|thoracostomy|pigtail) tubes?",
        r"\b(?:ett|ngt|ogt|aicd|lvad|iabp)\b|impella|cordis|dobhoff|\bij (?:line|catheter|sheath)",
        r"\btubes?\b",
        r"tracheostomy",
        r"pacemaker|pacer|\bicd\b|defibrillator|(?:pacer|pacing|pacemaker|icd|cardiac) leads?",
        r"\bleads?\b",
        r"(?:sternotomy|sternal) wires?",
        r"\bport(?:-a-cath)?\b",
        r"\bstents?\b",
        r"(?:prosthetic|replacement) valve|valve replacement",
        r"\bdrains?\b",
        r"(?:support |monitoring |medical )?devices?",
        r"orthopedic hardware|\bhardware\b",
        r"balloon pump",
    ),
    # NIH-14 labels beyond CheXpert's
    "Mass": (rf"\bmass{_PL}\b",),
    "Nodule": (rf"nodul(?:e{_PL}|ar)",),
    "Infiltration": (r"infiltrat(?:e|es|ion|ive)",),
    "Emphysema": (
        r"emphysema(?:tous)?",
        r"\bcopd\b",
        r"hyperinflat(?:ed|ion)|hyperexpan(?:ded|sion)",
    ),
    "Fibrosis": (r"fibros(?:is|ing)|fibrotic", r"scarring"),
    "Pleural Thickening": (r"pleural thickening",),
    "Hernia": (r"hernia(?:tion)?",),
}
#: label -> anatomy phrases that mention the label only beside a normal or abnormal word
ANATOMY: dict[str, tuple[str, ...]] = {
    "Enlarged Cardiomediastinum": (
        r"(?:cardio)?mediastinal(?: and hilar)? (?:silhouettes?|contours?|width)",
        r"hilar and mediastinal (?:silhouettes?|contours?)",
        r"mediastinum",
        r"(?:cardiomediastinal|mediastinal|hilar and mediastinal) (?:structures|borders?)",
    ),
    "Cardiomegaly": (
        r"heart size",
        r"size of the heart",
        r"cardiac (?:size|silhouette|contours?|shadow)",
        r"\bheart\b",
    ),
    "Pleural Effusion": (r"costophrenic (?:angles?|sulci|recess(?:es)?)", r"pleural spaces?"),
    "Pneumothorax": (),
}
#: label -> phrases that say the finding is gone (a negated mention: "the patient was extubated")
GONE: dict[str, tuple[str, ...]] = {
    "Support Devices": (r"extubat(?:ed|ion)", r"decannulat(?:ed|ion)"),
}
#: anatomy phrase + one of these (in its clause): the label is negated / affirmed / uncertain
_NORMAL = (
    r"normal|within normal limits|unremarkable|not enlarged|not widened|clear|sharp|"
    r"preserved|stable in size|normal in size|upper limits? of normal|top(?:-| )normal"
)
_ABNORMAL = (
    r"enlarged|enlargement|widened|widening|increased|large|prominen(?:t|ce)|blunt(?:ed|ing)"
)
#: a size at the edge of normal is normal ("top normal", "at the upper limits of normal",
#: "borderline normal": _NORMAL); "borderline" without "normal" is borderline enlarged: uncertain
_BORDERLINE = r"borderline(?![\s-]+normal)"

# -- cues ------------------------------------------------------------------------------------------
#: a resolution only in part leaves the finding there ("nearly resolved pneumothorax", "partial
#: resolution of the effusion"): not a negation
_PARTLY = (
    r"(?<!almost )(?<!nearly )(?<!partially )(?<!incompletely )(?<!not )(?<!not completely )"
    r"(?<!not fully )(?<!almost completely )(?<!nearly completely )(?<!partial )(?<!incomplete )"
    r"(?<!near complete )(?<!near-complete )(?<!near total )(?<!near-total )"
)
_NEGATION_BEFORE = (
    r"\bno\b|\bnot\b|\bwithout\b|free of|negative for|absence of|\babsent\b|"
    rf"{_PARTLY}resolution of|{_PARTLY}resolved|ruled out|rules out|clear of|no longer|"
    r"removal of|interval removal of|\bnever\b|\bnor\b|neither|unlikely"
)
_NEGATION_AFTER = (
    r"(?:is|are|was|were|has|have)?\s*(?:not|no longer) (?:\w+ )?(?:well[- ])?(?:seen|identified|"
    r"present|visuali[sz]ed|"
    r"demonstrated|evident|appreciated|detected|noted|visible|apparent|confirmed)|"
    rf"(?:has|have) (?:\w+ )?{_PARTLY}resolved|\b{_PARTLY}resolved\b|"
    r"(?:is|are) absent|(?:has|have been|was|were) removed|"
    r"(?<!may )(?<!might )(?<!could )(?:is|was|are|were|represents?|represented|reflects?) "
    r"(?:\w+ ){0,2}?(?:an? )?(?:artifact(?:ual)?|"
    r"(?:overlying )?nipple shadows?|skin folds?)|"
    r"(?<!not )(?<!not been )(?<!not yet been )(?<!never been )\bremoved\b|(?:is|are) unlikely|(?:has been|have been|was|were) (?:pulled|discontinued)(?! back)"
)
_UNCERTAIN_BEFORE = (
    r"possibl[ey]|possibility|potential(?:ly)?|presum(?:ed|ably)|probabl[ey]|\blikely\b|"
    r"questionabl[ey]|question of|may (?:\w+ )?(?:represent|be|reflect|"
    r"indicate|have)|might|could (?:\w+ )?(?:represent|be|reflect|indicate)|suspicious for|suspicion for|"
    r"suspect(?:ed)?|concerning for|concern for|suggestive of|suggest(?:s|ing)?|worrisome for|"
    r"cannot (?:be )?(?:entirely |completely )?(?:exclude|rule out)|can ?not exclude|can't exclude|"
    r"differential|rule out|\br/o\b|eval(?:uate|uation)? (?:for|of)|assess(?:ment)? for|borderline|equivocal|"
    r"indeterminate|\?|may not be excluded|raises the possibility|"
    r"difficult to exclude|favou?red|\bI think\b|"
    r"not (?:be )?(?:entirely )?excluded|"
    r"^\s*any\b"  # "any residual pneumothorax is tiny": whether there is one is the doubt
)
_UNCERTAIN_AFTER = (
    r"cannot be (?:entirely |completely |totally )?(?:excluded|ruled out)|can ?not be excluded|"
    r"(?:is|are) not (?:entirely |completely )?(?:excluded|ruled out)|not (?:entirely )?excluded|"
    r"(?:is|are) (?:also )?(?:possible|likely|questioned|not excluded|a consideration|"
    r"considered)|\?|(?:is|would be|are) difficult to exclude|"
    r"could not be excluded|"
    r"may be present|possibl[ey]|,?\s*if (?:any|present)\s*(?=[,.;:)]|$)|(?:could|may|might) be (?:missed|obscured)|"
    r"(?:may|might|could) (?:\w+ )?(?:represent|be|reflect) (?:\w+ ){0,2}?(?:an? )?"
    r"(?:artifact(?:ual)?|(?:overlying )?nipple shadows?|skin folds?)"
)
#: a negation cue followed by these does not negate ("no change in the effusion")
_PSEUDO = (
    r"\s*(?:significant |interval |substantial |appreciable |definite |other )?"
    r"(?:change|increase|decrease|worsening|improvement|further|only|necessarily|well)"
)
#: words that end a cue's scope
_TERMINATORS = re.compile(
    r"\b(?:but|however|although|though|except|whereas|which|yet|aside from|apart from|"
    r"otherwise|while|given|due to|secondary to|related to|because|representing|with)\b|[;:]",
    re.IGNORECASE,
)
#: a comma followed by these starts a new finding, ending the scope; so does a coordinated
#: clause of its own ("the heart is normal and there is a large effusion": "large" is the
#: effusion's)
_NEW_CLAUSE = re.compile(
    r",\s*(?:and\s+)?(?:there|with|likely|probably|possibly|possible|questionable|suspected|no|"
    r"without|which|but|however|although)\b|"
    r"\s(?:and|but)\s+there\s+(?:is|are|was|were|has|have|appears?|remains?)\b",
    re.IGNORECASE,
)


def _compile(patterns: Iterable[str]) -> re.Pattern[str]:
    """One pattern matching any of ``patterns``, each starting at a word boundary."""
    return re.compile("|".join(rf"(?<![\w-])(?:{p})" for p in patterns), re.IGNORECASE)


#: a suspicion stated after the finding ("atelectasis suspected": uncertain) and its denial, by a
#: "not" ("pneumonia is not suspected") or by a negation before the finding ("no pneumothorax is
#: suspected"): negated
_SUSPECTED = re.compile(r"(?:(?:is|are)\s+)?(not\s+)?suspected\b", re.IGNORECASE)
#: a cause offered with a hedge: what follows it is uncertain ("may be due to fluid overload")
_HEDGED_CAUSE = re.compile(
    r"(?:(?:may|might|could) (?:\w+ )?be|possibly|probably|likely|presumably|perhaps) "
    r"(?:(?:due|secondary|related) to|represent(?:s|ing)?|reflect(?:s|ing)?)\s+(?:\w+\s+){0,3}$",
    re.IGNORECASE,
)
#: between two mentions: they are offered as alternatives ("atelectasis or pneumonia")
_ALTERNATIVE = re.compile(r"^\s*,?\s*(?:and/)?or\s+(?:\w+\s+){0,2}$", re.IGNORECASE)
#: a differential: it hedges the findings named next to it on either side ("atelectasis versus
#: pneumonia", "effusion versus thickening"), not those further off ("opacity, atelectasis versus
#: pneumonia": the opacity is seen, its cause is in doubt)
_VERSUS = re.compile(r"\b(?:versus|vs\b\.?)", re.IGNORECASE)
#: between two findings after a "versus": the differential goes on ("atelectasis versus
#: consolidation, aspiration"); an "and" ends it ("..., and a small effusion")
_DIFFERENTIAL_GOES_ON = re.compile(r"^\s*,\s*(?:or\s+)?$", re.IGNORECASE)
_FINDING_RE = {label: _compile(p) for label, p in FINDINGS.items()}
#: a hedge right before these governs what they name, not the finding before it ("opacity,
#: possibly representing pneumonia": the opacity is seen, pneumonia is the doubt)
_CAUSE_NEXT = re.compile(
    r"\s*(?:represent|reflect|due to|secondary to|related to|(?:\w+\s+){0,2}?(?:"
    + "|".join(p for phrases in FINDINGS.values() for p in phrases)
    + "))",
    re.IGNORECASE,
)
#: a finding named inside a caveat about the study is not a mention ("sensitivity for
#: pneumothorax is reduced on a portable film")
_CAVEAT = re.compile(
    r"\b(?:sensitivity|evaluation|assessment|detection|exclusion) (?:for|of)\s+(?:\w+\s+)?$",
    re.IGNORECASE,
)
#: a fracture of hardware is the device's, not a bone's ("fractured sternal wire")
_HARDWARE = r"(?:wires?|leads?|screws?|plates?|rods?|hardware|catheters?|tubes?|stents?|pins?)"
_HARDWARE_FRACTURE = re.compile(
    rf"fractur\w*\s+(?:\w+\s+){{0,3}}?{_HARDWARE}\b|\b{_HARDWARE}\s+(?:is|are|was|were|appears?|"
    rf"remains?)?\s*(?:\w+\s+)?fractur",
    re.IGNORECASE,
)
_ANATOMY_RE = {label: _compile(p) for label, p in ANATOMY.items() if p}
_GONE_RE = {label: _compile(p) for label, p in GONE.items()}
#: each lexicon label with its naming expressions and anatomy phrases
_LEXICON = [(label, _FINDING_RE[label], _ANATOMY_RE.get(label)) for label in FINDINGS]
#: a field of a structured report: "Pneumothorax: none.", "Lines and tubes: ..." (the name, the
#: colon, the value); its value says what the name's finding is
_FIELD = re.compile(r"^\s*[A-Za-z][A-Za-z /&,-]{0,40}?:\s*")
#: a field's value that says its finding is absent ("Pneumothorax: None.")
_ABSENT_VALUE = re.compile(
    r"(?:none|no|absent|negative|not (?:seen|present|identified|visualized))[\s.;]*",
    re.IGNORECASE,
)
_NEG_BEFORE = re.compile(_NEGATION_BEFORE, re.IGNORECASE)
_NEG_AFTER = re.compile(_NEGATION_AFTER, re.IGNORECASE)
_UNC_BEFORE = re.compile(_UNCERTAIN_BEFORE, re.IGNORECASE)
_UNC_AFTER = re.compile(_UNCERTAIN_AFTER, re.IGNORECASE)
_PSEUDO_RE = re.compile(_PSEUDO, re.IGNORECASE)
_NORMAL_RE = re.compile(rf"\b(?:{_NORMAL})\b", re.IGNORECASE)
_ABNORMAL_RE = re.compile(rf"\b(?:{_ABNORMAL})\b", re.IGNORECASE)
_BORDERLINE_RE = re.compile(rf"\b(?:{_BORDERLINE})\b", re.IGNORECASE)


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


def has_lexicon(label: str, findings: Findings | None = None) -> bool:
    """Whether mentions of ``label`` can be found (a lexicon entry, or a finding of
    ``findings``)."""
    return label in FINDINGS or (findings is not None and label in findings)


def _clause(sentence: str, start: int, end: int) -> tuple[int, int]:
    """The clause around characters ``start:end``: from the last terminator before to the next."""
    lo, hi = 0, len(sentence)
    for m in _TERMINATORS.finditer(sentence):
        if m.end() <= start:
            lo = m.end()
        elif m.start() >= end:
            hi = min(hi, m.start())
    for m in _NEW_CLAUSE.finditer(sentence):
        if m.end() <= start:
            lo = max(lo, m.start() + 1)
        elif m.start() >= end:
            hi = min(hi, m.start())
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
    if cue := _UNC_BEFORE.search(before) or _HEDGED_CAUSE.search(sentence[:start]):
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
    chunk_lo = sentence.rfind(",", lo, start) + 1
    chunk_hi = sentence.find(",", end, hi)
    chunk = sentence[max(lo, chunk_lo) : chunk_hi if chunk_hi >= 0 else hi]
    abnormal = _ABNORMAL_RE.search(chunk)
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
    for versus in _VERSUS.finditer(sentence):
        lo, hi = _clause(sentence, *versus.span())
        before = [m for m in ordered if lo <= m.span[0] and m.span[1] <= versus.start()]
        after = [m for m in ordered if versus.end() <= m.span[0] and m.span[1] <= hi]
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
        replace(m, assertion="uncertain", cue=hedged[id(m)])
        if id(m) in hedged and m.assertion == "affirmed"
        else m
        for m in ordered
    ]


def find_mentions(
    text: str, labels: Iterable[str] | None = None, findings: Findings | None = None
) -> list[Mention]:
    """Every mention of ``labels`` (default: every label with a lexicon, and every finding of
    ``findings``, those a hospital defined: :mod:`reportfed.text.findings`) in ``text``. Each is
    read among the mentions of every finding, so that what is read of a label does not depend on
    which others are asked ("opacity or atelectasis" hedges atelectasis either way)."""
    every = (*FINDINGS, *(findings.names if findings is not None else ()))
    wanted = set(labels if labels is not None else every)
    out: list[Mention] = []
    for i, sentence in enumerate(findings_sentences(text)):
        found = [m for m in _sentence_mentions(sentence, findings) if m.label in wanted]
        out += found if i == 0 else [replace(m, sentence=i) for m in found]
    return out


def _expressions(
    findings: Findings | None,
) -> list[tuple[str, re.Pattern[str], re.Pattern[str] | None]]:
    """Each finding's naming expressions and anatomy phrases: the lexicon's, then ``findings``'."""
    if findings is None:
        return _LEXICON
    return _LEXICON + [(name, *compiled) for name, compiled in findings.compiled().items()]


@functools.lru_cache(maxsize=2**15)
def _sentence_mentions(sentence: str, findings: Findings | None) -> tuple[Mention, ...]:
    """The mentions of every finding in one sentence, as the report's sentence 0. Remembered:
    hospitals' reports repeat their sentences ("No pneumothorax."), and a sentence reads the same
    in any report."""
    found: list[Mention] = []
    hardware = [m.span() for m in _HARDWARE_FRACTURE.finditer(sentence)]
    for label, named, anatomy in _expressions(findings):
        spans = [
            m.span()
            for m in named.finditer(sentence)
            if not _CAVEAT.search(sentence, 0, m.start())
            and not (label == "Fracture" and any(a <= m.start() < b for a, b in hardware))
        ]
        for span in spans:
            state, cue = _assert(sentence, *span)
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
    return tuple(_hedged(sentence, _fields(sentence, found)))


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
    findings: Findings | None = None,
    corrections: Corrections | None = None,
) -> dict[str, Mention | None]:
    """Per label, the mention of ``text`` that decides the report's state (:func:`decide`); where
    an addendum mentions the label, the addendum's mentions alone decide it (a later read corrects
    the first). ``findings``: those a hospital defined, read as the lexicon's are (an affirmed or
    uncertain mention of one with a ``parent`` is one of its parent too: a hiatal hernia is a
    hernia, but no hiatal hernia says nothing of other hernias); ``corrections``: phrasings its
    readers corrected, read as corrected."""
    labels = list(labels)
    children = _children(labels, findings)
    mentions = find_mentions(text, [*labels, *children], findings)
    if corrections:
        mentions = corrections.apply(mentions)
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


def _children(labels: list[str], findings: Findings | None) -> dict[str, str]:
    """The findings of ``findings`` whose parent is one of ``labels`` -> that parent."""
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
