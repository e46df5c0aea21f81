"""One long report, labelled: time against its length, to hold the text path linear.

Single reports of 2k to 32k sentences (IU findings sentences in order, under a ``FINDINGS:``
header, a section header every 50 sentences), and single run-on sentences of 500 to 4k IU
sentences (the same sentences without their full stops: a dictation that never ends one), go
through each step of ``reportfed label`` on one report: sentence splitting
(:func:`~reportfed.text.sentences.report_units`), mentions and their assertions
(:func:`~reportfed.text.states.report_mentions`) and the whole labelling with the default model (:meth:`~reportfed.labeler.ReportLabeler.annotate`, evidence included, embedding
cache warm: every sentence was embedded once before the timing, so the times are the text path's
and the model's; the text path's memory of the sentences it read is emptied before every run).
Each time is the median of ``--repeats`` runs; each step's ratio between consecutive lengths is
stored: linear is 2.

    python benchmarks/long_report.py [--sentences 2000 4000 8000 16000 32000]
        [--run-on 500 1000 2000 4000] [--repeats 3]

Writes ``benchmarks/results/long_report.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

from machine import machine, save_result

from reportfed.data.iu import load_iu
from reportfed.default_model import load_default_model
from reportfed.text.assertion import _boundaries, _sentence_mentions
from reportfed.text.sentences import _reading, report_units, split_sentences
from reportfed.text.states import report_mentions

RESULTS = Path(__file__).resolve().parent / "results" / "long_report.json"


@functools.cache
def _pool() -> list[str]:
    """IU's findings sentences, report after report (read once for every report built)."""
    return [s for text in load_iu().texts for s in split_sentences(text)]


def long_report(n_sentences: int, every: int = 50) -> str:
    """A report of ``n_sentences`` IU findings sentences, a header every ``every`` of them."""
    pool = _pool()
    lines = ["FINDINGS:"]
    for i in range(n_sentences):
        if i and i % every == 0:
            lines.append("\nIMPRESSION:" if (i // every) % 2 else "\nFINDINGS:")
        lines.append(pool[i % len(pool)])
    return " ".join(lines)


def run_on(n_sentences: int) -> str:
    """One sentence of ``n_sentences`` IU findings sentences, their full stops left out."""
    pool = _pool()
    unended = [re.sub(r"[.!?\s]+$", "", pool[i % len(pool)]) for i in range(n_sentences)]
    return "FINDINGS: " + " ".join(unended) + "."


def seconds(step: Callable[[], object], repeats: int) -> float:
    """The median wall time of ``repeats`` runs of ``step``, each reading every sentence anew."""
    times = []
    for _ in range(repeats):
        _reading.cache_clear()
        _sentence_mentions.cache_clear()
        _boundaries.cache_clear()
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sentences", type=int, nargs="+", default=[2000, 4000, 8000, 16000, 32000]
    )
    parser.add_argument("--run-on", type=int, nargs="+", default=[500, 1000, 2000, 4000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    times = functools.partial(seconds, repeats=args.repeats)
    steps = ("split_s", "mentions_s", "label_s")
    result: dict[str, object] = {"machine": machine(), "repeats": args.repeats}
    with tempfile.TemporaryDirectory() as cache:
        labeler = load_default_model(cache_dir=cache)
        labeler.set_params(progress=False)
        labels = list(labeler.classes_)
        for key, build, sizes in (
            ("", long_report, args.sentences),
            ("run_on_", run_on, args.run_on),
        ):
            reports = {n: build(n) for n in sizes}
            labeler.annotate([reports[max(reports)]])  # embeds every sentence once
            rows = []
            for n, text in reports.items():
                row = {
                    "sentences": n,
                    "characters": len(text),
                    "split_s": times(lambda text=text: report_units(text)),
                    "mentions_s": times(lambda text=text: report_mentions([text], labels)),
                    "label_s": times(lambda text=text: labeler.annotate([text])),
                }
                rows.append(row)
                print(key + "row", json.dumps(row), flush=True)
            result[key + "rows"] = rows
            result[key + "ratio_to_half_the_sentences"] = [
                {"sentences": b["sentences"], **{s: b[s] / a[s] for s in steps}}
                for a, b in pairwise(rows)
            ]
    save_result(args.out, result)


if __name__ == "__main__":
    main()
