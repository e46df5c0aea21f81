"""Many reports through ``reportfed label``: wall time and peak memory against the table's rows.

The reports are a stand-in for a hospital's dictated reports (MIMIC-style: EXAMINATION,
INDICATION, COMPARISON, FINDINGS and IMPRESSION sections, 15 to 25 distinct sentences each),
made deterministically from IU sentences, so a million of them need no data we cannot share.
Each size runs as its own ``reportfed label`` process (default model, fp32, warm embedding cache:
every IU sentence was embedded before the timing, so the times are reading, the text path, the
model and writing). Peak RSS is the process's own (``wait4``); it must not grow with the rows.
``--before DIR`` also runs the sizes up to ``--before-rows`` with the reportfed of another
checkout (``git worktree add DIR <commit>``), in the same invocation, for a before/after ratio.

    python benchmarks/many_reports.py [--rows 10000 100000 1000000] [--before DIR]

Writes ``benchmarks/results/many_reports.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys
import tempfile
from pathlib import Path

from machine import checkout_commit, machine, measured_run, save_result

from reportfed.data.iu import load_iu
from reportfed.text.sentences import split_sentences

RESULTS = Path(__file__).resolve().parent / "results" / "many_reports.json"
INDICATIONS = (
    "___-year-old woman with shortness of breath.",
    "___-year-old man with fever and cough, evaluate for pneumonia.",
    "History of CHF, assess for interval change.",
    "Status post line placement.",
    "Chest pain.",
)


def sentence_pool() -> list[str]:
    """The distinct IU report sentences, each ending in a full stop, in a fixed order."""
    found = {s for text in load_iu().texts for s in split_sentences(text)}
    return sorted({s if s[-1] in ".?!" else s + "." for s in found})


def stand_in_report(rng: random.Random, pool: list[str]) -> str:
    """One MIMIC-style report of 15 to 25 distinct IU sentences."""
    body = rng.sample(pool, rng.randint(15, 25))
    cut = max(1, len(body) * 3 // 4)
    return "\n".join(
        [
            "EXAMINATION: CHEST (PA AND LAT)",
            "",
            f"INDICATION: {rng.choice(INDICATIONS)}",
            "",
            "COMPARISON: ___",
            "",
            "FINDINGS:",
            "",
            " ".join(body[:cut]),
            "",
            "IMPRESSION:",
            "",
            " ".join(body[cut:]),
        ]
    )


def write_reports(path: Path, rows: int, pool: list[str], seed: int = 0) -> None:
    """``rows`` stand-in reports as a CSV with ``id`` and ``Reports`` columns."""
    rng = random.Random(seed)
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["id", "Reports"])
        for i in range(rows):
            out.writerow([f"s{i:07d}", stand_in_report(rng, pool)])


def label(
    reports: Path,
    out: Path,
    cache: Path,
    code: Path | None = None,
    numerics: dict[str, str] | None = None,
) -> dict[str, float]:
    """``reportfed label`` on ``reports`` in its own process (the reportfed of checkout ``code``
    where given; fp32 unless ``numerics``, variables of the environment, say otherwise): wall
    seconds and peak RSS (MB)."""
    env = {
        **os.environ,
        "REPORTFED_EMBEDDINGS_CACHE": str(cache),
        **(numerics if numerics is not None else {"REPORTFED_PRECISION": "fp32"}),
    }
    if code is not None:
        env["PYTHONPATH"] = str(code)
    command = [sys.executable, "-m", "reportfed", "label", "--reports", str(reports)]
    return measured_run([*command, "--out", str(out)], env, cwd=out.parent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--before", type=Path, help="a checkout of the code to compare with")
    parser.add_argument("--before-rows", type=int, default=10_000)
    args = parser.parse_args()
    pool = sentence_pool()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        warm = work / "pool.csv"
        with open(warm, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([["Reports"], *([s] for s in pool)])
        label(warm, work / "pool_labels.csv", work / "cache")  # every sentence embedded once
        rows = []
        for n in args.rows:
            reports = work / f"reports_{n}.csv"
            write_reports(reports, n, pool)
            out = work / f"labels_{n}.csv"
            codes = {"this": None}
            if args.before is not None and n <= args.before_rows:
                codes["before"] = args.before.resolve()
            for code, checkout in codes.items():
                row = {
                    "code": code,
                    "rows": n,
                    "input_mb": reports.stat().st_size / 1e6,
                    **label(reports, out, work / "cache", checkout),
                    "output_mb": out.stat().st_size / 1e6,
                }
                row["reports_per_s"] = n / row["wall_s"]
                rows.append(row)
                print(json.dumps(row), flush=True)
                out.unlink()
            reports.unlink()
    result = {
        "machine": machine(),
        "before": args.before and checkout_commit(args.before),
        "rows": rows,
    }
    save_result(args.out, result)


if __name__ == "__main__":
    main()
