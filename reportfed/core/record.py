"""One round's evaluation in a run's record, as both engines write it and every reader reads it
(``federation run``'s summary, the run page, the round line): per-label AUROC with the
statistic it is, the held-out positives it rests on and the fewest rows behind a label.

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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

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
