"""``reportfed corpus mimic`` on MIMIC-CXR-sized stand-ins: wall time and peak memory.

For each size in ``--studies`` (default a tenth of MIMIC-CXR and all of it, 227,835 reports),
a tree in PhysioNet's published layout is generated (``tests/data/make_mimic_fixture.py``: the
reports in MIMIC's dictation, never real MIMIC text, the label and split files) and read by
``reportfed corpus mimic --root DIR --out mimic.csv`` in its own process: wall seconds and its
peak RSS (``wait4``). The reports stream through; what grows with them is the label index, a
row of 14 float32 states and an id per study.

    python -m benchmarks.mimic_corpus [--studies 22784 227835]

Writes ``benchmarks/results/mimic_corpus.json``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.machine import machine, measured_run, save_result

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "mimic_corpus.json"


def generate(root: Path, studies: int) -> None:
    """The stand-in tree, written by its own process: the one that times ``corpus`` stays
    small, so that the child it forks starts small (a child's peak RSS counts its parent's
    pages until it runs ``reportfed``)."""
    command = ["-m", "tests.data.make_mimic_fixture", str(root), "--studies", str(studies)]
    subprocess.run([sys.executable, *command], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def corpus(root: Path, out: Path) -> dict[str, float]:
    """``reportfed corpus mimic`` on ``root`` in its own process: wall seconds, peak RSS (MB)."""
    command = [sys.executable, "-m", "reportfed", "corpus", "mimic", "--root", str(root)]
    return measured_run([*command, "--out", str(out)], {**os.environ, "PYTHONPATH": str(ROOT)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, nargs="+", default=[22_784, 227_835])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows = []
    for studies in args.studies:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "mimic"
            start = time.perf_counter()
            generate(root, studies)
            made_s = time.perf_counter() - start
            out = Path(tmp) / "mimic.csv"
            row = {"studies": studies, "generated_s": made_s, **corpus(root, out)}
            row["reports_per_s"] = studies / row["wall_s"]
            row["output_mb"] = out.stat().st_size / 1e6
            rows.append(row)
            print(row, flush=True)
    save_result(args.out, {"machine": machine(), "rows": rows})


if __name__ == "__main__":
    main()
