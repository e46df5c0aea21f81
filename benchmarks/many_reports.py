"""Many reports through ``reportfed label``: wall time and peak memory against the table's rows.

The reports are a stand-in for a hospital's dictated reports (MIMIC-style: EXAMINATION,
INDICATION, COMPARISON, FINDINGS and IMPRESSION sections, 15 to 25 distinct sentences each),
made deterministically from IU sentences, so a million of them need no data we cannot share.
Each size runs as its own ``reportfed label`` process (default model, fp32, warm embedding cache:
every IU sentence was embedded before the timing, so the times are reading, the text path, the
model and writing). Peak RSS is the process's own (``wait4``); it must not grow with the rows.
``--before DIR`` also runs the sizes up to ``--before-rows`` with the reportfed of another
checkout (``git worktree add DIR <commit>``), in the same invocation, for a before/after ratio.
``--datasets`` also labels the same reports as a Hugging Face dataset (``save_to_disk``), read
from its memory-mapped Arrow files and written back as one (``--format hf``), beside the CSV
path, in the same invocation.

    python benchmarks/many_reports.py [--rows 10000 100000 1000000] [--before DIR] [--datasets]

Writes ``benchmarks/results/many_reports.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
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


def write_dataset(csv_path: Path, folder: Path) -> None:
    """The reports of the table ``csv_path`` as a Hugging Face dataset saved to ``folder``,
    written a chunk at a time (its scratch files beside it, removed)."""
    import pandas as pd
    from datasets import Dataset

    def rows():  # type: ignore[no-untyped-def]
        for chunk in pd.read_csv(csv_path, dtype=str, chunksize=50_000):
            yield from chunk.to_dict("records")

    scratch = folder.with_name(folder.name + ".scratch")
    Dataset.from_generator(rows, cache_dir=str(scratch)).save_to_disk(str(folder))
    shutil.rmtree(scratch)


def folder_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def label(
    reports: Path,
    out: Path,
    cache: Path,
    code: Path | None = None,
    numerics: dict[str, str] | None = None,
    extra: tuple[str, ...] = (),
) -> dict[str, float]:
    """``reportfed label`` on ``reports`` in its own process (the reportfed of checkout ``code``
    where given; fp32 unless ``numerics``, variables of the environment, say otherwise; ``extra``
    options): wall seconds and peak RSS (MB)."""
    env = {
        **os.environ,
        "REPORTFED_EMBEDDINGS_CACHE": str(cache),
        **(numerics if numerics is not None else {"REPORTFED_PRECISION": "fp32"}),
    }
    if code is not None:
        env["PYTHONPATH"] = str(code)
    command = [sys.executable, "-m", "reportfed", "label", "--reports", str(reports)]
    return measured_run([*command, "--out", str(out), *extra], env, cwd=out.parent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--before", type=Path, help="a checkout of the code to compare with")
    parser.add_argument("--before-rows", type=int, default=10_000)
    parser.add_argument(
        "--datasets", action="store_true", help="also label each size as a Hugging Face dataset"
    )
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
                    "input": "csv",
                    "rows": n,
                    "input_mb": reports.stat().st_size / 1e6,
                    **label(reports, out, work / "cache", checkout),
                    "output_mb": out.stat().st_size / 1e6,
                }
                row["reports_per_s"] = n / row["wall_s"]
                rows.append(row)
                print(json.dumps(row), flush=True)
                out.unlink()
            if args.datasets:
                folder, labelled = work / f"dataset_{n}", work / f"labelled_{n}"
                write_dataset(reports, folder)
                row = {
                    "code": "this",
                    "input": "dataset",
                    "rows": n,
                    "input_mb": folder_mb(folder),
                    **label(folder, labelled, work / "cache", extra=("--format", "hf")),
                    "output_mb": folder_mb(labelled),
                }
                row["reports_per_s"] = n / row["wall_s"]
                rows.append(row)
                print(json.dumps(row), flush=True)
                shutil.rmtree(folder)
                shutil.rmtree(labelled)
            reports.unlink()
    result = {
        "machine": machine(),
        "before": args.before and checkout_commit(args.before),
        "rows": rows,
    }
    save_result(args.out, result)


if __name__ == "__main__":
    main()
