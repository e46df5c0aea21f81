"""Which Flower nodes belong to the federation: the handshake (message type ``query``) that asks a
node for its name, labels, embedder fingerprint, input dimension and rows, and the rules that
exclude a node (another embedder or dimension, a taken name, no labels, a finding defined or a
phrasing corrected otherwise than by a member), each with its reason."""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from logging import ERROR, INFO, WARNING
from typing import Any

from flwr.app import ConfigRecord, Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore import log

from reportfed.core.errors import InputFileError, LabelError, RunFailedError
from reportfed.core.labels import LabelSpace
from reportfed.core.node import Description
from reportfed.core.schema import Scalar
from reportfed.flower.exchange import exchange
from reportfed.flower.wire import META, read_description
from reportfed.text.corrections import Corrections


@dataclass
class Member:
    """A registered node: its Flower id, name, the labels it annotates, index (the order of
    registration, which seeds its local training), how it read its table, and the labels it
    trains from what the text rules read in its reports (``reads``, known from its updates)."""

    node_id: int
    name: str
    labels: LabelSpace
    index: int
    settings: dict[str, Scalar] = field(default_factory=dict)
    reads: LabelSpace = field(default_factory=lambda: LabelSpace(()))
    #: the findings it defined (:mod:`reportfed.text.findings`), which it reads where it lacks them
    defines: tuple[str, ...] = ()


@dataclass
class Registry:
    """The federation's members and excluded nodes. ``fingerprint`` is the embedder every member
    must have (``None``: the most common one among the first nodes to answer); ``join_timeout``
    the seconds a new node has to answer its query (it reads and embeds its reports then)."""

    fingerprint: str | None = None
    join_timeout: float = 600.0
    dim: int | None = None
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
                log(INFO, "waiting for %d nodes to connect", count)
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
                log(WARNING, "node %d did not answer the query: %s", node_id, reply.error.reason)
                continue
            try:
                answers.append((node_id, read_description(reply.content)))
            except (KeyError, TypeError, ValueError, LabelError) as exc:
                self.exclude(node_id, f"malformed query reply ({exc})")
        answers.sort(key=lambda a: a[1].name)
        if self.fingerprint is None and answers:
            self.fingerprint = Counter(a.fingerprint for _, a in answers).most_common(1)[0][0]
            log(INFO, "federation embedder fingerprint: %s", self.fingerprint)
        for node_id, answer in answers:
            self._admit(node_id, answer)

    def _admit(self, node_id: int, a: Description) -> None:
        try:
            defined, checksum = _defined(a)
        except (ValueError, KeyError, TypeError) as exc:
            self.exclude(node_id, f"node {a.name!r} sent malformed finding definitions ({exc})")
            return
        try:
            corrected = Corrections.from_record(
                json.loads(str(a.settings.get("corrections", "[]")))
            )
        except (ValueError, KeyError, TypeError) as exc:
            self.exclude(node_id, f"node {a.name!r} sent malformed corrections ({exc})")
            return
        try:
            corrections = self.corrections.merged(corrected, where=f"node {a.name!r}: ")
        except InputFileError as exc:
            self.exclude(node_id, str(exc))
            return
        if a.fingerprint != self.fingerprint:
            self.exclude(
                node_id,
                f"node {a.name!r} embeds with {a.fingerprint}, the federation with "
                f"{self.fingerprint}; every node must use the same embedder",
            )
        elif self.dim is not None and a.dim != self.dim:
            self.exclude(node_id, f"node {a.name!r} has input dim {a.dim}, not {self.dim}")
        elif a.name in {m.name for m in self.members.values()}:
            self.exclude(node_id, f"node name {a.name!r} is already taken")
        elif not a.labels:
            self.exclude(node_id, f"node {a.name!r} has no labels")
        elif (clash := self._clash(a.name, defined)) is not None:
            self.exclude(node_id, clash)
        else:
            self.findings |= {f["name"]: f for f in defined}
            self.files |= {checksum} if checksum else set()
            self.corrections = corrections
            self.dim = a.dim
            settings = {k: v for k, v in a.settings.items() if k not in ("findings", "corrections")}
            defines = tuple(f["name"] for f in defined)
            self.members[node_id] = Member(
                node_id, a.name, a.labels, len(self.members), settings, defines=defines
            )
            log(INFO, "registered node %r: %d rows, labels %s", a.name, a.rows, list(a.labels))

    def require_findings(self, record: Mapping[str, Any]) -> None:
        """Make the definitions of ``record`` (a findings file's, as
        :meth:`~reportfed.text.findings.Findings.record` gives them: the operator's) the
        federation's: a node that defines one of those findings otherwise is left out."""
        self.findings |= {str(f["name"]): dict(f) for f in record["findings"]}
        self.files.add(str(record["checksum"]))
        log(INFO, "the operator's findings: %s", ", ".join(self.findings))

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
        log(ERROR, "excluded node %d: %s", node_id, reason)

    def by_name(self) -> dict[str, Member]:
        """The members by name."""
        return {m.name: m for m in self.members.values()}


def _defined(a: Description) -> tuple[list[dict[str, Any]], str]:
    """The findings node ``a`` defines, as its handshake carries them, and their file's
    SHA-256 (``ValueError``, ``KeyError`` or ``TypeError`` where they are malformed)."""
    record = a.settings.get("findings")
    if not record:
        return [], ""
    sent = json.loads(str(record))
    defined = list(sent["findings"])
    if not all(isinstance(f, dict) and isinstance(f["name"], str) for f in defined):
        raise ValueError("each finding must be a table with a name")
    checksum = sent.get("checksum", "")
    if not isinstance(checksum, str):
        raise ValueError("the file's checksum must be text")
    return defined, checksum
