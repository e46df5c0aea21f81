"""The record of a run (:class:`RunHistory`), as both engines write it and every reader reads it
(``federation run``'s summary, the run page, the round line), and one round's evaluation in it
(:class:`Evaluation`): per-label AUROC with the statistic it is, the held-out positives it
rests on and the fewest rows behind a label.

Two statistics exist, and every number says which it is:

* :data:`POOLED` — one AUROC over every site's held-out rows together (a fit in one process,
  which holds all the rows);
* :data:`NODE_MEAN` — each node's AUROC on its own held-out rows, averaged over the nodes that
  hold the label, weighted by their rows (a Flower run: no node's scores leave it).

The record keeps the flat keys Flower's ``MetricRecord`` carries (``auroc/<label>``,
``positives/<label>``, ``macro-auroc``, ``min-rows``) beside ``statistic``, so a history file
reads the same in both engines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, overload

from reportfed.core.files import atomic_write

if TYPE_CHECKING:
    from reportfed.core.server import StepResult

POOLED: Final = "pooled"
NODE_MEAN: Final = "node-mean"
#: how each statistic is said beside a number users read
SAID = {
    POOLED: "pooled over every site's held-out rows",
    NODE_MEAN: "each node's own held-out rows, averaged weighted by rows",
}


@dataclass(frozen=True)
class Evaluation:
    """A model's per-label AUROC on held-out rows, and what it rests on."""

    statistic: str
    auroc: Mapping[str, float]
    positives: Mapping[str, int] = field(default_factory=dict)
    min_rows: int | None = None
    #: the mean AUROC as recorded (``None``: computed from ``auroc``)
    recorded_macro: float | None = None

    @property
    def macro(self) -> float | None:
        """The mean AUROC over the labels that have one."""
        if self.recorded_macro is not None:
            return self.recorded_macro
        return sum(self.auroc.values()) / len(self.auroc) if self.auroc else None

    @property
    def said(self) -> str:
        """What the statistic is, in words."""
        return SAID.get(self.statistic, self.statistic)

    def to_json(self) -> dict[str, Any]:
        """The flat record a history entry's ``evaluation`` holds."""
        out: dict[str, Any] = {"statistic": self.statistic}
        out |= {f"auroc/{name}": round(float(v), 4) for name, v in self.auroc.items()}
        if self.macro is not None:
            out["macro-auroc"] = round(self.macro, 4)
        out |= {f"positives/{name}": int(n) for name, n in self.positives.items()}
        if self.min_rows is not None:
            out["min-rows"] = int(self.min_rows)
        return out

    @classmethod
    def from_json(cls, record: Mapping[str, Any], statistic: str = NODE_MEAN) -> Evaluation:
        """An entry's ``evaluation``; one written before the record named its statistic is a
        Flower run's (``statistic``)."""
        return cls(
            statistic=str(record.get("statistic", statistic)),
            auroc={
                k.removeprefix("auroc/"): float(v)
                for k, v in record.items()
                if k.startswith("auroc/")
            },
            positives={
                k.removeprefix("positives/"): int(v)
                for k, v in record.items()
                if k.startswith("positives/")
            },
            min_rows=None if record.get("min-rows") is None else int(record["min-rows"]),
            recorded_macro=None
            if record.get("macro-auroc") is None
            else float(record["macro-auroc"]),
        )


def evaluations(history: Sequence[Mapping[str, Any]]) -> list[tuple[int, Evaluation]]:
    """The evaluated rounds of a run's ``history`` (its entries), in order."""
    return [
        (int(e["round"]), Evaluation.from_json(e["evaluation"]))
        for e in history
        if e.get("evaluation")
    ]


class RunHistory(Sequence[dict[str, Any]]):
    """The record of a run, one entry per round, written by both engines (the in-process loop,
    :func:`~reportfed.core.rounds.run_rounds`, and a Flower server, ``history.json`` beside its
    model) through these methods and read through them: which nodes were accepted, rejected or
    failed and why, each node's training metrics (``loss``), the round's seconds, the bytes each
    node received and sent and, on evaluation rounds, the :class:`Evaluation`. A sequence of
    its entries; a resumed run keeps those up to its checkpoint's round."""

    def __init__(self, entries: list[dict[str, Any]] | None = None) -> None:
        self.entries = entries or []

    def __len__(self) -> int:
        return len(self.entries)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        return self.entries[index]

    @classmethod
    def load(cls, path: Path, *, up_to: int | None = None) -> RunHistory:
        """The entries of ``path`` (if it exists), up to round ``up_to`` where given."""
        entries = json.loads(path.read_text()) if path.is_file() else []
        return cls([e for e in entries if up_to is None or e.get("round", 0) <= up_to])

    def save(self, path: Path) -> None:
        """Write the entries to ``path`` atomically."""
        atomic_write(path, json.dumps(self.entries, indent=1).encode())

    def trained(
        self,
        round_: int,
        step: StepResult,
        *,
        seconds: float,
        metrics: Mapping[str, Mapping[str, float]] | None = None,
        failed: Mapping[str, str] | None = None,
    ) -> None:
        """Record round ``round_``'s server step, the nodes' training ``metrics`` (by metric,
        then node: ``{"loss": {"a": 0.41}}``) and the nodes that sent no update."""
        self.entries.append(
            {
                "round": round_,
                "failed": dict(failed or {}),
                **{key: dict(by_node) for key, by_node in (metrics or {}).items()},
                "seconds": round(seconds, 3),
                "accepted": step.accepted,
                "rejected": step.rejected,
                "aggregated": step.aggregated,
            }
        )

    def evaluated(self, round_: int, metrics: Mapping[str, Any]) -> None:
        """Attach round ``round_``'s evaluation (:meth:`Evaluation.to_json`) to its entry."""
        self.attach(round_, {"evaluation": dict(metrics)})

    def traffic(self, round_: int, by_node: Mapping[str, Mapping[str, int]]) -> None:
        """Attach round ``round_``'s bytes per node (``down`` to it, ``up`` from it)."""
        self.attach(round_, {"bytes": {n: dict(b) for n, b in by_node.items()}})

    def line(self, round_: int, rounds: int, expected: int) -> str:
        """The operator's line for round ``round_`` of ``rounds``: seconds, nodes answered of
        ``expected`` (and who did not, why), the latest macro AUROC, megabytes moved."""
        entry = next(e for e in self.entries if e["round"] == round_)
        answered = len(entry["accepted"]) + len(entry["rejected"])
        missing = {**entry["failed"], **entry["rejected"]}
        parts = [
            f"round {round_}/{rounds}: {entry['seconds']:.1f} s",
            f"{answered}/{expected} nodes answered"
            + (f", {len(entry['accepted'])} accepted" if entry["rejected"] else ""),
        ]
        if missing:
            parts.append("left out: " + "; ".join(f"{n} ({why})" for n, why in missing.items()))
        scored = [
            (r, e) for r, e in evaluations(self.entries) if r <= round_ and e.macro is not None
        ]
        if scored:
            scored_round, last = scored[-1]
            parts.append(
                f"macro AUROC {last.macro:.4f} (round {scored_round}'s model, {last.statistic})"
            )
        moved = sum(b["down"] + b["up"] for b in entry.get("bytes", {}).values())
        parts.append(f"{moved / 1e6:.2f} MB moved")
        return ", ".join(parts)

    def lost(self, labels: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
        """The nodes that joined (``labels``: each node's labels) but sent no accepted update in
        the last round: since which round they have not, why (the last round's reason), and
        the labels no node still answering holds (rows the model stopped learning then)."""
        if not self.entries:
            return {}
        last = self.entries[-1]
        missing = {**last["failed"], **last["rejected"]}
        held = {label for name in last["accepted"] for label in labels.get(name, [])}
        out: dict[str, dict[str, Any]] = {}
        for name, why in missing.items():
            since = last["round"]
            for entry in reversed(self.entries[:-1]):
                if name in entry["accepted"]:
                    break
                since = entry["round"]
            alone = [label for label in labels.get(name, []) if label not in held]
            out[name] = {"since-round": since, "reason": why, "labels-untrained": alone}
        return out

    def attach(self, round_: int, values: Mapping[str, Any]) -> None:
        """Add ``values`` to round ``round_``'s entry (what an in-process run's evaluation hook
        returns)."""
        for entry in self.entries:
            if entry["round"] == round_:
                entry.update(values)
