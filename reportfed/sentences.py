"""Report text -> sentences, by rules written for radiology reports.

Handles what a general-purpose splitter gets wrong in reports:

* section headers (``FINDINGS:``, ``Impression:``) start a new sentence and are dropped;
* numbered lists (``1. ...  2) ...``) start a new item at each number, which is dropped;
* de-identification blanks (``___``, ``XXXX``) stay inside their sentence;
* abbreviations (``Dr.``, ``approx.``, ``e.g.``) and decimals (``3.5 cm``) do not end a sentence;
* a missing final period, blank lines and stray punctuation (``. .``) are tolerated;
* semicolons end a clause, so that "no effusion; mild cardiomegaly" becomes two units.

A sentence longer than :data:`MAX_WORDS` words is cut into overlapping windows
(:func:`windows`), so that an encoder that reads at most 256 word pieces never truncates one
silently.
"""

from __future__ import annotations

import re

#: Longest unit (in whitespace-separated words) given to the encoder; longer sentences are
#: windowed. 96 words stay under 256 word pieces unless a word averages over 2.6 pieces.
MAX_WORDS = 96
#: Words shared by consecutive windows of a long sentence.
OVERLAP = 24

_SECTION_WORDS = (
    "findings|impression|indications?|history|comparison|technique|examination|exam|conclusion"
    "|clinical|reason|procedure|recommendations?|final|addendum|summary|notification|wet read"
)
#: a section header: upper-case words, or a known section word and up to two more, then a colon
_HEADER = re.compile(
    rf"(?<![A-Za-z])([A-Z][A-Z /&()-]*[A-Z)]|(?i:{_SECTION_WORDS})(?: [A-Za-z]+){{0,2}}):(?=\s|$)"
)
_NUMBERED = re.compile(r"(?:^|(?<=\s))\(?\d{1,2}[.)](?=\s+[A-Za-z_(\"'])")
_ABBREVIATIONS = frozenset(
    [
        "dr",
        "mr",
        "mrs",
        "ms",
        "st",
        "vs",
        "approx",
        "e.g",
        "i.e",
        "etc",
        "fig",
        "no",
        "nos",
        "cm",
        "mm",
        "ap",
        "pa",
        "ca",
        "al",
        "resp",
        "min",
        "max",
    ]
)
_END = re.compile(r"[.!?;]+(?=\s|$)")
_WORDS = re.compile(r"\S+")


def _segments(text: str) -> list[str]:
    """Split on blank lines, section headers and list numbers (boundaries that need no period),
    dropping the headers and numbers themselves. A single newline is a wrapped line, not a break."""
    parts: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        drops = sorted(
            [m.span() for m in _HEADER.finditer(block)]
            + [m.span() for m in _NUMBERED.finditer(block)]
        )
        pos = 0
        for a, b in drops:
            if a >= pos:
                parts.append(block[pos:a])
                pos = b
        parts.append(block[pos:])
    return parts


def _ends_sentence(segment: str, end: re.Match[str]) -> bool:
    """Whether the punctuation ``end`` closes a sentence (not an abbreviation or initial)."""
    if ";" in end.group() or "!" in end.group() or "?" in end.group():
        return True
    before = segment[: end.start()].split()
    word = before[-1].lower().rstrip(".") if before else ""
    if word in _ABBREVIATIONS:
        return False
    return not (len(word) == 1 and word.isalpha() and word not in "ai")


def split_sentences(text: str) -> list[str]:
    """The sentences of a report, in order, whitespace-normalised, without headers or list
    numbers. A text with no sentence punctuation is one sentence; units without a letter or
    digit (``". ."``, ``"___"``) are dropped."""
    out: list[str] = []
    for segment in _segments(text.replace("\r", "\n")):
        start = 0
        for end in _END.finditer(segment):
            if _ends_sentence(segment, end):
                out.append(segment[start : end.end()])
                start = end.end()
        out.append(segment[start:])
    sentences = [" ".join(s.split()).rstrip(";").strip() for s in out]
    return [s for s in sentences if re.search(r"[A-Za-z0-9]", s.replace("XXXX", ""))]


def windows(sentence: str, max_words: int = MAX_WORDS, overlap: int = OVERLAP) -> list[str]:
    """``sentence`` itself, or overlapping windows of ``max_words`` words when it is longer."""
    words = _WORDS.findall(sentence)
    if len(words) <= max_words:
        return [sentence]
    if not 0 <= overlap < max_words:
        raise ValueError(f"overlap must be in [0, {max_words}), got {overlap}")
    step = max_words - overlap
    starts = range(0, len(words) - overlap, step)
    return [" ".join(words[s : s + max_words]) for s in starts]


def report_units(text: str) -> list[str]:
    """What the sentence-level model reads of a report: its sentences, long ones windowed.
    Never empty for a text with a letter or digit."""
    units = [w for s in split_sentences(text) for w in windows(s)]
    return units or [" ".join(text.split())]
