"""Which sentences of a report are English, the one language the text rules read.

A language identifier alone misjudges telegraphic radiology English: on IU's 8,601 distinct
findings sentences py3langid, restricted to the languages below, calls 3.8% of them another
language ("Bibasilar atelectasis.", "NG tube in stomach."), lingua 7.5% and langdetect 8.3%
(``benchmarks/language_id.py``). So a sentence is another language's only where its own words
say so and the identifier agrees: it holds more function words of the languages reports are
most often written in beside English (German, French, Spanish, Italian, Portuguese, Dutch, the
Nordic ones) and words spelt with letters beyond ASCII than English function words, and either
the identifier (py3langid 0.4, over :data:`LANGUAGES`) names another language for the whole
report's findings, or it does for the sentence and the sentence holds such a function word.
Evidence ignores words that are no word of a sentence: an abbreviation in capitals in mixed-case
text ("LA enlargement"), a hyphenated prefix ("Non-displaced"). The identifier runs only on
reports where some word is such evidence: an English report never loads it.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence

#: the languages the identifier chooses between (ISO 639-1)
LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl", "sv", "da", "no")
#: function words of English
ENGLISH_WORDS = frozenset({
    "the", "is", "are", "was", "were", "of", "and", "with", "without", "there", "not", "in", "on",
    "at", "to", "a", "an", "has", "have", "seen", "noted", "clear", "size", "heart", "lung", "lungs",
    "no", "or", "for", "by", "from", "this", "that", "be", "been",
})  # fmt: skip
#: function words of the other languages, and their answers to a template field ("nein")
OTHER_WORDS = frozenset({
    "kein", "keine", "keiner", "keinen", "nicht", "und", "mit", "ohne", "der", "die", "das", "ist",
    "sind", "im", "zeigt", "nein", "pas", "de", "du", "des", "le", "la", "les", "et", "avec",
    "sans", "est", "un", "une", "sin", "con", "el", "los", "las", "y", "hay", "se", "non", "di",
    "il", "della", "senza", "nessun", "nessuna", "não", "sem", "com", "nenhum", "geen", "het",
    "een", "niet", "ingen", "ikke", "och", "og", "med", "uden", "utan", "nej", "nei", "er",
})  # fmt: skip
#: a word: letters of any script, with the hyphenated parts that follow it ("non-displaced")
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
#: a run of word characters, as ``\b`` delimits one
_TOKEN = re.compile(r"\w+")


def _might_be(sentence: str) -> bool:
    """Whether ``sentence`` holds what might be evidence of another language, looked for before
    any word is weighed: a character beyond ASCII, or one of :data:`OTHER_WORDS` (in any case).
    A set lookup per token: an alternation of the words, tried at every position, cost four
    times as much on IU's sentences (``benchmarks/warm_labelling.py`` times the path)."""
    return not sentence.isascii() or not OTHER_WORDS.isdisjoint(_TOKEN.findall(sentence.lower()))


def _evidence(sentence: str, mixed_case: bool) -> tuple[int, int, int]:
    """Counts of the sentence's other-language function words, words with letters beyond
    ASCII, and English function words (``mixed_case``: the report has lower-case letters, so a
    word in capitals is an abbreviation)."""
    other = accented = english = 0
    for word in _WORD.findall(sentence):
        if "-" in word or (mixed_case and len(word) > 1 and word.isupper()):
            continue
        low = word.lower()
        other += low in OTHER_WORDS
        english += low in ENGLISH_WORDS
        accented += not word.isascii()
    return other, accented, english


@functools.lru_cache(maxsize=1)
def _identifier() -> object:
    import py3langid

    py3langid.set_languages(list(LANGUAGES))
    return py3langid


def _not_english(text: str) -> bool:
    """Whether the identifier names another language than English for ``text``."""
    ranked = dict(_identifier().rank(text))  # type: ignore[attr-defined]
    top = max(ranked, key=ranked.__getitem__)
    return top != "en" and math.isfinite(ranked[top])


def foreign_sentences(sentences: Sequence[str]) -> list[bool]:
    """Per sentence of one report (its findings sentences), whether it is written in another
    language than English (see the module docstring)."""
    if not any(map(_might_be, sentences)):  # an English report, in one pass
        return [False] * len(sentences)
    mixed = any(c.islower() for s in sentences for c in s)
    counts = [_evidence(s, mixed) for s in sentences]
    if not any(other or accented for other, accented, _ in counts):
        return [False] * len(sentences)
    others = sum(o + a for o, a, _ in counts)
    report = others > sum(e for _, _, e in counts) and _not_english(" ".join(sentences))
    return [
        o + a > e and (report or (o > 0 and _not_english(s)))
        for s, (o, a, e) in zip(sentences, counts, strict=True)
    ]
