"""The review page of ``reportfed label --review``: one self-contained HTML file (no network, no
file beside it) on which a radiologist checks the labels.

At the top, a table counts each label's states and how many of them the model alone decided.
Below, each report with every sentence behind a state highlighted: a positive, negated or
uncertain mention in its own colour *and* with a text marker (``+``, ``−``, ``?``, and the
label's name), a sentence the model alone picked with a dashed border and ``model``; the cue
(the negation or hedge, the normal or abnormal word) is underlined. Beside it, each label's
state, calibrated probability and source (text, correction, model or rule). Filters choose a label, a state
and a source, and an order that puts the reports with a model-only state, then the least
confident, first; the filters live in the page's address (``review.html#label=Edema&state=1``),
so a view can be bookmarked or sent. Reports come 50 to a page, so a page of
:data:`REVIEW_LIMIT` reports opens as fast as one of ten.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from reportfed.core.files import atomic_write
from reportfed.pages import render_page, template_text

#: the reports a review page holds at most (the first ones of the input)
REVIEW_LIMIT = 20_000
_STATES = ((1.0, "positive"), (0.0, "negated"), (-1.0, "uncertain"))


class ReviewPage:
    """The page's reports, collected chunk by chunk (:meth:`add`) as ``reportfed label`` reads
    them, up to :data:`REVIEW_LIMIT`; :meth:`write` writes the page."""

    def __init__(self, labels: Sequence[str]) -> None:
        self.labels = list(labels)
        self.reports: list[dict[str, object]] = []
        self.left_out = 0  #: reports beyond the limit

    def add(
        self, ids: Sequence[str], texts: Sequence[str], evidence: pd.DataFrame, first_row: int
    ) -> None:
        """Add a chunk of reports and their evidence (:meth:`ReportLabeler.annotate`'s table,
        whose ``row`` column counts the chunk's reports from ``first_row``)."""
        room = max(REVIEW_LIMIT - len(self.reports), 0)
        self.left_out += max(len(ids) - room, 0)
        index = {name: c for c, name in enumerate(self.labels)}
        rows: dict[int, list[list[object]]] = {}
        for r in evidence.itertuples(index=False):
            rows.setdefault(int(r.row), []).append(
                [
                    index[r.label],
                    float(r.state),
                    round(float(r.probability), 4),
                    r.source,
                    r.sentence or "",
                    r.cue or "",
                ]
            )
        for k, (report_id, text) in enumerate(list(zip(ids, texts, strict=True))[:room]):
            found = rows.get(first_row + k, [])
            self.reports.append({"id": str(report_id), "text": text, "labels": found})

    def write(self, path: str | Path) -> Path:
        """Write the page to ``path``, atomically."""
        return atomic_write(path, self.render().encode())

    def render(self) -> str:
        """The page as HTML text (the reports as JSON that no text can end: Jinja2's
        ``tojson`` escapes ``<``, ``>``, ``&`` and quotes)."""
        shown = f"{len(self.reports):,} report(s)"
        if self.left_out:
            shown += f" (the first {REVIEW_LIMIT:,}; {self.left_out:,} more are in the tables)"
        return render_page(
            "review.html",
            title=f"reportfed labels: {shown}",
            width="70em",
            labels=self.labels,
            counts_head=["label", *(name for _, name in _STATES), "by the model alone"],
            counts=self._counts(),
            data={"labels": self.labels, "reports": self.reports},
            script=template_text("review.js"),
        )

    def _counts(self) -> list[list[object]]:
        """Per label: its reports in each state, and how many of those the model alone decided."""
        cells = np.zeros((len(self.labels), 4), dtype=int)
        for report in self.reports:
            for c, state, _, source, _, _ in report["labels"]:  # type: ignore[attr-defined]
                cells[c, [s for s, _ in _STATES].index(state)] += 1
                cells[c, 3] += source == "model"
        return [
            [name, *(f"{v:,}" for v in row)] for name, row in zip(self.labels, cells, strict=True)
        ]
