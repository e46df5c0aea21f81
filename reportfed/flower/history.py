"""The record of a Flower run, one entry per round (``history.json`` beside the model): which
nodes were accepted, rejected or failed and why, their training losses, the round's seconds, the
bytes each node received and sent and, on evaluation rounds, the per-label AUROC."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reportfed.core.files import atomic_write
from reportfed.core.record import evaluations
from reportfed.core.server import StepResult


class RunHistory:
    """Round entries of a run; a resumed run keeps those up to its checkpoint's round."""

    def __init__(self, entries: list[dict[str, Any]] | None = None) -> None:
        self.entries = entries or []

    @classmethod
    def load(cls, path: Path, *, up_to: int) -> RunHistory:
        """The entries of ``path`` (if it exists) up to round ``up_to``."""
        entries = json.loads(path.read_text()) if path.is_file() else []
        return cls([e for e in entries if e.get("round", 0) <= up_to])

    def save(self, path: Path) -> None:
        """Write the entries to ``path`` atomically."""
        atomic_write(path, json.dumps(self.entries, indent=1).encode())

    def trained(
        self,
        round_: int,
        step: StepResult,
        *,
        failed: dict[str, str],
        losses: dict[str, float],
        seconds: float,
    ) -> None:
        """Record round ``round_``'s server step and the nodes that sent no update."""
        self.entries.append(
            {
                "round": round_,
                "failed": failed,
                "loss": losses,
                "seconds": round(seconds, 3),
                "accepted": step.accepted,
                "rejected": step.rejected,
                "aggregated": step.aggregated,
            }
        )

    def evaluated(self, round_: int, metrics: dict[str, Any]) -> None:
        """Attach round ``round_``'s evaluation metrics to its entry."""
        self._attach(round_, "evaluation", dict(metrics))

    def traffic(self, round_: int, by_node: dict[str, dict[str, int]]) -> None:
        """Attach round ``round_``'s bytes per node (``down`` to it, ``up`` from it)."""
        self._attach(round_, "bytes", by_node)

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

    def _attach(self, round_: int, key: str, value: Any) -> None:
        for entry in self.entries:
            if entry["round"] == round_:
                entry[key] = value
