"""Phrasings a hospital's readers corrected on the review page, learnt as rules.

A corrected state of a finding that the text rules read from a mention says how that *phrasing*
reads at this hospital: the words that named the finding and the cue that set the rules' state
("pneumonia" after "concerning for", read uncertain), read as the reader chose (affirmed, negated,
uncertain, or not a mention of the finding at all: corrected to blank). Learnt from the
``Corrected`` cells of a review page's download (:func:`learn`), kept in the model
(:meth:`Corrections.record`) and applied wherever the rules read mentions
(:func:`reportfed.text.assertion.decisive_mentions`), so that the phrasing reads as corrected in
every report, this one and the next. What a correction keeps is the finding's words and its cue,
which the lexicon matched; never a report.

A correction of a finding the text does not name has no phrasing: it trains the model as a label,
as every other cell of the table does.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from reportfed.core.errors import InputFileError
from reportfed.text.assertion import Assertion, Mention, decisive_mentions
from reportfed.text.lexicon import PLAIN, Lexicon

#: a four-state cell -> the mention's state it means (blank: the finding is not mentioned)
_READ: dict[float, Assertion] = {1.0: "affirmed", 0.0: "negated", -1.0: "uncertain"}
_STATES = frozenset(_READ.values())
_log = logging.getLogger(__name__)


def _words(text: str) -> str:
    """``text`` as a correction keys it: lower case, one space between words."""
    return " ".join(text.casefold().split())


@dataclass(frozen=True)
class Correction:
    """The ``label``'s mentions named by ``phrase`` with the cue ``cue`` ("" for none), which the
    rules read as ``read``, read as ``state`` instead (``None``: not a mention of the label);
    ``reports``: how many corrected reports said so."""

    label: str
    phrase: str
    cue: str
    read: Assertion
    state: Assertion | None
    reports: int = 1

    @property
    def key(self) -> tuple[str, str, str, Assertion]:
        return self.label, self.phrase, self.cue, self.read

    def describe(self) -> str:
        """One line a user reads: the phrasing, what the rules read and what it reads now."""
        phrasing = f"{self.cue} {self.phrase}" if self.cue else self.phrase
        if self.state is None:
            return f"{phrasing!r} is no mention of {self.label} (the rules read {self.read})"
        return f"{phrasing!r} reads {self.label} {self.state} (the rules read {self.read})"


@dataclass(frozen=True)
class Corrections:
    """The corrections a model reads with, one per phrasing."""

    corrections: tuple[Correction, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.corrections)

    @functools.cached_property
    def _by_key(self) -> dict[tuple[str, str, str, Assertion], Correction]:
        return {c.key: c for c in self.corrections}

    def apply(self, mentions: Iterable[Mention]) -> list[Mention]:
        """``mentions`` read as corrected: each whose phrasing a correction names takes its
        state (marked :attr:`~reportfed.text.assertion.Mention.corrected`), or is dropped where
        the correction says it is no mention."""
        by_key = self._by_key
        out = []
        for m in mentions:
            found = by_key.get(_key(m))
            if found is None:
                out.append(m)
            elif found.state is not None:
                out.append(replace(m, assertion=found.state, corrected=True))
        return out

    def merged(self, other: Corrections, where: str = "") -> Corrections:
        """These corrections and ``other``'s; a phrasing corrected two ways is an error."""
        out = {c.key: c for c in self.corrections}
        for c in other.corrections:
            first = out.get(c.key)
            if first is None:
                out[c.key] = c
            elif first.state != c.state:
                raise InputFileError(
                    f"{where}{c.phrase!r} with cue {c.cue!r} is corrected to {c.state} of "
                    f"{c.label} here and to {first.state} elsewhere: every site must read a "
                    "phrasing one way"
                )
            else:
                out[c.key] = replace(first, reports=first.reports + c.reports)
        return Corrections(tuple(out.values()))

    def record(self) -> list[dict[str, Any]]:
        """The corrections as a model file's provenance keeps them (:meth:`from_record`)."""
        return [asdict(c) for c in self.corrections]

    @classmethod
    def from_record(cls, record: Sequence[Mapping[str, Any]]) -> Corrections:
        """The corrections :meth:`record` kept (``ValueError`` where a state is none of the
        mention states: a record from another node is input)."""
        out = []
        for c in record:
            if c["read"] not in _STATES or (c["state"] is not None and c["state"] not in _STATES):
                raise ValueError(f"{c['read']!r} or {c['state']!r} is no mention state")
            out.append(
                Correction(
                    str(c["label"]),
                    str(c["phrase"]),
                    str(c["cue"]),
                    c["read"],
                    c["state"],
                    int(c.get("reports", 1)),
                )
            )
        return cls(tuple(out))


def _key(m: Mention) -> tuple[str, str, str, Assertion]:
    return m.label, _words(m.text[m.span[0] : m.span[1]]), _words(m.cue), m.assertion


def learn(
    texts: Sequence[str],
    ids: Sequence[str],
    corrected: Mapping[tuple[int, str], float],
    lexicon: Lexicon = PLAIN,
    source: str = "",
) -> Corrections:
    """The corrections that the ``corrected`` cells of a table say ((row, label) -> the reader's
    four-state value, NaN blank: :attr:`reportfed.data.table.ReportTable.corrected`, read from a
    review page's download): where the rules read the label (with ``lexicon``, whose own
    corrections are not applied) from a mention of the row's report in ``texts`` and the
    reader's state differs. Two reports that correct one phrasing two ways are an error naming both
    (by ``ids``; ``source``: the table, which the log names beside each correction learnt)."""
    out: dict[tuple[str, str, str, Assertion], tuple[Correction, str]] = {}
    for (row, label), value in sorted(corrected.items()):
        mention = decisive_mentions(texts[row], [label], Lexicon(lexicon.findings))[label]
        if mention is None:
            continue  # a finding the text does not name: a label for the model
        state = None if np.isnan(value) else _READ[value]
        if state == mention.assertion:
            continue
        _, phrase, cue, read = _key(mention)
        found = Correction(label, phrase, cue, read, state)
        first = out.get(found.key)
        if first is None:
            out[found.key] = (found, ids[row])
        elif first[0].state != state:
            raise InputFileError(
                f"{source}: reports {first[1]} and {ids[row]} correct "
                f"{phrase!r} (cue {cue!r}, {label}) two ways: as {first[0].state} and as "
                f"{state}; read it one way"
            )
        else:
            out[found.key] = (replace(first[0], reports=first[0].reports + 1), first[1])
    learnt = Corrections(tuple(c for c, _ in out.values()))
    for c in learnt.corrections:
        _log.info("%s: %s", Path(source).name, c.describe())
    return learnt
