"""Warm labelling of the MIMIC-style suite: the text path's speed, before and after a change.

The suite's 216 reports (``tests/data/mimic_style.csv``) repeated to ``--reports`` (2,000) are
labelled with ``predict_states`` by the default model (fp32), each time in a process of its own
whose embedding cache already holds every sentence: the time is the sentence splitting, the rules
and the model's forward pass, not the encoder; once as repeated copies, once with every copy new
to the rules (:data:`TIMER`). ``--before DIR`` times the reportfed of another
checkout (``git worktree add DIR <commit>``) in the same invocation, the two interleaved,
``--repeats`` times each; read the ratio of the medians.

    python benchmarks/warm_labelling.py [--before DIR] [--repeats 5]

Writes ``benchmarks/results/warm_labelling.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from machine import checkout_commit, machine, save_result

SUITE = Path(__file__).resolve().parents[1] / "tests" / "data" / "mimic_style.csv"
RESULTS = Path(__file__).resolve().parent / "results" / "warm_labelling.json"
#: what each timed process runs: argv is the suite, the number of reports and the mode:
#: ``repeated`` labels the copies in one call (a copy's sentences are read from the rules' caches),
#: ``distinct`` labels the suite once per copy with those caches emptied first, so that every
#: report is new to the rules (untimed: the emptying)
TIMER = """
import sys, time
import pandas as pd
from reportfed.default_model import load_default_model
from reportfed.text import assertion, sentences
texts = list(pd.read_csv(sys.argv[1], keep_default_na=False)["report"])
n, mode = int(sys.argv[2]), sys.argv[3]
labeler = load_default_model()
labeler.progress = False
if mode == "repeated":
    start = time.perf_counter()
    labeler.predict_states((texts * (n // len(texts) + 1))[:n])
    print(time.perf_counter() - start)
else:
    total = 0.0
    for first in range(0, n, len(texts)):
        # the rules' caches, as each version names them
        for module, name in ((assertion, "_sentence_mentions"), (assertion, "_sentence_breaks"),
                             (assertion, "_terminators"), (assertion, "_boundaries"),
                             (sentences, "_reading"),
                             (sentences, "_findings_sections")):
            cached = getattr(module, name, None)
            if hasattr(cached, "cache_clear"):
                cached.cache_clear()
        start = time.perf_counter()
        labeler.predict_states(texts[: n - first])
        total += time.perf_counter() - start
    print(total)
"""
MODES = ("repeated", "distinct")


def seconds(code: Path | None, reports: int, cache: Path, mode: str) -> float:
    """One timed labelling of ``reports`` reports (``mode``: :data:`TIMER`) by the reportfed
    of ``code`` (this one where ``None``), in its own process with the embedding cache
    ``cache``."""
    env = {**os.environ, "REPORTFED_EMBEDDINGS_CACHE": str(cache), "REPORTFED_PRECISION": "fp32"}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    done = subprocess.run(
        [sys.executable, "-c", TIMER, str(SUITE), str(reports), mode],
        env=env,
        capture_output=True,
        text=True,
        cwd=code or Path(__file__).resolve().parents[1],
    )
    if done.returncode:
        raise SystemExit(f"labelling failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before", type=Path, help="a checkout of the code to compare with")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    codes: dict[str, Path | None] = {"this": None}
    if args.before is not None:
        codes["before"] = args.before.resolve()
    times: dict[str, dict[str, list[float]]] = {m: {name: [] for name in codes} for m in MODES}
    with tempfile.TemporaryDirectory() as cache:
        for code in codes.values():  # warm: every sentence embedded, the default model built
            seconds(code, args.reports, Path(cache), "repeated")
        for _ in range(args.repeats):
            for mode in MODES:
                for name, code in codes.items():
                    times[mode][name].append(seconds(code, args.reports, Path(cache), mode))
                    print(mode, name, f"{times[mode][name][-1]:.3f} s", flush=True)
    median = {
        mode: {name: statistics.median(t) for name, t in by_code.items()}
        for mode, by_code in times.items()
    }
    result: dict[str, object] = {
        "machine": machine(),
        "reports": args.reports,
        "seconds": times,
        "median_s": median,
        "reports_per_s": {
            mode: {name: args.reports / s for name, s in by_code.items()}
            for mode, by_code in median.items()
        },
    }
    if args.before is not None:
        result["before"] = checkout_commit(args.before)
        result["before_over_this"] = {
            mode: by_code["before"] / by_code["this"] for mode, by_code in median.items()
        }
    save_result(args.out, result)


if __name__ == "__main__":
    main()
