"""Report text -> sentences, by rules written for radiology reports.

Handles what a general-purpose splitter gets wrong in reports:

* section headers (``FINDINGS:``, ``Impression:``) start a new sentence and are dropped; the
  sentences of sections that give the study's context (indication, history, comparison,
  technique) are not read by the labeler (:func:`findings_sentences`);
* numbered lists (``1. ...  2) ...``) start a new item at each number, which is dropped;
* de-identification blanks (``___``, ``XXXX``) stay inside their sentence;
* abbreviations (``Dr.``, ``approx.``, ``e.g.``) and decimals (``3.5 cm``) do not end a sentence;
* a missing final period, blank lines and stray punctuation (``. .``) are tolerated;
* semicolons end a clause, so that "no effusion; mild cardiomegaly" becomes two units;
* characters that show nothing (zero-width spaces, the byte-order mark, bidirectional controls,
  variation selectors) are read as the text shows (:func:`as_read`): removed, so that none
  parts a word; a full stop followed by a capitalised word ends a sentence even without a space,
  so that none joins two sentences either.

A sentence longer than :data:`MAX_WORDS` words is cut into overlapping windows
(:func:`windows`), so that an encoder that reads at most 256 word pieces never truncates one
silently.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from reportfed.core.characters import as_read
from reportfed.core.config import GRANULARITIES, Granularity
from reportfed.core.errors import ConfigError

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
_NUMBERED = re.compile(r"(?<!\S)\(?\d{1,2}[.)](?=\s+[A-Za-z_(\"'])")
#: words whose period does not end a sentence
_ABBREVIATIONS = frozenset(
    ["dr", "mr", "mrs", "ms", "vs", "approx", "e.g", "i.e", "etc", "fig", "al", "resp"]
)
#: sections that say why or how the study was done, not what it shows: the labeler skips them
#: ("INDICATION: evaluate for pneumonia" is no finding of this radiograph)
_CONTEXT_SECTIONS = re.compile(
    r"(?:clinical |brief )?(?:indications?|history|reason|comparisons?|technique|examination|"
    r"exam|procedure|clinical)\b",
    re.IGNORECASE,
)
#: sub-headers naming the anatomy a finding is about: they start the study's description (a
#: context section ends there) and stay in their sentence ("Heart: normal size" is about the heart)
_ANATOMY = re.compile(
    r"(?<![A-Za-z])((?i:(?:lines(?:,| and| &|/) ?tubes|tubes(?:,| and| &|/) ?lines|lines|tubes|"
    r"support devices|devices|lungs?|lungs and pleura|heart(?: and mediastinum)?|heart size|"
    r"mediastinum|cardiac|cardiomediastinal(?: silhouette)?|hila|hilar|pleura|pleural(?: spaces?)?|"
    r"bones?|osseous(?: structures)?|skeletal|soft tissues?|airways?|upper abdomen|abdomen|"
    r"diaphragms?)):)(?=\s|$)"
)
#: the cut an anatomic sub-header makes (no header name: it keeps the section, or ends a context one)
_SUBHEADER = ""
#: title lines: a banner or the study's name, no sentence ("FINAL REPORT", "PORTABLE AP CHEST")
_TITLE = re.compile(
    r"^\s*(?:(?:FINAL|PRELIMINARY|ADDENDUM|REPORT|PORTABLE|AP|PA|UPRIGHT|SUPINE|SEMI-UPRIGHT|"
    r"LATERAL|AND|FRONTAL|SINGLE|ONE|TWO|VIEWS?|CHEST|RADIOGRAPHS?|X-RAY|XRAY|CXR|STUDY|"
    r"EXAMINATION|EXAM|OF|THE|\(|\)|,|&|-)\s*)+$"
)
#: a request, not a finding ("Assess for effusion.", "Evaluation for pneumonia"): never read as
#: what the study shows. The nouns are requests only where the sentence states nothing
#: ("Evaluation for pneumothorax is limited ..." describes the study)
_REQUEST = re.compile(
    r"^(?:please |to )?(?:(?:assess|evaluate|eval|rule out|r/o|check|look|screen)\b"
    r"|(?:evaluation|assessment)\b(?!.*\b(?:is|are|was|were|limited|shows?|demonstrates?|"
    r"reveals?|seen|noted)\b))",
    re.IGNORECASE,
)
#: what ends a sentence: its punctuation before a space or the end, or a full stop between a
#: word and a capitalised one where the space is missing ("pneumothorax.Small left effusion").
#: Both branches start with the punctuation (the second looks behind it), so that a search skips
#: from one mark to the next instead of trying the pattern at every character
_END = re.compile(r"[.!?;]+(?=\s|$)|\.(?<=[a-z]\.)(?=[A-Z][a-z])")
_WORDS = re.compile(r"\S+")
#: what a sentence needs besides de-identification blanks: a letter or digit
_CONTENT = re.compile(r"[A-Za-z0-9]")


_ADDENDUM = re.compile(r"\s*addend(?:um|a)\b", re.IGNORECASE)


#: a clock time closing a line (a wet read's stamp, "WET READ: ___ ___ 2:14 AM"): the next
#: line starts a sentence of its own
_STAMP = re.compile(r"(\b\d{1,2}:\d{2}\s*[AP]M)[ \t]*\n")
#: MIMIC's indication line, often without a header: the history, "//", the question asked
#: ("___M s/p fall, rib fx on CT // eval PTX"); the paragraph holding it is context
_HISTORY_QUESTION = re.compile(r"\s//|//\s")
_UNLABELLED_INDICATION = "indication"
#: a first paragraph without a header that reads as the clinical question: it describes the
#: patient ("___-year-old man with fever", "72M s/p fall") or ends asking ("Chest pain, r/o
#: pneumothorax?", "... evaluate for pneumonia."); it is context where findings follow it
_PATIENT = re.compile(
    r"^\W*(?:(?:___|\d{1,3})\s*-?\s*(?:years?|yrs?|y/?o|yo|[MF])\b|(?:an? )?(?:\w+ )?"
    r"(?:man|woman|male|female|patient|pt|boy|girl)\s+(?:with|s/p|status post|who)\b)",
    re.IGNORECASE,
)
_ASKS = re.compile(r"\b(?:eval(?:uate|uation)?|assess|r/o|rule out)\b", re.IGNORECASE)
#: a context section's name without its colon: alone on its line in any case ("Indication"
#: then a line break), or in capitals starting a line of other words ("HISTORY ___-year-old
#: woman ..."; in a report all in capitals, "COMPARISON ___." is a sentence): the header it is
_BARE_HEADER = re.compile(
    rf"^([ \t]*(?i:{_SECTION_WORDS})(?:[ \t]+[A-Za-z]+){{0,2}})[ \t]*$|"
    r"^([ \t]*(?:INDICATIONS?|HISTORY|CLINICAL (?:HISTORY|INFORMATION|INDICATION)|"
    r"REASON FOR (?:EXAM|EXAMINATION|STUDY)|COMPARISONS?|TECHNIQUE))(?=[ \t]+[^\s:])"
    r"(?=[^\n]*[a-z])",  # the header stands out from the line's own words, not all capitals
    re.MULTILINE,
)


def _clinical_question(block: str) -> bool:
    """Whether a header-less paragraph reads as the clinical question: it describes the
    patient (:data:`_PATIENT`), or its last sentence asks ("?") or requests (:data:`_ASKS`)."""
    end = block.rstrip()
    if end.endswith("?") or _PATIENT.match(block):
        return True
    return bool(_ASKS.search(end, end.rfind(".", 0, len(end) - 1) + 1))


def _colon_matches(pattern: re.Pattern[str], block: str) -> Iterator[re.Match[str]]:
    """The matches in ``block`` of ``pattern``, a header that ends at a colon (:data:`_HEADER`,
    :data:`_ANATOMY`): the text after the block's last colon, most of a paragraph, is not
    searched."""
    return pattern.finditer(block, 0, block.rfind(":") + 2)


def _is_context(section: str) -> bool:
    """Whether ``section`` (a header) gives the study's context, not what it shows."""
    return bool(_CONTEXT_SECTIONS.match(section.strip()))


def _segments(text: str) -> list[tuple[str, str]]:
    """Split on blank lines, section headers, anatomic sub-headers and list numbers (boundaries
    that need no period), dropping the headers, title lines and numbers themselves: ``(section,
    text)`` pairs, ``section`` the header the text is under ("" before any). A single newline is a
    wrapped line, not a break. A context section (indication, history, comparison, technique)
    ends at a blank line or an anatomic sub-header: the findings that follow it often have no
    header of their own. A paragraph without a header is context where it holds MIMIC's
    "history // question", or where it comes first, reads as the clinical question
    (:func:`_clinical_question`) and findings follow it; a context section's name without its
    colon is its header (:data:`_BARE_HEADER`)."""
    parts: list[tuple[str, str]] = []
    section = ""
    blocks = [
        "\n".join(line for line in block.split("\n") if not _TITLE.match(line))
        for block in re.split(r"\n\s*\n", text)
    ]
    blocks = [
        _BARE_HEADER.sub(r"\1\2:", block) if _BARE_HEADER.search(block) else block
        for block in blocks
        if block.strip()
    ]
    for k, block in enumerate(blocks):
        if _is_context(section):
            section = ""
        question = k == 0 and k + 1 < len(blocks) and _clinical_question(block)
        headers = list(_colon_matches(_HEADER, block))
        history_question = "//" in block and bool(_HISTORY_QUESTION.search(block))
        if (history_question or question) and not headers:
            parts.append((_UNLABELLED_INDICATION, block))  # "history // question", or asked
            continue
        # an anatomic sub-header is a boundary of no width (its words stay), also where it is
        # written in capitals like a header ("HEART: normal size")
        subheaders = {m.start() for m in _colon_matches(_ANATOMY, block)}
        cuts = sorted(
            [(m.span(), m.group(1)) for m in headers if m.start() not in subheaders]
            + [((a, a), _SUBHEADER) for a in subheaders]
            + [(m.span(), None) for m in _NUMBERED.finditer(block)]
        )
        pos = 0
        for (a, b), header in cuts:
            if a < pos:
                continue
            parts.append((section, block[pos:a]))
            if header == _SUBHEADER:
                section = "" if _is_context(section) else section
            else:
                section = header or section
            pos = b
        parts.append((section, block[pos:]))
    return parts


def _word_before(text: str, pos: int) -> str:
    """The whitespace-delimited word that ends before ``text[pos]`` (spaces between skipped), read
    backwards from ``pos``: the cost is the word's length, never the text's."""
    end = pos
    while end > 0 and text[end - 1].isspace():
        end -= 1
    start = end
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    return text[start:end]


def _ends_sentence(segment: str, end: re.Match[str]) -> bool:
    """Whether the punctuation ``end`` closes a sentence (not an abbreviation or initial)."""
    if ";" in end.group() or "!" in end.group() or "?" in end.group():
        return True
    word = _word_before(segment, end.start()).lower().rstrip(".")
    if word in _ABBREVIATIONS:
        return False
    return not (len(word) == 1 and word.isalpha() and word not in "ai")


def split_sections(text: str) -> list[tuple[str, str]]:
    """The sentences of a report, in order, each with its section header ("" before any):
    whitespace-normalised, without headers or list numbers. A text with no sentence punctuation
    is one sentence; units without a letter or digit (``". ."``, ``"___"``) are dropped."""
    out: list[tuple[str, str]] = []
    text = as_read(text).replace("\r", "\n")
    if _STAMP.search(text):
        text = _STAMP.sub(r"\1.\n", text)
    for section, segment in _segments(text):
        start = 0
        pieces = []
        for end in _END.finditer(segment):
            if _ends_sentence(segment, end):
                pieces.append(segment[start : end.end()])
                start = end.end()
        pieces.append(segment[start:])
        for piece in pieces:
            sentence = " ".join(piece.split()).rstrip(";").strip()
            if _CONTENT.search(sentence.replace("XXXX", "")):
                out.append((section, sentence))
    return out


def split_sentences(text: str) -> list[str]:
    """The sentences of a report (see :func:`split_sections`)."""
    return [sentence for _, sentence in split_sections(text)]


def findings_sentences(text: str) -> list[str]:
    """The sentences that describe the study: all but those of context sections (indication,
    history, comparison, technique, examination) and requests ("Assess for effusion."); if that
    leaves none, every sentence but the requests and questions; in English alone (those in
    another language: :func:`other_language_sentences`)."""
    return [sentence for _, sentence in _findings_sections(text)]


def addendum_start(text: str) -> int | None:
    """Where the report's first addendum begins, as an index into :func:`findings_sentences`
    (``None``: no addendum)."""
    sections = _findings_sections(text)
    return next((i for i, (sec, _) in enumerate(sections) if _ADDENDUM.match(sec)), None)


def other_language_sentences(text: str) -> tuple[str, ...]:
    """The sentences of ``text`` that describe the study but are written in another language
    than English (:mod:`reportfed.text.language`): :func:`findings_sentences` leaves them out,
    since the rules and the model read English alone."""
    return _reading(text)[1]


def _findings_sections(text: str) -> tuple[tuple[str, str], ...]:
    """:func:`findings_sentences` with their sections."""
    return _reading(text)[0]


@functools.lru_cache(maxsize=4096)
def _reading(text: str) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The English sentences that describe the study, with their sections, and those in
    another language; remembered for the last reports read: labelling a chunk of reports splits
    each one for the model and again for its mentions."""
    from reportfed.text.language import foreign_sentences

    pairs = split_sections(text)
    kept = [(sec, s) for sec, s in pairs if not _is_context(sec) and not _request(s)]
    kept = kept or [
        (sec, s) for sec, s in pairs if not _request(s) and not s.rstrip().endswith("?")
    ]
    foreign = foreign_sentences([s for _, s in kept])
    english = tuple(pair for pair, other in zip(kept, foreign, strict=True) if not other)
    return english, tuple(s for (_, s), other in zip(kept, foreign, strict=True) if other)


def _request(sentence: str) -> bool:
    """A request for what to look at, not a finding ("Evaluate for pneumonia", "r/o effusion")."""
    return bool(_REQUEST.match(sentence))


def check_granularity(granularity: str) -> Granularity:
    """``granularity`` if it is one of :data:`GRANULARITIES`, else a ``ValueError``."""
    if granularity not in GRANULARITIES:
        raise ConfigError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    return granularity


def windows(sentence: str, max_words: int = MAX_WORDS, overlap: int = OVERLAP) -> list[str]:
    """``sentence`` itself, or overlapping windows of ``max_words`` words when it is longer."""
    words = _WORDS.findall(sentence)
    if len(words) <= max_words:
        return [sentence]
    if not 0 <= overlap < max_words:
        raise ConfigError(f"overlap must be in [0, {max_words}), got {overlap}")
    step = max_words - overlap
    starts = range(0, len(words) - overlap, step)
    return [" ".join(words[s : s + max_words]) for s in starts]


def report_units(text: str) -> list[str]:
    """What the sentence-level model reads of a report: its :func:`findings_sentences`, long
    ones windowed; ``[""]`` when its only sentences are requests ("Assess for effusion."), the
    whole text when it has no sentence at all. Never empty."""
    units = [w for s in findings_sentences(text) for w in windows(s)]
    if units:
        return units
    # sentences that are all requests or questions show nothing: an empty unit, never the request
    return [""] if split_sections(text) else [" ".join(as_read(text).split())]
