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
