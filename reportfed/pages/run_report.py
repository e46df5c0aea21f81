"""``report.html``: one self-contained page (no script, no network) on a federation run, written
beside its model after every round: per-label AUROC by round with its held-out positives,
seconds and megabytes per round, the nodes of each round and why any was left out, which
hospital annotates and which reads each label, what the model reads beyond the lexicon (findings
a hospital defined, with their file's SHA-256, and corrected phrasings), the nodes lost or
excluded, and the run's settings. Plots are inline SVG; every plotted number is also in a table, and the lines carry
text markers, so the page reads without colour.

The same page shows an in-process run (``reportfed train --report``, ``python -m experiments
simulate --report``): its history has the same entries, read through one record
(:mod:`reportfed.core.record`), and the page says which AUROC it shows: pooled over every
site's validation rows in one process, the mean of the nodes' own under Flower. Its megabytes
are the weights the sites would exchange (:func:`in_process`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from reportfed.core.files import atomic_write
from reportfed.core.record import evaluations
from reportfed.pages import FEW_POSITIVES, render_page
from reportfed.text.model_file import beyond_lexicon

REPORT_FILE = "report.html"
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
            "#e377c2", "#7f7f7f", "#bcbd22")  # fmt: skip
_MARKERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_W, _H, _PAD = 640, 260, 44


def write_report(
    path: Path, history: Sequence[Mapping[str, Any]], provenance: Mapping[str, Any]
) -> Path:
    """Write the run report of ``history`` (``history.json``'s entries) and the model's
    ``provenance`` to ``path``, atomically."""
    return atomic_write(path, render(history, provenance).encode())


def in_process(provenance: Mapping[str, Any], rounds: int) -> dict[str, Any]:
    """A fitted :class:`~reportfed.labeler.ReportLabeler`'s ``provenance_`` in the form the page
    reads from a Flower model's (its nodes, the labels they annotate and read, the round, the
    settings)."""
    held = provenance.get("nodes", {})
    kept = {k: provenance[k] for k in ("findings", "corrections") if k in provenance}
    return {
        **kept,
        "federation": {
            "modality": "reports, in one process",
            "nodes": {name: list(info["labels"]) for name, info in held.items()},
            "read": {name: list(info["read"]) for name, info in held.items() if "read" in info},
            "round": rounds,
        },
        "config": provenance.get("config", {}),
    }


def render(history: Sequence[Mapping[str, Any]], provenance: Mapping[str, Any]) -> str:
    """The page as HTML text."""
    fed = provenance.get("federation", {})
    nodes: dict[str, list[str]] = dict(fed.get("nodes", {}))
    read: dict[str, list[str]] = dict(fed.get("read", {}))
    rounds = [int(e["round"]) for e in history]
    annotated = sorted({name for held in nodes.values() for name in held})
    time = traffic = None
    if rounds:
        time = _bars("seconds", rounds, [float(e["seconds"]) for e in history], "s")
        traffic = _bars("megabytes moved", rounds, [_megabytes(e) for e in history], "MB")
    return render_page(
        "run_report.html",
        title="reportfed federation run",
        width="60em",
        history=history,
        seconds=sum(float(e["seconds"]) for e in history),
        modality=fed.get("modality", "?"),
        nodes=nodes,
        round=fed.get("round", "?"),
        auroc=_auroc(history, annotated),
        time=time,
        traffic=traffic,
        rounds=[_round_row(e) for e in history],
        labels=[
            [
                label,
                ", ".join(n for n, held in nodes.items() if label in held),
                ", ".join(n for n, labels in read.items() if label in labels),
            ]
            for label in dict.fromkeys(label for held in nodes.values() for label in held)
        ],
        lost=_lost(fed.get("lost", {}), fed.get("excluded", {})),
        settings=[[k, v] for k, v in provenance.get("config", {}).items()],
        reading=beyond_lexicon(provenance),
    )


def _lost(lost: Mapping[str, Mapping[str, Any]], excluded: Mapping[str, str]) -> list[list[str]]:
    """The nodes lost during the run (since when, why, the labels no other node holds) and those
    excluded at joining."""
    rows = [
        [
            name,
            f"lost from round {v['since-round']}",
            v["reason"],
            ", ".join(v.get("labels-untrained", [])),
        ]
        for name, v in lost.items()
    ]
    return rows + [[node, "excluded at joining", why, ""] for node, why in excluded.items()]


def _megabytes(entry: Mapping[str, Any]) -> float:
    return sum(b["down"] + b["up"] for b in entry.get("bytes", {}).values()) / 1e6


def _auroc(history: Sequence[Mapping[str, Any]], held: Sequence[str]) -> dict[str, Any] | None:
    """A line per label over the evaluated rounds (its letter marks each point), the table with
    each label's held-out positives at the last round, the labels resting on fewer than
    :data:`~reportfed.pages.FEW_POSITIVES`, and the labels of ``held`` (those the nodes annotate)
    that no round could score; ``None`` before any evaluation."""
    scored = evaluations(history)
    labels = sorted({name for _, e in scored for name in e.auroc})
    if not scored or not labels:
        return None
    rounds = [r for r, _ in scored]
    values = [e.auroc[name] for _, e in scored for name in labels if name in e.auroc]
    lo = min([*values, 0.5])
    x, y = _axis(rounds), _scale(lo, 1.0)
    lines = [
        {
            "colour": _COLOURS[i % len(_COLOURS)],
            "mark": _MARKERS[i % len(_MARKERS)],
            "points": [(x(r), y(e.auroc[name])) for r, e in scored if name in e.auroc],
        }
        for i, name in enumerate(labels)
    ]
    last = scored[-1][1]
    positives = {name: last.positives.get(name) for name in labels}
    rows = [
        [f"{_MARKERS[i % len(_MARKERS)]}: {name}", _count(positives[name])]
        + [_number(e.auroc.get(name)) for _, e in scored]
        for i, name in enumerate(labels)
    ]
    rows.append(["macro", ""] + [_number(e.macro) for _, e in scored])
    return {
        "chart": _chart(
            f"AUROC from {lo:.2f} to 1 (round {rounds[0]} to {rounds[-1]})", lines=lines
        ),
        "head": ["label", "held-out positives", *(f"round {r}" for r in rounds)],
        "rows": rows,
        "statistic": last.statistic,
        "said": last.said,
        "enough": FEW_POSITIVES,
        "few": [f"{n} ({positives[n]})" for n in labels if _few(positives[n])],
        "unscored": [name for name in held if name not in labels],
    }


def _few(positives: object) -> bool:
    return positives is not None and int(positives) < FEW_POSITIVES  # type: ignore[call-overload]


def _count(value: object) -> str:
    return "" if value is None else f"{int(value):,}"  # type: ignore[call-overload]


def _bars(title: str, rounds: Sequence[int], values: Sequence[float], unit: str) -> dict[str, Any]:
    """One bar per round, its value written above it."""
    y = _scale(0.0, max([*values, 1e-9]))
    width = (_W - 2 * _PAD) / len(rounds)
    bars = [
        {
            "round": r,
            "value": v,
            "x": _PAD + i * width + width * 0.15,
            "y": y(v),
            "width": width * 0.7,
            "height": _H - _PAD - y(v),
        }
        for i, (r, v) in enumerate(zip(rounds, values, strict=True))
    ]
    return _chart(f"{title} per round", bars=bars, unit=unit)


def _chart(caption: str, **parts: Any) -> dict[str, Any]:
    return {"caption": caption, "width": _W, "height": _H, "pad": _PAD, **parts}


def _axis(rounds: Sequence[int]) -> Callable[[float], float]:
    first, last = min(rounds), max(rounds)
    span = max(last - first, 1)
    return lambda r: _PAD + (r - first) / span * (_W - 2 * _PAD)


def _scale(lo: float, hi: float) -> Callable[[float], float]:
    span = max(hi - lo, 1e-9)
    return lambda v: _H - _PAD - (v - lo) / span * (_H - 2.2 * _PAD)


def _number(value: object) -> str:
    return "" if value is None else f"{float(value):.4f}"  # type: ignore[arg-type]


def _round_row(entry: Mapping[str, Any]) -> list[object]:
    left = {**entry.get("failed", {}), **entry.get("rejected", {})}
    return [
        entry["round"],
        f"{float(entry['seconds']):.1f}",
        ", ".join(entry.get("accepted", [])),
        "; ".join(f"{n}: {why}" for n, why in left.items()),
        f"{_megabytes(entry):.2f}",
    ]
