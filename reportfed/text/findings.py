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
    unmention = ["sliding hiatal hernia repair"] # optional: phrases that name it but are no
                                                 # mention of it

A ``[[change]]`` table changes how reportfed reads one of its built-in findings at this
hospital (the built-in lexicon is ``reportfed/text/lexicon.toml``, in this format)::

    [[change]]
    name = "Edema"                          # a built-in finding
    unmention = ["vascular congestion"]     # phrases that no longer mention it here
    phrases = ["alveolar flooding"]         # more ways to name it

Its ``phrases`` and ``patterns`` are more ways to name the finding, its ``unmention`` phrases
take a mention away where they match; it has no other keys.

A file that cannot be used ends in one :class:`~reportfed.core.errors.InputFileError` naming
its line: a key reportfed does not know, a phrase or pattern that matches everything, a name
that is a built-in label, the same phrase in two findings, a bad regular expression. The file's
SHA-256 (:attr:`Findings.checksum`) names the definitions a model was trained with.

Definitions that arrive otherwise (a federation member's handshake, a model file's provenance)
pass the same checks (:meth:`Findings.from_record`), so a definition no file could hold is never
admitted, written into a model, or read from one.

Patterns are regular expressions of RE2's syntax (Python's without backreferences and
lookaround), and every defined finding is matched by RE2 (Google's ``google-re2``), whose time
is linear in the text: a definition sent by one hospital runs wherever the federated model
labels, and no pattern can make that take exponential time, as a backtracking engine would on
``(a+)+$``.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import re
import tomllib
import unicodedata
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import re2

from reportfed.core.characters import as_read
from reportfed.core.errors import InputFileError
from reportfed.core.files import FORMULA_STARTS
from reportfed.core.labels import KNOWN_LABELS, LabelError, canonical
from reportfed.core.limits import MAX_NAME
from reportfed.text.lexicon import BUILTIN

#: definitions one file or record may hold, phrases (or patterns, anatomy phrases, aliases) one
#: finding may have, and characters of one of them
MAX_FINDINGS = 1000
MAX_PHRASES = 100_000
MAX_EXPRESSION = 1000

#: the keys a finding's table may have, and whether each is a list of strings
KEYS = {
    "name": False,
    "phrases": True,
    "patterns": True,
    "anatomy": True,
    "aliases": True,
    "parent": False,
    "unmention": True,
}
#: the keys of a ``[[change]]`` table, which changes a built-in finding
CHANGE_KEYS = ("name", "phrases", "patterns", "unmention")
#: sentences of a normal report, naming no finding: a finding's phrase or pattern that matches
#: one would affirm the finding there ("lungs" in "The lungs are clear.")
NORMAL_SENTENCES = (
    "The lungs are clear.",
    "The heart size is normal.",
    "There is no change from the prior study.",
    "The cardiomediastinal silhouette is within normal limits.",
    "No acute cardiopulmonary process.",
    "The osseous structures are intact.",
    "The visualized upper abdomen is unremarkable.",
    "The trachea is midline.",
    "Both hemidiaphragms are well defined.",
    "Lung volumes are normal.",
    "The pulmonary vasculature is normal.",
    "The soft tissues are unremarkable.",
    "Frontal and lateral views of the chest were obtained.",
    "Comparison is made with the prior radiograph.",
    "The mediastinal and hilar contours are normal.",
    "Impression: normal chest radiograph.",
)
#: ordinary sentences an anatomy phrase must not all match (one that does names nothing)
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
    normal or abnormal word, other sites' names for it (``aliases``), the label it refines
    (``parent``) and the phrases that are no mention of it (``unmention``). A ``change``
    (a ``[[change]]`` table) changes the built-in finding of that name instead of defining
    one."""

    name: str
    phrases: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    anatomy: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    parent: str | None = None
    unmention: tuple[str, ...] = ()
    change: bool = False

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
    def defined(self) -> tuple[Finding, ...]:
        """The findings defined here (not the changes to built-in ones)."""
        return tuple(f for f in self.findings if not f.change)

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the findings defined here."""
        return tuple(f.name for f in self.defined)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def finding(self, name: str) -> Finding:
        """The finding defined here named ``name``."""
        return next(f for f in self.defined if f.name == name)

    def columns(self) -> dict[str, str]:
        """The table columns that hold each defined finding, in lower case: its name and its
        aliases (other sites' names for it) -> its name."""
        return {n.casefold(): f.name for f in self.defined for n in (f.name, *f.aliases)}

    def compiled(self) -> Mapping[str, tuple[re.Pattern[str], re.Pattern[str] | None]]:
        """Per defined finding, its naming expressions and its anatomy phrases compiled."""
        return _compiled(self)[0]

    def changes(self) -> Mapping[str, tuple[re.Pattern[str] | None, re.Pattern[str] | None]]:
        """Per finding (built-in or defined here), its further naming expressions (of a change
        to a built-in finding) and its ``unmention`` phrases compiled, where it has either."""
        return _compiled(self)[1]

    def record(self) -> dict[str, Any]:
        """The definitions as a model file's provenance keeps them (:meth:`from_record`)."""
        return {"checksum": self.checksum, "findings": [asdict(f) for f in self.findings]}

    @classmethod
    def from_record(cls, record: object, origin: str = "findings") -> Findings:
        """The definitions :meth:`record` kept, checked as a file's are (an
        :class:`~reportfed.core.errors.InputFileError` naming ``origin`` and the finding)."""
        if not isinstance(record, Mapping) or not isinstance(record.get("checksum"), str):
            raise InputFileError(f"{origin}: definitions must be a table with a checksum")
        tables = record.get("findings")
        if not isinstance(tables, list) or not tables:
            raise InputFileError(f"{origin}: no definition")
        if len(tables) > MAX_FINDINGS:
            raise InputFileError(f"{origin}: {len(tables)} definitions, at most {MAX_FINDINGS}")
        places = _Entries(origin, tables)
        found = []
        for k, table in enumerate(tables):
            if not isinstance(table, Mapping):
                raise InputFileError(f"{places.header(k)}: a definition must be a table")
            given = {key: v for key, v in table.items() if v not in (None, [], (), "", False)}
            change = bool(given.pop("change", False))
            found.append(_finding(k, given, places, change=change))
        _check_together(found, places)
        return cls(tuple(found), record["checksum"])


Compiled = re.Pattern[str]
#: bytes RE2 may take for one finding's compiled phrases (its default, 8 MiB, holds about 4,000
#: of them; this about 30,000)
_RE2_MEMORY = 64 << 20


@functools.lru_cache(maxsize=8)
def _compiled(
    findings: Findings,
) -> tuple[
    dict[str, tuple[Compiled, Compiled | None]], dict[str, tuple[Compiled | None, Compiled | None]]
]:
    defined, changes = {}, {}
    for f in findings.findings:
        anatomy = [phrase_pattern(p) for p in f.anatomy]
        unmention = [phrase_pattern(p) for p in f.unmention]
        if not f.change:
            defined[f.name] = (_compile(f.expressions()), _compile(anatomy) if anatomy else None)
        more = f.expressions() if f.change else ()
        if more or unmention:
            changes[f.name] = (
                _compile(more) if more else None,
                _compile(unmention) if unmention else None,
            )
    return defined, changes


def _compile(patterns: tuple[str, ...] | list[str]) -> re.Pattern[str]:
    """One RE2 expression matching any of ``patterns``, ignoring case (``re2.error`` where one
    is not of RE2's syntax); it finds matches as Python's ``re`` does."""
    options = re2.Options()
    options.case_sensitive = False
    options.max_mem = _RE2_MEMORY
    options.log_errors = False  # the error is raised, and said where it is caught
    return re2.compile("|".join(f"(?:{p})" for p in patterns), options)


def phrase_pattern(phrase: str) -> str:
    """The regular expression of a plain phrase: its words whole, any whitespace or hyphen
    between them, and ``s``/``es`` allowed after the last; a phrase that starts or ends with a
    mark ("(free air)", "s/p Nissen fundoplication.") is matched up to the mark."""
    phrase = as_read(phrase)
    words = [re.escape(w) for w in phrase.split()]
    start = r"\b" if phrase[:1].isalnum() or phrase[:1] == "_" else ""
    end = r"(?:s|es)?\b" if phrase[-1:].isalnum() or phrase[-1:] == "_" else ""
    return start + r"[\s-]+".join(words) + end


def phrase_key(phrase: str) -> str:
    """A phrase as the matcher reads it, to find two that are one (:func:`phrase_pattern`):
    its words in lower case, hyphens as spaces, a plural ending of the last word removed
    ("Hiatal-hernias" is "hiatal hernia")."""
    words = as_read(phrase).casefold().replace("-", " ").split()
    if words and len(words[-1]) > 3:
        last = words[-1]
        words[-1] = (
            last[:-2]
            if last.endswith("es") and not last.endswith("ses")
            else (last[:-1] if last.endswith("s") and not last.endswith("ss") else last)
        )
    return " ".join(words)


def read_findings(path: str | Path) -> Findings:
    """The findings defined in the TOML file ``path`` (see the module docstring)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        text = raw.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(
            f"{path}: not UTF-8 (byte {exc.start + 1}, 0x{raw[exc.start]:02x}): save it as UTF-8, "
            "as TOML files are"
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputFileError(f"{path}: not TOML ({exc})") from None
    found: list[Finding] = []
    for kind in ("finding", "change"):
        lines = _Lines(path, text, kind)
        for key in data:
            if key not in ("finding", "change"):
                raise _error(
                    lines.key(key), f"unknown key {key!r} (tables are [[finding]] or [[change]])"
                )
        tables = data.get(kind, [])
        if not isinstance(tables, list):
            raise _error(lines.key(kind), f"{kind} must be [[{kind}]] tables")
        for k, table in enumerate(tables):
            if not isinstance(table, dict):
                raise _error(lines.header(k), f"a [[{kind}]] must be a table")
        these = [
            _finding(k, table, lines, change=kind == "change") for k, table in enumerate(tables)
        ]
        _check_together(these, lines)
        found += these
    if not found:
        raise InputFileError(f"{path}: no [[finding]] or [[change]] table")
    return Findings(tuple(found), hashlib.sha256(raw).hexdigest())


def _finding(k: int, table: Mapping[str, Any], places: _Places, *, change: bool = False) -> Finding:
    """The ``k``-th finding's table (``change``: a change to a built-in finding), checked
    alone."""
    for key, value in table.items():
        if key not in KEYS:
            known = ", ".join(KEYS)
            raise _error(places.key(key, k), f"unknown key {key!r} (a finding has {known})")
        many = KEYS[key]
        if many and not (
            isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
        ):
            raise _error(places.key(key, k), f"{key} must be a list of strings")
        if not many and not isinstance(value, str):
            raise _error(places.key(key, k), f"{key} must be a string")
        if many and len(value) > MAX_PHRASES:
            raise _error(places.key(key, k), f"{len(value)} {key}, at most {MAX_PHRASES}")
    name = str(table.get("name", "")).strip()
    if not name:
        raise _error(places.header(k), "a finding needs a name")
    if len(name) > MAX_NAME or not name.isprintable():
        raise _error(places.key("name", k), f"a name is 1 to {MAX_NAME} printable characters")
    if change:
        if not _builtin(name) or canonical(name) not in BUILTIN.findings:
            raise _error(places.key("name", k), f"{name!r} is no built-in finding to change")
        name = canonical(name)
        for key in table:
            if key not in CHANGE_KEYS:
                raise _error(
                    places.key(key, k),
                    f"a [[change]] has {', '.join(CHANGE_KEYS)} alone, not {key!r}",
                )
        if not any(table.get(key) for key in CHANGE_KEYS[1:]):
            raise _error(places.header(k), f"{name!r}: a change has phrases, patterns or unmention")
    elif not table.get("phrases") and not table.get("patterns"):
        raise _error(places.header(k), f"{name!r} has no phrases (or patterns) naming it")
    for alias in [] if change else [name, *table.get("aliases", [])]:
        if _builtin(alias):
            where = places.key("name" if alias == name else "aliases", k)
            raise _error(
                where,
                f"{alias!r} is the built-in label {canonical(alias)!r}: choose another name "
                "(a [[change]] table changes how a built-in finding is read)",
            )
    _check_name(name, places.key("name", k), change)
    for alias in table.get("aliases", []):
        _check_name(alias, places.key("aliases", k), change)
    for key in ("phrases", "patterns", "anatomy", "unmention"):
        for value in table.get(key, []):
            where = places.value(value, k, key)
            if len(value) > MAX_EXPRESSION:
                raise _error(
                    where, f"a {key[:-1]} of {len(value)} characters: at most {MAX_EXPRESSION}"
                )
            expression = value if key == "patterns" else phrase_pattern(value)
            if key == "unmention":  # it names the finding, on purpose: no other check
                try:
                    _compile([expression])
                except re2.error:
                    raise _error(where, f"{value!r} cannot be read as a phrase") from None
                continue
            try:
                compiled = _compile([expression])
            except re2.error as exc:
                reason = (
                    exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
                )
                raise _error(
                    where, f"{value!r} is not a regular expression of RE2's syntax ({reason})"
                ) from None
            common = key != "patterns" and set(value.casefold().split()) <= _COMMON
            if common or compiled.search("") or all(map(compiled.search, _ORDINARY)):
                raise _error(where, f"{value!r} matches everything: it names no finding")
            if key != "patterns" and not compiled.search(as_read(value)):
                raise _error(where, f"{value!r} can never match its own words")
            normal = next((s for s in NORMAL_SENTENCES if compiled.search(s)), None)
            if key != "anatomy" and normal is not None:
                raise _error(
                    where,
                    f"{value!r} matches the normal sentence {normal!r}: it would affirm "
                    f"{name!r} in every such report",
                )
    parent = table.get("parent")
    return Finding(
        name,
        tuple(table.get("phrases", [])),
        tuple(table.get("patterns", [])),
        tuple(table.get("anatomy", [])),
        tuple(table.get("aliases", [])),
        canonical(parent, allow_unknown=True) if parent else None,
        tuple(table.get("unmention", [])),
        change,
    )


#: the columns reportfed's tables and downloads hold beside the findings (label --out,
#: --evidence, a review page's download)
OUTPUT_COLUMNS = frozenset(
    {"reports", "id", "file_row", "row", "label", "state", "probability", "score", "sentence",
     "cue", "source", "corrected"}
)  # fmt: skip


def _check_name(name: str, place: str, change: bool) -> None:
    """Refuse a finding's name (or alias) that a table or a spreadsheet would misread: an
    output column's name, one holding the corrections' separator ";", one starting like a
    formula, one mixing scripts ("Cаrdiomegaly" with a Cyrillic a) or printing like a built-in
    label in another form."""
    if name.casefold() in OUTPUT_COLUMNS:
        raise _error(place, f"{name!r} is a column of reportfed's outputs: choose another name")
    if ";" in name:
        raise _error(place, f"{name!r} holds ';', which separates a download's corrected labels")
    if name.startswith(FORMULA_STARTS):
        raise _error(place, f"{name!r} starts like a spreadsheet formula: choose another name")
    scripts = {unicodedata.name(c, "").split(" ")[0] for c in name if c.isalpha()}
    if len(scripts) > 1:
        raise _error(
            place,
            f"{name!r} mixes scripts ({', '.join(sorted(scripts))}): it may print like another "
            "name; write it in one",
        )
    if not change:
        plain = _skeleton(name)
        twin = next((known for known in BUILTIN.findings if _skeleton(known) == plain), None)
        if twin is not None and twin != name:
            raise _error(place, f"{name!r} prints like the built-in label {twin!r}")


def _skeleton(name: str) -> str:
    """``name`` without case, accents or compatibility forms: what a reader sees of it."""
    decomposed = unicodedata.normalize("NFKD", name).casefold()
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _builtin(name: str) -> bool:
    try:
        return canonical(name) in KNOWN_LABELS
    except LabelError:
        return False


def _check_together(findings: list[Finding], places: _Places) -> None:
    """Names and phrases used once across the definitions; parents that exist."""
    names: dict[str, int] = {}
    phrases: dict[str, tuple[int, str]] = {}
    for k, f in enumerate(findings):
        for alias in (f.name, *f.aliases):
            key = alias.casefold()
            if key in names:
                raise _error(places.header(k), f"{alias!r} names two findings")
            names[key] = k
        for phrase in f.phrases:
            key = phrase_key(phrase)
            if key in phrases:
                first, other = phrases[key]
                raise _error(
                    places.value(phrase, k, "phrases"),
                    f"{phrase!r} also names {other!r} ({places.ref(phrase, first, 'phrases')})",
                )
            phrases[key] = (k, f.name)
    for k, f in enumerate(findings):
        if f.parent and not _builtin(f.parent) and f.parent.casefold() not in names:
            raise _error(places.key("parent", k), f"parent {f.parent!r} is no known label")


def _error(place: str, message: str) -> InputFileError:
    return InputFileError(f"{place}: {message}")


class _Places(Protocol):
    """Where a finding's parts are, for errors that say where: a file's lines (:class:`_Lines`)
    or the definitions of a record (:class:`_Entries`)."""

    def header(self, k: int) -> str: ...

    def key(self, key: str, k: int | None = None) -> str: ...

    def value(self, value: str, k: int, key: str) -> str: ...

    def ref(self, value: str, k: int, key: str) -> str:
        """:meth:`value`'s place, as another error about the same thing names it."""
        ...


#: a TOML string on one line: in double quotes (escapes allowed) or single quotes (none)
_QUOTED = re.compile(r"""(["'])((?:\\.|(?!\1).)*)\1""")


class _Lines:
    """Where things are in a file: its lines."""

    def __init__(self, path: Path, text: str, kind: str = "finding") -> None:
        self.path = path
        self.lines = text.splitlines()
        header = f"[[{kind}]]"
        self.headers = [i for i, line in enumerate(self.lines) if line.strip() == header]

    def _at(self, line: int) -> str:
        return f"{self.path}:{line}"

    def _header_line(self, k: int) -> int:
        return self.headers[k] + 1 if k < len(self.headers) else 1

    def header(self, k: int) -> str:
        """The line (from 1) of the ``k``-th ``[[finding]]``."""
        return self._at(self._header_line(k))

    def _span(self, k: int | None) -> range:
        if k is None:
            return range(0, self.headers[0] if self.headers else len(self.lines))
        end = self.headers[k + 1] if k + 1 < len(self.headers) else len(self.lines)
        return range(self.headers[k], end)

    def _key_line(self, key: str, k: int | None) -> int:
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
        found = (i + 1 for i in self._span(k) if pattern.match(self.lines[i]))
        return next(found, self._header_line(k or 0))

    def key(self, key: str, k: int | None = None) -> str:
        """The line of ``key = ...`` in the ``k``-th finding (``None``: before the first)."""
        return self._at(self._key_line(key, k))

    @functools.cached_property
    def _literals(self) -> dict[str, list[int]]:
        """Each quoted string of the file -> the lines (from 0) it is written on, in order: one
        pass over the file, so that finding the lines of 20,000 phrases takes linear time."""
        out: dict[str, list[int]] = {}
        for i, line in enumerate(self.lines):
            for m in _QUOTED.finditer(line):
                out.setdefault(m.group(2), []).append(i)
        return out

    def _value_line(self, value: str, k: int, key: str) -> int:
        span = self._span(k)
        lines = self._literals.get(value, [])
        at = bisect.bisect_left(lines, span.start)
        if at < len(lines) and lines[at] < span.stop:
            return lines[at] + 1
        return self._key_line(key, k)

    def value(self, value: str, k: int, key: str) -> str:
        """The line of the string ``value`` in the ``k``-th finding, else of its ``key``."""
        return self._at(self._value_line(value, k, key))

    def ref(self, value: str, k: int, key: str) -> str:
        return f"line {self._value_line(value, k, key)}"


class _Entries:
    """Where things are in definitions sent as a record: the finding's number and name."""

    def __init__(self, origin: str, tables: list[Any]) -> None:
        self.origin = origin
        self.tables = tables

    def header(self, k: int) -> str:
        table = self.tables[k] if k < len(self.tables) else None
        name = table.get("name") if isinstance(table, Mapping) else None
        named = f" ({str(name)[:MAX_NAME]!r})" if isinstance(name, str) and name else ""
        return f"{self.origin}, finding {k + 1}{named}"

    def key(self, key: str, k: int | None = None) -> str:
        return f"{self.header(k or 0)}, {key}"

    def value(self, value: str, k: int, key: str) -> str:
        return self.key(key, k)

    def ref(self, value: str, k: int, key: str) -> str:
        return f"finding {k + 1}"
