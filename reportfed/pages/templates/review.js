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

// the reader's corrections: "report index:label index" -> state ("1", "0", "-1" or "" blank),
// kept in the browser for this page's reports across reloads
const CHOICES = [["1", "1 positive"], ["0", "0 negated"], ["-1", "-1 uncertain"], ["", "blank (not mentioned)"]];
DATA.reports.forEach((r, i) => { r.index = i; });
const KEY = "reportfed-review:" + digest(document.getElementById("data").textContent);
const CORRECTED = load();

function digest(text) {  // FNV-1a: names this page's reports in the browser's storage
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(16) + ":" + text.length;
}

function load() {
  try { return JSON.parse(localStorage.getItem(KEY) || "{}"); } catch (e) { return {}; }
}

function save() {
  try { localStorage.setItem(KEY, JSON.stringify(CORRECTED)); } catch (e) { /* storage off */ }
  const cells = Object.keys(CORRECTED).length;
  const reports = new Set(Object.keys(CORRECTED).map(k => k.split(":")[0])).size;
  document.getElementById("corrected").textContent = cells
    ? `${cells} correction(s) in ${reports} report(s)` : "no corrections";
  document.getElementById("download").disabled = !cells;
  document.getElementById("clear").disabled = !cells;
}

function labelled(report) {  // label index -> the state as labelled ("" blank)
  const found = new Map(DATA.labels.map((_, c) => [c, ""]));
  for (const [c, s] of report.labels) found.set(c, String(s));
  return found;
}

function reading(report, c) {  // the state the reader gives: the correction, else as labelled
  const key = report.index + ":" + c;
  return key in CORRECTED ? CORRECTED[key] : labelled(report).get(c);
}

function choose(report, c, state, tr) {
  const key = report.index + ":" + c;
  if (state === labelled(report).get(c)) delete CORRECTED[key]; else CORRECTED[key] = state;
  mark(tr, key in CORRECTED);
  save();
}

function mark(tr, changed) {
  tr.classList.toggle("changed", changed);
  tr.lastChild.textContent = changed ? "corrected" : "";
}

function card(report) {
  const a = el("article");
  a.dataset.id = report.id;
  a.append(el("h3", report.id), highlighted(report));
  if (!report.labels.length) a.append(el("p", "no label stated or found"));
  const t = el("table");
  const head = el("tr");
  for (const h of ["label", "state", "probability", "source", "cue", "your reading", ""]) {
    head.append(el("th", h));
  }
  t.append(head);
  const rows = new Map(report.labels.map(row => [row[0], row]));
  for (const [c, name] of DATA.labels.entries()) {
    const tr = el("tr");
    const row = rows.get(c);
    if (row) {
      const [, s, prob, src, , cue] = row;
      const [, marker, word] = NAMES[String(s)];
      tr.append(el("td", name), el("td", marker + " " + s + " " + word),
                el("td", prob.toFixed(3)), el("td", src), el("td", cue));
    } else {
      tr.append(el("td", name), el("td", "blank"), el("td"), el("td"), el("td"));
    }
    const select = el("select");
    select.setAttribute("aria-label", `${name} in report ${report.id}: your reading`);
    for (const [value, text] of CHOICES) {
      const option = el("option", text);
      option.value = value;
      select.append(option);
    }
    select.value = reading(report, c);
    select.onchange = () => choose(report, c, select.value, tr);
    const cell = el("td");
    cell.append(select);
    tr.append(cell, el("td"));
    mark(tr, (report.index + ":" + c) in CORRECTED);
    t.append(tr);
  }
  a.append(t);
  return a;
}

// a field of the download: a text that starts like a spreadsheet formula ("=", "+", "-", "@",
// a tab or a carriage return) and is no number is written as text, with a leading "'" (OWASP's
// rule against CSV injection), then quoted where it holds a quote, comma or line break
function csvField(value) {
  const text = String(value);
  const safe = /^[=+\-@\t\r]/.test(text) && isNaN(Number(text)) ? "'" + text : text;
  return /[",\n\r]/.test(safe) ? '"' + safe.replaceAll('"', '""') + '"' : safe;
}

// the corrected reports, a site table: id, report, every label's state and, in "Corrected", the
// labels whose states the reader chose (the others are as labelled)
function download() {
  const touched = [...new Set(Object.keys(CORRECTED).map(k => Number(k.split(":")[0])))]
    .sort((a, b) => a - b);
  const lines = [["id", "Reports", ...DATA.labels, "Corrected"].map(csvField).join(",")];
  for (const i of touched) {
    const report = DATA.reports[i];
    const states = DATA.labels.map((_, c) => reading(report, c));
    const corrected = DATA.labels.filter((_, c) => (i + ":" + c) in CORRECTED).join("; ");
    lines.push([report.id, report.text, ...states, corrected].map(csvField).join(","));
  }
  const link = el("a");
  link.href = URL.createObjectURL(new Blob([lines.join("\r\n") + "\r\n"], {type: "text/csv"}));
  link.download = "corrections.csv";
  document.body.append(link);
  link.click();
  link.remove();
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
document.getElementById("download").onclick = download;
document.getElementById("clear").onclick = () => {
  for (const key of Object.keys(CORRECTED)) delete CORRECTED[key];
  save();
  render();
};
save();
render();
