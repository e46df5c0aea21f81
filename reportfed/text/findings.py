"""Findings a hospital defines in a file (``findings.toml``), read by the same cue rules as the
built-in findings (:mod:`reportfed.text.assertion`): negation, hedges before and after,
alternatives, structured fields and addenda, so each gets the four states and its evidence.

One ``[[finding]]`` table per finding::

    [[finding]]
    name = "Hiatal hernia"                      # its label (not a built-in label or alias)
    phrases = ["hiatal hernia", "hiatus hernia"] # plain words that name it (a plural ending on
                                                 # the last word matches too: "hernias")
    patterns = ['para-?esophageal hernias?']     # optional: regular expressions, the escape hatch
    anatomy = ["gastroesophageal junction"]      # optional: named beside a normal/abnormal word
    aliases = ["Hiatus Hernia"]                  # optional: other sites' column names for it
    parent = "Hernia"                            # optional: the label it refines

A file that cannot be used ends in one :class:`~reportfed.core.errors.InputFileError` naming
its line: a key reportfed does not know, a phrase or pattern that matches everything, a name
that is a built-in label, the same phrase in two findings, a bad regular expression. The file's
SHA-256 (:attr:`Findings.checksum`) names the definitions a model was trained with.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import tomllib

from reportfed.core.errors import InputFileError
from reportfed.core.labels import KNOWN_LABELS, LabelError, canonical

#: the keys a finding's table may have, and whether each is a list of strings
KEYS = {
    "name": False,
    "phrases": True,
    "patterns": True,
    "anatomy": True,
    "aliases": True,
    "parent": False,
}
#: ordinary sentences a finding's pattern must not all match (one that does names nothing)
_ORDINARY = (
    "The lungs are clear.",
    "There is no change from the prior study.",
    "The heart size is normal.",
)
#: words that name no finding: a phrase of these alone matches everything
_COMMON = frozenset((
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "no", "not", "of", "and", "or",
    "with", "without", "in", "on", "at", "to", "from", "there", "this", "that", "as", "for",
    "by", "it", "its", "normal", "seen", "present", "noted"
))  # fmt: skip


@dataclass(frozen=True)
class Finding:
    """One defined finding: its ``name``, the ``phrases`` (plain words) and ``patterns``
    (regular expressions) that name it, the ``anatomy`` phrases that mention it beside a
    normal or abnormal word, other sites' names for it (``aliases``) and the label it refines
    (``parent``)."""

    name: str
    phrases: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    anatomy: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    parent: str | None = None

    def expressions(self) -> tuple[str, ...]:
        """Every regular expression that names the finding: each phrase as whole words, any
        whitespace between them and a plural ending on the last, then the patterns."""
        return tuple(phrase_pattern(p) for p in self.phrases) + self.patterns


@dataclass(frozen=True)
class Findings:
    """The findings of one file and the file's SHA-256."""

    findings: tuple[Finding, ...]
    checksum: str

    def __hash__(self) -> int:  # a key of the per-sentence cache: the checksum is enough
        return hash(self.checksum)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.findings)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def finding(self, name: str) -> Finding:
        """The finding named ``name``."""
        return next(f for f in self.findings if f.name == name)

    def columns(self) -> dict[str, str]:
        """The table columns that hold each finding, in lower case: its name and its aliases
        (other sites' names for it) -> its name."""
        return {n.casefold(): f.name for f in self.findings for n in (f.name, *f.aliases)}

    def compiled(self) -> Mapping[str, tuple[re.Pattern[str], re.Pattern[str] | None]]:
        """Per finding, its naming expressions and its anatomy phrases compiled."""
        return _compiled(self)

    def record(self) -> dict[str, Any]:
        """The definitions as a model file's provenance keeps them (:meth:`from_record`)."""
        return {"checksum": self.checksum, "findings": [asdict(f) for f in self.findings]}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Findings:
        """The definitions :meth:`record` kept."""
        findings = tuple(
            Finding(
                name=str(f["name"]),
                phrases=tuple(f["phrases"]),
                patterns=tuple(f["patterns"]),
                anatomy=tuple(f["anatomy"]),
                aliases=tuple(f["aliases"]),
                parent=f["parent"],
            )
            for f in record["findings"]
        )
        return cls(findings, str(record["checksum"]))


@functools.lru_cache(maxsize=8)
def _compiled(findings: Findings) -> dict[str, tuple[re.Pattern[str], re.Pattern[str] | None]]:
    out = {}
    for f in findings.findings:
        anatomy = [phrase_pattern(p) for p in f.anatomy]
        out[f.name] = (_compile(f.expressions()), _compile(anatomy) if anatomy else None)
    return out


def _compile(patterns: tuple[str, ...] | list[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


def phrase_pattern(phrase: str) -> str:
    """The regular expression of a plain phrase: its words whole, any whitespace or hyphen
    between them, and ``s``/``es`` allowed after the last."""
    words = [re.escape(w) for w in phrase.split()]
    return r"\b" + r"[\s-]+".join(words) + r"(?:s|es)?\b"


def read_findings(path: str | Path) -> Findings:
    """The findings defined in the TOML file ``path`` (see the module docstring)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    text = raw.decode("utf-8", errors="replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputFileError(f"{path}: not TOML ({exc})") from None
    lines = _Lines(path, text)
    for key in data:
        if key != "finding":
            raise lines.error(lines.key(key), f"unknown key {key!r} (findings are [[finding]])")
    tables = data.get("finding", [])
    if not isinstance(tables, list) or not tables:
        raise InputFileError(f"{path}: no [[finding]] table")
    findings = [_finding(k, table, lines) for k, table in enumerate(tables)]
    _check_together(findings, lines)
    return Findings(tuple(findings), hashlib.sha256(raw).hexdigest())


def _finding(k: int, table: dict[str, Any], lines: _Lines) -> Finding:
    """The ``k``-th finding's table, checked alone."""
    for key, value in table.items():
        if key not in KEYS:
            known = ", ".join(KEYS)
            raise lines.error(lines.key(key, k), f"unknown key {key!r} (a finding has {known})")
        many = KEYS[key]
        if many and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise lines.error(lines.key(key, k), f"{key} must be a list of strings")
        if not many and not isinstance(value, str):
            raise lines.error(lines.key(key, k), f"{key} must be a string")
    name = str(table.get("name", "")).strip()
    if not name:
        raise lines.error(lines.header(k), "a finding needs a name")
    if not table.get("phrases") and not table.get("patterns"):
        raise lines.error(lines.header(k), f"{name!r} has no phrases (or patterns) naming it")
    for alias in [name, *table.get("aliases", [])]:
        if _builtin(alias):
            where = lines.key("name" if alias == name else "aliases", k)
            raise lines.error(
                where, f"{alias!r} is the built-in label {canonical(alias)!r}: choose another name"
            )
    for key in ("phrases", "patterns", "anatomy"):
        for value in table.get(key, []):
            expression = value if key == "patterns" else phrase_pattern(value)
            where = lines.value(value, k, key)
            try:
                compiled = re.compile(expression, re.IGNORECASE)
            except re.error as exc:
                raise lines.error(where, f"{value!r} is not a regular expression ({exc})") from None
            common = key != "patterns" and set(value.casefold().split()) <= _COMMON
            if common or compiled.search("") or all(map(compiled.search, _ORDINARY)):
                raise lines.error(where, f"{value!r} matches everything: it names no finding")
    parent = table.get("parent")
    return Finding(
        name,
        tuple(table.get("phrases", [])),
        tuple(table.get("patterns", [])),
        tuple(table.get("anatomy", [])),
        tuple(table.get("aliases", [])),
        canonical(parent, allow_unknown=True) if parent else None,
    )


def _builtin(name: str) -> bool:
    try:
        return canonical(name) in KNOWN_LABELS
    except LabelError:
        return False


def _check_together(findings: list[Finding], lines: _Lines) -> None:
    """Names and phrases used once across the file; parents that exist."""
    names: dict[str, int] = {}
    phrases: dict[str, tuple[int, str]] = {}
    for k, f in enumerate(findings):
        for alias in (f.name, *f.aliases):
            key = alias.casefold()
            if key in names:
                raise lines.error(lines.header(k), f"{alias!r} names two findings")
            names[key] = k
        for phrase in f.phrases:
            key = " ".join(phrase.casefold().split())
            if key in phrases:
                first, other = phrases[key]
                raise lines.error(
                    lines.value(phrase, k, "phrases"),
                    f"{phrase!r} also names {other!r} (line {lines.value(phrase, first, 'phrases')})",
                )
            phrases[key] = (k, f.name)
    for k, f in enumerate(findings):
        if f.parent and not _builtin(f.parent) and f.parent.casefold() not in names:
            raise lines.error(lines.key("parent", k), f"parent {f.parent!r} is no known label")


class _Lines:
    """Where things are in the file, for errors that name a line."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.headers = [i for i, line in enumerate(self.lines) if line.strip() == "[[finding]]"]

    def error(self, line: int, message: str) -> InputFileError:
        return InputFileError(f"{self.path}:{line}: {message}")

    def header(self, k: int) -> int:
        """The line (from 1) of the ``k``-th ``[[finding]]``."""
        return self.headers[k] + 1 if k < len(self.headers) else 1

    def _span(self, k: int | None) -> range:
        if k is None:
            return range(0, self.headers[0] if self.headers else len(self.lines))
        end = self.headers[k + 1] if k + 1 < len(self.headers) else len(self.lines)
        return range(self.headers[k], end)

    def key(self, key: str, k: int | None = None) -> int:
        """The line of ``key = ...`` in the ``k``-th finding (``None``: before the first)."""
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
        return next(
            (i + 1 for i in self._span(k) if pattern.match(self.lines[i])), self.header(k or 0)
        )

    def value(self, value: str, k: int, key: str) -> int:
        """The line of the string ``value`` in the ``k``-th finding, else of its ``key``."""
        for i in self._span(k):
            if f'"{value}"' in self.lines[i] or f"'{value}'" in self.lines[i]:
                return i + 1
        return self.key(key, k)
