"""The lexicon the text rules read with, as data: the built-in findings and cue lists of
``lexicon.toml`` (shipped with reportfed, in the format of a hospital's ``findings.toml``), and
what a hospital adds to them.

:data:`BUILTIN` is the shipped file read once. A :class:`Lexicon` is everything one reading
uses: the built-ins, the findings a hospital defined (:mod:`reportfed.text.findings`; a
definition named like a built-in finding changes what reads it) and the phrasings its readers
corrected (:mod:`reportfed.text.corrections`); it is hashed by its checksum, so the rules
remember a sentence's mentions per lexicon. The stages that apply the lists (sentences, scope,
aggregation) are code, in :mod:`reportfed.text.assertion`.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reportfed.text.corrections import Corrections
    from reportfed.text.findings import Findings

LEXICON_FILE = "lexicon.toml"


@dataclass(frozen=True)
class BuiltIn:
    """The shipped lexicon: per finding its ``patterns``, ``uncertain`` patterns (what names it
    hedged, by convention), ``anatomy`` patterns, ``gone`` patterns and ``unmention`` patterns
    (what names it but is no mention of it), the cue lists (``cues``: regular expressions,
    fragments filled in), the word lists (``words``: matched as whole words), what rules out No
    Finding beyond the findings (``breaks_no_finding``), and the file's SHA-256."""

    findings: dict[str, tuple[str, ...]]
    uncertain: dict[str, tuple[str, ...]]
    anatomy: dict[str, tuple[str, ...]]
    gone: dict[str, tuple[str, ...]]
    unmention: dict[str, tuple[str, ...]]
    cues: dict[str, tuple[str, ...]]
    words: dict[str, tuple[str, ...]]
    breaks_no_finding: tuple[str, ...]
    checksum: str

    def cue(self, name: str) -> str:
        """Cue list ``name`` as one alternation."""
        return "|".join(self.cues[name])

    def word(self, name: str) -> str:
        """Word list ``name`` as one alternation (to be matched as whole words)."""
        return "|".join(self.words[name])


def read_builtin(text: bytes) -> BuiltIn:
    """The lexicon a ``lexicon.toml`` of these bytes holds."""
    data = tomllib.loads(text.decode("utf-8"))
    fragments: dict[str, str] = data.get("fragments", {})

    def filled(pattern: str) -> str:
        for name, value in fragments.items():
            pattern = pattern.replace("{" + name + "}", value)
        return pattern

    findings: dict[str, tuple[str, ...]] = {}
    uncertain: dict[str, tuple[str, ...]] = {}
    anatomy: dict[str, tuple[str, ...]] = {}
    gone: dict[str, tuple[str, ...]] = {}
    unmention: dict[str, tuple[str, ...]] = {}
    for entry in data["finding"]:
        name = entry["name"]
        findings[name] = tuple(entry["patterns"])
        for key, kept in (("uncertain_patterns", uncertain), ("anatomy_patterns", anatomy),
                          ("gone", gone), ("unmention_patterns", unmention)):  # fmt: skip
            if entry.get(key):
                kept[name] = tuple(entry[key])
    return BuiltIn(
        findings,
        uncertain,
        anatomy,
        gone,
        unmention,
        {name: tuple(map(filled, values)) for name, values in data["cues"].items()},
        {name: tuple(values) for name, values in data["words"].items()},
        tuple(data.get("no_finding", {}).get("breaks", ())),
        hashlib.sha256(text).hexdigest(),
    )


#: the lexicon reportfed ships
BUILTIN = read_builtin(resources.files("reportfed.text").joinpath(LEXICON_FILE).read_bytes())


@dataclass(frozen=True)
class Lexicon:
    """What one reading of reports uses: the built-in lexicon (:data:`BUILTIN`), the findings a
    hospital defined (``findings``) and the phrasings its readers corrected (``corrections``)."""

    findings: Findings | None = None
    corrections: Corrections | None = None

    @cached_property
    def checksum(self) -> str:
        """SHA-256 over the built-ins, the definitions and the corrections."""
        h = hashlib.sha256(BUILTIN.checksum.encode())
        if self.findings is not None:
            h.update(self.findings.checksum.encode())
        if self.corrections:
            h.update(repr(self.corrections.record()).encode())
        return h.hexdigest()

    def __hash__(self) -> int:  # a key of the per-sentence cache
        return hash(self.checksum)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lexicon) and self.checksum == other.checksum


#: the built-in lexicon alone
PLAIN = Lexicon()
