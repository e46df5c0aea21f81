"""``report.html``: one self-contained page (no script, no network) on a federation run, written
beside its model after every round: per-label AUROC by round, seconds and megabytes per round,
the nodes of each round and why any was left out, which hospital holds which label, the nodes
lost or excluded, and the run's settings. Plots are inline SVG; every plotted number is also in
a table, and the lines carry text markers, so the page reads without colour.

The same page shows an in-process run (``reportfed train --report``, ``python -m experiments
simulate --report``): its history has the same entries, its AUROC is on the validation rows and
its megabytes are the weights the sites would exchange (:func:`in_process`)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reportfed.core.files import atomic_write

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
    reads from a Flower model's (its nodes and their labels, the round, the settings)."""
    nodes = {name: list(info["labels"]) for name, info in provenance.get("nodes", {}).items()}
    return {
        "federation": {"modality": "reports, in one process", "nodes": nodes, "round": rounds},
        "config": provenance.get("config", {}),
    }


def render(history: Sequence[Mapping[str, Any]], provenance: Mapping[str, Any]) -> str:
    """The page as HTML text."""
    fed = provenance.get("federation", {})
    nodes: dict[str, list[str]] = dict(fed.get("nodes", {}))
    rounds = [int(e["round"]) for e in history]
    seconds = sum(float(e["seconds"]) for e in history)
    parts = [
        f"<h1>Federation run: {len(history)} round(s), {seconds:.1f} s</h1>",
        f"<p>Modality {_e(fed.get('modality', '?'))}, {len(nodes)} node(s) joined, "
        f"model at round {_e(fed.get('round', '?'))}.</p>",
        "<h2>Per-label AUROC by round</h2>",
        _auroc(history, sorted({name for held in nodes.values() for name in held})),
        "<h2>Time and traffic per round</h2>",
        _bars("seconds", rounds, [float(e["seconds"]) for e in history], "s"),
        _bars("megabytes moved", rounds, [_megabytes(e) for e in history], "MB"),
        "<h2>Nodes per round</h2>",
        _rounds_table(history),
        "<h2>Labels and the hospitals that hold them</h2>",
        _labels_table(nodes),
        "<h2>Nodes lost or excluded</h2>",
        _lost_table(fed.get("lost", {}), fed.get("excluded", {})),
        "<h2>Settings</h2>",
        _table(["setting", "value"], [[k, v] for k, v in provenance.get("config", {}).items()]),
    ]
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<title>reportfed federation run</title><style>"
        "body{font-family:sans-serif;max-width:60em;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;margin:.5em 0 1.5em}"
        "td,th{border:1px solid #bbb;padding:.2em .6em;text-align:left}"
        "svg{display:block;margin:.5em 0}</style></head><body>\n"
        + "\n".join(parts)
        + "\n</body></html>\n"
    )


def _e(value: object) -> str:
    return html.escape(str(value))


def _megabytes(entry: Mapping[str, Any]) -> float:
    return sum(b["down"] + b["up"] for b in entry.get("bytes", {}).values()) / 1e6


def _auroc(history: Sequence[Mapping[str, Any]], held: Sequence[str]) -> str:
    """A line per label over the evaluated rounds (its letter marks each point), the table, and
    the labels of ``held`` (those the nodes hold) that no round could score, named."""
    scored = [e for e in history if e.get("evaluation")]
    labels = sorted(
        {
            k.removeprefix("auroc/")
            for e in scored
            for k in e["evaluation"]
            if k.startswith("auroc/")
        }
    )
    if not scored or not labels:
        return "<p>No round was evaluated yet.</p>"
    rounds = [int(e["round"]) for e in scored]
    lo = min(
        [float(e["evaluation"][f"auroc/{name}"]) for e in scored for name in labels
         if f"auroc/{name}" in e["evaluation"]] + [0.5]
    )  # fmt: skip
    x = _axis(rounds)
    y = _scale(lo, 1.0)
    svg = [_frame(f"AUROC from {lo:.2f} to 1 (round {rounds[0]} to {rounds[-1]})")]
    for i, name in enumerate(labels):
        colour, mark = _COLOURS[i % len(_COLOURS)], _MARKERS[i % len(_MARKERS)]
        points = [
            (x(int(e["round"])), y(float(e["evaluation"][f"auroc/{name}"])))
            for e in scored
            if f"auroc/{name}" in e["evaluation"]
        ]
        svg.append(
            f"<polyline fill='none' stroke='{colour}' stroke-width='2' points='"
            + " ".join(f"{a:.1f},{b:.1f}" for a, b in points)
            + "'/>"
        )
        svg += [
            f"<text x='{a:.1f}' y='{b - 4:.1f}' font-size='11' fill='{colour}'>{mark}</text>"
            for a, b in points
        ]
    svg.append("</svg>")
    rows = [
        [f"{_MARKERS[i % len(_MARKERS)]}: {name}"]
        + [_number(e["evaluation"].get(f"auroc/{name}")) for e in scored]
        for i, name in enumerate(labels)
    ]
    rows.append(["macro"] + [_number(e["evaluation"].get("macro-auroc")) for e in scored])
    unscored = [name for name in held if name not in labels]
    note = (
        f"<p>Not drawn: {_e(', '.join(unscored))}. Their validation rows hold one class only "
        "(no positive, or no negative), so no AUROC can be measured there.</p>"
        if unscored
        else ""
    )
    return "".join(svg) + _table(["label", *(f"round {r}" for r in rounds)], rows) + note


def _bars(title: str, rounds: Sequence[int], values: Sequence[float], unit: str) -> str:
    """One bar per round, its value written above it."""
    if not rounds:
        return ""
    top = max([*values, 1e-9])
    y = _scale(0.0, top)
    width = (_W - 2 * _PAD) / len(rounds)
    svg = [_frame(f"{title} per round")]
    for i, (r, v) in enumerate(zip(rounds, values, strict=True)):
        left = _PAD + i * width + width * 0.15
        svg.append(
            f"<rect x='{left:.1f}' y='{y(v):.1f}' width='{width * 0.7:.1f}' "
            f"height='{_H - _PAD - y(v):.1f}' fill='#1f77b4'><title>round {r}: {v:.2f} {unit}"
            "</title></rect>"
            f"<text x='{left:.1f}' y='{y(v) - 3:.1f}' font-size='11'>{v:.1f}</text>"
            f"<text x='{left:.1f}' y='{_H - _PAD + 14}' font-size='11'>{r}</text>"
        )
    svg.append("</svg>")
    return "".join(svg)


def _frame(caption: str) -> str:
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{_W}' height='{_H}' role='img' "
        f"aria-label='{_e(caption)}'><rect width='{_W}' height='{_H}' fill='white'/>"
        f"<line x1='{_PAD}' y1='{_H - _PAD}' x2='{_W - _PAD}' y2='{_H - _PAD}' stroke='#444'/>"
        f"<line x1='{_PAD}' y1='{_PAD / 2}' x2='{_PAD}' y2='{_H - _PAD}' stroke='#444'/>"
        f"<text x='{_PAD}' y='14' font-size='12'>{_e(caption)}</text>"
    )


def _axis(rounds: Sequence[int]) -> Any:
    first, last = min(rounds), max(rounds)
    span = max(last - first, 1)
    return lambda r: _PAD + (r - first) / span * (_W - 2 * _PAD)


def _scale(lo: float, hi: float) -> Any:
    span = max(hi - lo, 1e-9)
    return lambda v: _H - _PAD - (v - lo) / span * (_H - 2.2 * _PAD)


def _number(value: object) -> str:
    return "" if value is None else f"{float(value):.4f}"  # type: ignore[arg-type]


def _rounds_table(history: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for e in history:
        left = {**e.get("failed", {}), **e.get("rejected", {})}
        rows.append(
            [
                e["round"],
                f"{float(e['seconds']):.1f}",
                ", ".join(e.get("accepted", [])),
                "; ".join(f"{n}: {why}" for n, why in left.items()),
                f"{_megabytes(e):.2f}",
            ]
        )
    return _table(["round", "seconds", "accepted", "left out (why)", "MB moved"], rows)


def _labels_table(nodes: Mapping[str, Sequence[str]]) -> str:
    labels = list(dict.fromkeys(label for held in nodes.values() for label in held))
    rows = [[label, ", ".join(n for n, held in nodes.items() if label in held)] for label in labels]
    return _table(["label", "held by"], rows)


def _lost_table(lost: Mapping[str, Mapping[str, Any]], excluded: Mapping[str, str]) -> str:
    rows = [
        [name, f"lost from round {v['since-round']}", v["reason"],
         ", ".join(v.get("labels-untrained", []))]
        for name, v in lost.items()
    ] + [[node, "excluded at joining", why, ""] for node, why in excluded.items()]  # fmt: skip
    if not rows:
        return "<p>None: every node that joined answered the last round.</p>"
    return _table(["node", "what", "why", "labels no other node holds"], rows)


def _table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"
