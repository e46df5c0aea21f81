"""``reportfed label`` from cold: start-up, and reports/s on 1,000 dictated reports none of whose
sentences the embedding cache holds.

Each run is a whole ``reportfed label`` process with the defaults (default model, ``auto``
backend and precision) and an empty embedding cache. Start-up is the wall time for the six
example reports (``examples/reports.csv``): the imports, the default model's load and a few
sentences. The rate is 1,000 stand-in reports (``many_reports.stand_in_report``: MIMIC-style
sections, 15 to 25 distinct IU sentences each) over the wall time left when start-up is taken
off. Every run is made on this CPU as it is and, on a CPU that multiplies bf16 natively, capped
to AVX2 (``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2``, a CPU without AVX512-BF16;
``machine.cpu_caps``); ``--before DIR`` runs the same with
another checkout (``git worktree add DIR <commit>``) in the same invocation. The median of
``--repeats`` runs is kept.

    python benchmarks/cold_label.py [--before DIR] [--repeats 3] [--out FILE]

Writes ``benchmarks/results/cold_label.json`` (``cold_label_avx2.json`` holds a run on a CPU with
AVX2 alone).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import tempfile
from pathlib import Path

from machine import checkout_commit, cpu_caps, machine, save_result
from many_reports import label, sentence_pool, write_reports

from reportfed.text.sentences import report_units

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "cold_label.json"
EXAMPLES = HERE.parent / "examples" / "reports.csv"
REPORTS = 1000


def cold_seconds(reports: Path, work: Path, code: Path | None, cap: str) -> float:
    """Wall seconds of one ``reportfed label`` on ``reports`` with an empty embedding cache."""
    cache = Path(tempfile.mkdtemp(dir=work))
    numerics = {**cpu_caps()[cap], "REPORTFED_BACKEND": "auto", "REPORTFED_PRECISION": "auto"}
    return label(reports, work / "out.csv", cache, code, numerics)["wall_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a checkout of the code to compare with")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    codes = {"this": None, **({"before": args.before.resolve()} if args.before else {})}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        reports = work / "reports.csv"
        write_reports(reports, REPORTS, sentence_pool())
        with open(reports, newline="", encoding="utf-8") as f:
            texts = [row["Reports"] for row in csv.DictReader(f)]
        distinct = len({u for text in texts for u in report_units(text)})
        for code, checkout in codes.items():
            for cap in cpu_caps():
                cold_seconds(EXAMPLES, work, checkout, cap)  # the default model built, exports made
                start = statistics.median(
                    cold_seconds(EXAMPLES, work, checkout, cap) for _ in range(args.repeats)
                )
                whole = statistics.median(
                    cold_seconds(reports, work, checkout, cap) for _ in range(args.repeats)
                )
                row = {
                    "code": code,
                    "cpu": cap,
                    "start_s": round(start, 2),
                    "whole_s": round(whole, 2),
                    "reports_per_s": round(REPORTS / (whole - start), 1),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    result = {
        "machine": machine(),
        "reports": REPORTS,
        "distinct_sentences": distinct,
        "before": args.before and checkout_commit(args.before),
        "rows": rows,
    }
    save_result(args.out, result)


if __name__ == "__main__":
    main()
