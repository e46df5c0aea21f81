"""The review page of ``reportfed label --review``: one self-contained HTML file (no network, no
file beside it) on which a radiologist checks the labels.

At the top, a table counts each label's states and how many of them the model alone decided.
Below, each report with every sentence behind a state highlighted: a positive, negated or
uncertain mention in its own colour *and* with a text marker (``+``, ``−``, ``?``, and the
label's name), a sentence the model alone picked with a dashed border and ``model``; the cue
(the negation or hedge, the normal or abnormal word) is underlined. Beside it, each label's
state, calibrated probability and source (text, model or rule). Filters choose a label, a state
and a source, and an order that puts the reports with a model-only state, then the least
confident, first; the filters live in the page's address (``review.html#label=Edema&state=1``),
so a view can be bookmarked or sent. Reports come 50 to a page, so a page of
:data:`REVIEW_LIMIT` reports opens as fast as one of ten.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from reportfed.core.files import atomic_write

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
        """The page as HTML text."""
        data = json.dumps({"labels": self.labels, "reports": self.reports}, ensure_ascii=False)
        # no report text can end or re-open the script element ("</script>", "<!--<script>"):
        # JSON reads these escapes as the characters themselves
        data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        shown = f"{len(self.reports):,} report(s)"
        if self.left_out:
            shown += f" (the first {REVIEW_LIMIT:,}; {self.left_out:,} more are in the tables)"
        return _PAGE.format(
            title=f"reportfed labels: {shown}",
            counts=self._counts(),
            label_options="".join(f"<option>{html.escape(n)}</option>" for n in self.labels),
            data=data,
            script=_SCRIPT,
        )

    def _counts(self) -> str:
        """Per label: its reports in each state, and how many of those the model alone decided."""
        cells = np.zeros((len(self.labels), 4), dtype=int)
        for report in self.reports:
            for c, state, _, source, _, _ in report["labels"]:  # type: ignore[attr-defined]
                cells[c, [s for s, _ in _STATES].index(state)] += 1
                cells[c, 3] += source == "model"
        head = "".join(f"<th>{name}</th>" for _, name in _STATES) + "<th>by the model alone</th>"
        body = "".join(
            f"<tr><td>{html.escape(name)}</td>" + "".join(f"<td>{v:,}</td>" for v in row) + "</tr>"
            for name, row in zip(self.labels, cells, strict=True)
        )
        return f"<table id='counts'><tr><th>label</th>{head}</tr>{body}</table>"


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>
body{{font-family:sans-serif;max-width:70em;margin:1.5em auto;color:#222}}
table{{border-collapse:collapse;margin:.4em 0 1em}}
td,th{{border:1px solid #bbb;padding:.15em .5em;text-align:left}}
#counts td:not(:first-child){{text-align:right}}
#filters{{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #bbb}}
article{{border-bottom:1px solid #ddd;padding:.6em 0}}
.text{{line-height:1.7}}
mark{{padding:.1em .2em;border-radius:.2em}}
mark.s1{{background:#f6c9c9}} mark.s0{{background:#cfe8cf}} mark.su{{background:#fbe6a6}}
mark.model{{background:#fff;border:2px dashed #555}}
mark sup{{font-size:.75em;font-weight:bold;margin-left:.2em}}
button{{margin:0 .3em}}
</style></head><body>
<h1>{title}</h1>
<p>Each highlighted sentence decided a state: <mark class="s1">positive<sup>+</sup></mark>
<mark class="s0">negated<sup>−</sup></mark> <mark class="su">uncertain<sup>?</sup></mark>
<mark class="model">picked by the model, no mention<sup>model</sup></mark>; the cue is
<u>underlined</u>. No Finding follows its rule (source <em>rule</em>).</p>
{counts}
<div id="filters">
<label>label <select id="label"><option value="">any</option>{label_options}</select></label>
<label>state <select id="state"><option value="">any</option><option value="1">1 positive</option>
<option value="0">0 negated</option><option value="-1">-1 uncertain</option></select></label>
<label>source <select id="source"><option value="">any</option><option>text</option>
<option>model</option><option>rule</option></select></label>
<label>order <select id="order"><option value="file">as in the file</option>
<option value="doubt">model-only or low-confidence first</option></select></label>
<button id="prev">previous</button><span id="where"></span><button id="next">next</button>
</div>
<main id="reports"></main>
<script type="application/json" id="data">{data}</script>
<script>{script}</script>
</body></html>
"""

_SCRIPT = r"""
"use strict";
const DATA = JSON.parse(document.getElementById("data").textContent);
const PAGE = 50;
const NAMES = {"1": ["s1", "+", "positive"], "0": ["s0", "\u2212", "negated"], "-1": ["su", "?", "uncertain"]};
const FIELDS = ["label", "state", "source", "order"];

function filters() {
  const p = new URLSearchParams(location.hash.slice(1));
  const f = {page: Math.max(1, parseInt(p.get("page") || "1", 10) || 1)};
  for (const k of FIELDS) f[k] = p.get(k) || (k === "order" ? "file" : "");
  return f;
}

function go(f) {
  const p = new URLSearchParams();
  for (const k of FIELDS) if (f[k] && !(k === "order" && f[k] === "file")) p.set(k, f[k]);
  if (f.page > 1) p.set("page", f.page);
  location.hash = p.toString();
}

function keeps(report, f) {
  if (!f.label && !f.state && !f.source) return true;
  return report.labels.some(([c, s, , src]) =>
    (!f.label || DATA.labels[c] === f.label) && (!f.state || String(s) === f.state) &&
    (!f.source || src === f.source));
}

function doubt(report) {  // model-only states first, then the probability nearest even odds
  const model = report.labels.some(l => l[3] === "model") ? 0 : 1;
  const near = Math.min(1, ...report.labels.map(l => Math.abs(l[2] - 0.5)));
  return [model, near];
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function highlighted(report) {
  const p = el("p", undefined, "text");
  const spans = new Map();  // sentence start -> its end and label rows
  for (const row of report.labels) {
    const sentence = row[4];
    if (!sentence) continue;
    const at = report.text.indexOf(sentence);
    if (at < 0) continue;
    if (!spans.has(at)) spans.set(at, {end: at + sentence.length, rows: []});
    spans.get(at).rows.push(row);
  }
  let pos = 0;
  for (const at of [...spans.keys()].sort((a, b) => a - b)) {
    const span = spans.get(at);
    if (at < pos) continue;  // overlaps a sentence already marked
    p.append(report.text.slice(pos, at));
    const rows = span.rows;
    const model = rows.every(r => r[3] === "model");
    const first = ["1", "-1", "0"].find(s => rows.some(r => String(r[1]) === s)) || "1";
    const mark = el("mark", undefined, model ? "model" : NAMES[first][0]);
    let text = report.text.slice(at, span.end), done = 0;
    const cues = [...new Set(rows.map(r => r[5]).filter(Boolean))];
    const hits = cues.map(c => [text.toLowerCase().indexOf(c.toLowerCase()), c.length])
      .filter(([i]) => i >= 0).sort((a, b) => a[0] - b[0]);
    for (const [i, n] of hits) {
      if (i < done) continue;
      mark.append(text.slice(done, i), el("u", text.slice(i, i + n)));
      done = i + n;
    }
    mark.append(text.slice(done));
    const tags = rows.map(r => (r[3] === "model" ? "model " : NAMES[String(r[1])][1] + " ") + DATA.labels[r[0]]);
    mark.append(el("sup", tags.join(", ")));
    p.append(mark);
    pos = span.end;
  }
  p.append(report.text.slice(pos));
  return p;
}

function card(report) {
  const a = el("article");
  a.dataset.id = report.id;
  a.append(el("h3", report.id), highlighted(report));
  if (!report.labels.length) {
    a.append(el("p", "no label stated or found"));
    return a;
  }
  const t = el("table");
  const head = el("tr");
  for (const h of ["label", "state", "probability", "source", "cue"]) head.append(el("th", h));
  t.append(head);
  for (const [c, s, prob, src, , cue] of report.labels) {
    const tr = el("tr");
    const [, marker, word] = NAMES[String(s)];
    tr.append(el("td", DATA.labels[c]), el("td", marker + " " + s + " " + word),
              el("td", prob.toFixed(3)), el("td", src), el("td", cue));
    t.append(tr);
  }
  a.append(t);
  return a;
}

function render() {
  const f = filters();
  for (const k of FIELDS) document.getElementById(k).value = f[k];
  let rows = DATA.reports.filter(r => keeps(r, f));
  if (f.order === "doubt") {
    const key = new Map(rows.map(r => [r, doubt(r)]));
    rows = rows.slice().sort((a, b) => key.get(a)[0] - key.get(b)[0] || key.get(a)[1] - key.get(b)[1]);
  }
  const pages = Math.max(1, Math.ceil(rows.length / PAGE));
  const page = Math.min(f.page, pages);
  const shown = rows.slice((page - 1) * PAGE, page * PAGE);
  const main = document.getElementById("reports");
  main.replaceChildren(...shown.map(card));
  document.getElementById("where").textContent =
    `page ${page} of ${pages}: ${rows.length} report(s) match`;
  document.getElementById("prev").disabled = page <= 1;
  document.getElementById("next").disabled = page >= pages;
  document.getElementById("prev").onclick = () => go({...f, page: page - 1});
  document.getElementById("next").onclick = () => go({...f, page: page + 1});
}

for (const k of FIELDS) document.getElementById(k).onchange = () => {
  const f = filters();
  f[k] = document.getElementById(k).value;
  f.page = 1;
  go(f);
};
window.addEventListener("hashchange", render);
render();
"""
