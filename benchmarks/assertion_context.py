"""reportfed's assertion rules against medspaCy's ConText, on the behaviour and layout suites.

Both read the same sentences (:mod:`reportfed.text.sentences`) and the same mentions (reportfed's
lexicon is the target list); only the state of a finding phrase differs:

* ``reportfed``: the cue rules of :mod:`reportfed.text.assertion`;
* ``context``: medspaCy's ConText with its default rules on the mention's sentence (negated: 0;
  uncertain or hypothetical: -1; else 1);
* ``either``: reportfed's state, except that a mention reportfed affirms takes ConText's
  negation or hedge.

Anatomy phrases ("heart size is normal") and alternatives ("X or Y") keep reportfed's reading in
all three (ConText has no counterpart). A judged pair is a (report, finding) of the suite's truth
with a lexicon; a report's state aggregates its mentions as the CheXpert labeler does, and a
finding with no mention is blank. Writes ``--out`` (JSON) with the accuracy per category and
layout and, given ``--iu`` (a table from ``reportfed corpus iu --out iu.csv``), the macro F1 of
state 1 against IU's MeSH-derived labels (text only, no model; suites written for reportfed
favour its rules, IU does not).

medspaCy 1.3 needs spaCy < 3.8 on Python 3.11, hence NumPy < 2, which pandas 3 (a reportfed
dependency) refuses, so it runs in an environment of its own, e.g.::

    python -m venv --system-site-packages /tmp/ctx && /tmp/ctx/bin/pip install medspacy
    reportfed corpus iu --out /tmp/iu.csv
    /tmp/ctx/bin/python benchmarks/assertion_context.py --iu /tmp/iu.csv
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from reportfed.core.files import atomic_write
from reportfed.text import assertion

ROOT = Path(__file__).resolve().parents[1]
SUITES = {
    "behaviour": (ROOT / "tests" / "data" / "behaviour.csv", "category"),
    "layouts": (ROOT / "tests" / "data" / "layouts.csv", "layout"),
}
RESULTS = ROOT / "benchmarks" / "results" / "assertion_context.json"
_STATE = {"affirmed": "1", "uncertain": "-1", "negated": "0"}
MODES = ("reportfed", "context", "either")


def context_reader() -> Callable[[str, int, int], assertion.Assertion]:
    """The state medspaCy's ConText gives the mention at characters ``start:end`` of a
    sentence."""
    import medspacy
    from spacy.tokens import Span

    nlp = medspacy.load(medspacy_enable=["medspacy_context"])
    context = nlp.get_pipe("medspacy_context")

    def read(sentence: str, start: int, end: int) -> assertion.Assertion:
        doc = nlp.make_doc(sentence)
        for token in doc:  # one sentence: reportfed split the report
            token.is_sent_start = token.i == 0
        span = doc.char_span(start, end, label="FINDING", alignment_mode="expand")
        doc.ents = [Span(doc, span.start, span.end, label="FINDING")]
        ent = context(doc).ents[0]
        if ent._.is_negated:
            return "negated"
        return "uncertain" if ent._.is_uncertain or ent._.is_hypothetical else "affirmed"

    return read


def states(text: str, labels: list[str], mode: str, ctx) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Per label, the report's state ("1", "0", "-1", or "" not mentioned) under ``mode``."""
    mentions = assertion.find_mentions(text, labels)
    if mode != "reportfed":
        read = []
        for m in mentions:
            phrase = assertion._FINDING_RE[m.label].fullmatch(m.text, *m.span)
            alternative = m.assertion == "uncertain" and assertion._ALTERNATIVE.match(m.cue + " ")
            if phrase is None or alternative:
                read.append(m)  # an anatomy phrase or an alternative: reportfed's reading
                continue
            theirs = ctx(m.text, *m.span)
            keep = mode == "either" and m.assertion != "affirmed"
            read.append(m if keep else replace(m, assertion=theirs))
        mentions = read
    return {
        label: "" if m is None else _STATE[m.assertion]
        for label, m in assertion.decide(mentions, labels).items()
    }


def score(path: Path, group: str, mode: str, ctx) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Per group (and ``all``), the share of judged pairs whose state is right."""
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            truth = dict(pair.split("=") for pair in row["expected"].split(";"))
            judged = [label for label in truth if assertion.has_lexicon(label)]
            got = states(row["report"], judged, mode, ctx)
            for label in judged:
                hit = got[label] == truth[label]
                right[row[group]] += hit
                total[row[group]] += 1
                right["all"] += hit
                total["all"] += 1
    return {k: right[k] / total[k] for k in sorted(total)}


def iu_f1(path: Path, mode: str, ctx) -> float:  # type: ignore[no-untyped-def]
    """Macro F1 over the lexicon labels of state 1 against IU's labels (annotated rows)."""
    hits: Counter[str] = Counter()  # label -> true positives, "said:" / "true:" counts
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    labels = [c for c in rows[0] if assertion.has_lexicon(c)]
    for row in rows:
        got = states(row["Reports"], labels, mode, ctx)
        for label in labels:
            if row[label] == "":
                continue
            said, true = got[label] == "1", float(row[label]) == 1
            hits[label] += said and true
            hits["said:" + label] += said
            hits["true:" + label] += true
    f1 = [
        2 * hits[c] / (hits["said:" + c] + hits["true:" + c]) for c in labels if hits["true:" + c]
    ]
    return sum(f1) / len(f1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--iu", type=Path, help="IU table (reportfed corpus iu --out)")
    args = parser.parse_args()
    ctx = context_reader()
    result: dict[str, dict[str, object]] = {
        suite: {mode: score(path, group, mode, ctx) for mode in MODES}
        for suite, (path, group) in SUITES.items()
    }
    if args.iu:
        result["iu_macro_f1_state_1"] = {mode: iu_f1(args.iu, mode, ctx) for mode in MODES}
    atomic_write(args.out, json.dumps(result, indent=1).encode())
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
