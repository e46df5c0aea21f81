"""Which Flower nodes belong to the federation: the handshake (message type ``query``) that asks a
node for its name, labels, embedder fingerprint, input dimension and rows, and the rules that
exclude a node (another embedder or dimension, a taken name, no labels, too many, a finding
defined or a phrasing corrected otherwise than by a member, definitions no file could hold),
each with its reason.

No member decides for the others: the embedder fingerprint and input dimension are the run's
(:attr:`Registry.fingerprint`, :attr:`Registry.dim`: the server reads them from the embedder the
run declares), so a node that says otherwise is the one left out, and every value a handshake
carries is bounded (:func:`reportfed.flower.wire.read_description`) before it is used."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flwr.app import ConfigRecord, Message, RecordDict
from flwr.serverapp import Grid

from reportfed.core.errors import InputFileError, LabelError, RunFailedError
from reportfed.core.labels import LabelSpace
from reportfed.core.limits import MAX_LABELS
from reportfed.core.node import Description
from reportfed.core.schema import Scalar
from reportfed.flower.exchange import exchange
from reportfed.flower.wire import META, read_description
from reportfed.text.corrections import Corrections
from reportfed.text.findings import Findings

_log = logging.getLogger(__name__)


@dataclass
class Member:
    """A registered node: its Flower id, name, the labels it annotates, index (the order of
    registration, which seeds its local training), the training rows it declared, how it read
    its table, and the labels it
    trains from what the text rules read in its reports (``reads``, known from its updates)."""

    node_id: int
    name: str
    labels: LabelSpace
    index: int
    rows: int = 0
    settings: dict[str, Scalar] = field(default_factory=dict)
    reads: LabelSpace = field(default_factory=lambda: LabelSpace(()))
    #: the findings it defined (:mod:`reportfed.text.findings`), which it reads where it lacks them
    defines: tuple[str, ...] = ()


@dataclass
class Registry:
    """The federation's members and excluded nodes. ``fingerprint`` and ``dim`` are the vector
    space every member must embed into and its dimension, the run's (never a member's);
    ``join_timeout`` the seconds a new node has to answer its query (it reads and embeds its
    reports then)."""

    fingerprint: str
    dim: int
    join_timeout: float = 600.0
    members: dict[int, Member] = field(default_factory=dict)
    excluded: dict[int, str] = field(default_factory=dict)
    #: the findings the members defined, by name (:mod:`reportfed.text.findings`): one
    #: definition each, the first member's
    findings: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the SHA-256 of each findings file the members read their definitions from
    files: set[str] = field(default_factory=set)
    #: the phrasings the members' readers corrected (:mod:`reportfed.text.corrections`)
    corrections: Corrections = field(default_factory=Corrections)

    def wait_for(self, grid: Grid, count: int, wait: float) -> None:
        """Block until ``count`` nodes are connected (a ``RunFailedError`` after ``wait`` s)."""
        waited = 0.0
        while len(list(grid.get_node_ids())) < count:
            if waited >= wait:
                raise RunFailedError(
                    f"only {len(list(grid.get_node_ids()))} of {count} nodes connected "
                    f"after {wait:.0f} s (--min-nodes, --join-timeout)"
                )
            if waited % 10 == 0:
                _log.info("waiting for %d nodes to connect", count)
            time.sleep(0.5)
            waited += 0.5

    def register_new(self, grid: Grid) -> None:
        """Query the connected nodes not seen yet and register or exclude each."""
        new = sorted(set(grid.get_node_ids()) - set(self.members) - set(self.excluded))
        if not new:
            return
        queries = [
            Message(RecordDict({META: ConfigRecord()}), dst_node_id=n, message_type="query")
            for n in new
        ]
        answers = []
        for reply in exchange(grid, queries, timeout=self.join_timeout):
            node_id = reply.metadata.src_node_id
            if reply.has_error():
                _log.warning("node %d did not answer the query: %s", node_id, reply.error.reason)
                continue
            try:
                answers.append((node_id, read_description(reply.content)))
            except (KeyError, TypeError, ValueError, LabelError) as exc:
                self.exclude(node_id, f"malformed query reply ({exc})")
        answers.sort(key=lambda a: a[1].name)
        for node_id, answer in answers:
            self._admit(node_id, answer)

    def _admit(self, node_id: int, a: Description) -> None:
        why = self._refusal(a)
        if why is not None:
            self.exclude(node_id, why)
            return
        defined, checksum = _defined(a)  # read without error by _refusal
        self.findings |= {f["name"]: f for f in defined}
        self.files |= {checksum} if checksum else set()
        self.corrections = self.corrections.merged(_corrected(a))
        settings = {k: v for k, v in a.settings.items() if k not in ("findings", "corrections")}
        defines = tuple(f["name"] for f in defined)
        self.members[node_id] = Member(
            node_id, a.name, a.labels, len(self.members), a.rows, settings, defines=defines
        )
        _log.info("registered node %r: %d rows, labels %s", a.name, a.rows, list(a.labels))

    def _refusal(self, a: Description) -> str | None:
        """Why the node described by ``a`` cannot join (``None``: it can)."""
        if a.fingerprint != self.fingerprint:
            return (
                f"node {a.name!r} embeds with {a.fingerprint}, the run with {self.fingerprint}; "
                "every node must use the run's embedder"
            )
        if a.dim != self.dim:
            return (
                f"node {a.name!r} says its input dimension is {a.dim}, but the run's embedder "
                f"{self.fingerprint} has {self.dim}"
            )
        if a.name in {m.name for m in self.members.values()}:
            return f"node name {a.name!r} is already taken"
        if not a.labels:
            return f"node {a.name!r} has no labels"
        union = LabelSpace.union([a.labels, *(m.labels for m in self.members.values())])
        if len(union) > MAX_LABELS:
            return f"node {a.name!r} would grow the model beyond {MAX_LABELS} labels"
        try:
            defined, _ = _defined(a)
        except (ValueError, KeyError, TypeError, InputFileError) as exc:
            return f"node {a.name!r} sent malformed finding definitions ({exc})"
        try:
            corrected = _corrected(a)
        except (ValueError, KeyError, TypeError) as exc:
            return f"node {a.name!r} sent malformed corrections ({exc})"
        try:
            self.corrections.merged(corrected, where=f"node {a.name!r}: ")
        except InputFileError as exc:
            return str(exc)
        return self._clash(a.name, defined)

    def require_findings(self, record: Mapping[str, Any]) -> None:
        """Make the definitions of ``record`` (a findings file's, as
        :meth:`~reportfed.text.findings.Findings.record` gives them: the operator's) the
        federation's: a node that defines one of those findings otherwise is left out."""
        defined, checksum = _as_sent(Findings.from_record(record, origin="the run's findings"))
        self.findings |= {f["name"]: f for f in defined}
        self.files.add(checksum)
        _log.info("the operator's findings: %s", ", ".join(self.findings))

    def _clash(self, name: str, defined: list[dict[str, Any]]) -> str | None:
        """Why node ``name`` cannot join: a finding of those it ``defined`` defined otherwise
        than by a member; ``None`` where it defines none, or each as the federation does."""
        for finding in defined:
            known = self.findings.get(finding["name"])
            if known is not None and known != finding:
                return (
                    f"node {name!r} defines the finding {finding['name']!r} otherwise than "
                    "the federation (phrases, patterns, anatomy, aliases or parent): every "
                    "site must use one definition"
                )
        return None

    def findings_record(self) -> dict[str, Any] | None:
        """The members' definitions as a model keeps them
        (:meth:`reportfed.text.findings.Findings.from_record`); the checksum is their file's
        where every member read one file, else that of their canonical JSON, beside the files'
        (``files``); ``None`` where none defined any."""
        if not self.findings:
            return None
        defined = [self.findings[name] for name in sorted(self.findings)]
        if len(self.files) == 1:
            return {"checksum": next(iter(self.files)), "findings": defined}
        text = json.dumps(defined, sort_keys=True).encode()
        return {
            "checksum": hashlib.sha256(text).hexdigest(),
            "files": sorted(self.files),
            "findings": defined,
        }

    def exclude(self, node_id: int, reason: str) -> None:
        """Leave ``node_id`` out of the federation for ``reason`` (logged)."""
        self.excluded[node_id] = reason
        _log.error("excluded node %d: %s", node_id, reason)

    def by_name(self) -> dict[str, Member]:
        """The members by name."""
        return {m.name: m for m in self.members.values()}


def _defined(a: Description) -> tuple[list[dict[str, Any]], str]:
    """The findings node ``a`` defines, as its handshake carries them, and their file's
    SHA-256, checked as a findings file is (:meth:`Findings.from_record`; an
    :class:`InputFileError`, ``ValueError``, ``KeyError`` or ``TypeError`` where they are
    malformed)."""
    record = a.settings.get("findings")
    if not record:
        return [], ""
    sent = json.loads(str(record))
    if not isinstance(sent, dict):
        raise ValueError("definitions must be a table")
    return _as_sent(Findings.from_record(sent, origin="its definitions"))


def _as_sent(findings: Findings) -> tuple[list[dict[str, Any]], str]:
    """``findings`` as plain JSON values (lists, not tuples), which compare alike whoever sent
    them, and their checksum."""
    record = json.loads(json.dumps(findings.record()))
    return record["findings"], record["checksum"]


def _corrected(a: Description) -> Corrections:
    """The phrasings node ``a``'s readers corrected, as its handshake carries them."""
    sent = json.loads(str(a.settings.get("corrections", "[]")))
    if not isinstance(sent, list) or not all(isinstance(c, dict) for c in sent):
        raise ValueError("corrections must be a list of tables")
    return Corrections.from_record(sent)
