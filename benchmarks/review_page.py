"""The review page (``reportfed label --review``) in a real browser, by the reports it holds: how
long it takes to open, to take a correction, to go to its last page, to filter and to reload with
the correction kept, each against the six example reports' page, in one invocation.

The pages are written by ``reportfed label --review`` with the default model (built first, not
timed) from IU reports repeated to the size; Debian's ``chromium`` runs them headless, driven by
Playwright (the test extra). Every time is the median of ``--repeat`` runs in a fresh browser.

    python benchmarks/review_page.py [--rows 2000 20000] [--repeat 3]

Writes ``benchmarks/results/review_page.json``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from machine import machine, save_result
from playwright.sync_api import sync_playwright

from reportfed.data.iu import load_iu

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results" / "review_page.json"
STEPS = ("open", "correct", "last_page", "filter", "reload")


def write_page(rows: int | None, folder: Path) -> Path:
    """The review page of ``rows`` IU reports (``None``: the six example reports)."""
    if rows is None:
        reports = ROOT / "examples" / "reports.csv"
    else:
        texts = load_iu().texts
        texts = (texts * (rows // len(texts) + 1))[:rows]
        reports = folder / f"reports{rows}.csv"
        pd.DataFrame({"id": [f"r{i}" for i in range(rows)], "Reports": texts}).to_csv(
            reports, index=False
        )
    page = folder / f"review{rows or 6}.html"
    command = ["reportfed", "label", "--reports", str(reports), "--out",
               str(folder / "labels.csv"), "--review", str(page)]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True)
    return page


def timed(page: Path, chromium: str) -> dict[str, float]:
    """Seconds of each of :data:`STEPS` on ``page``, in a fresh browser."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            tab = browser.new_context().new_page()
            out = {}
            start = time.perf_counter()
            tab.goto(page.resolve().as_uri())
            tab.wait_for_selector("article")
            out["open"] = time.perf_counter() - start
            first = tab.locator("article").first.get_attribute("data-id")
            start = time.perf_counter()
            tab.get_by_label(f"Edema in report {first}: your reading").select_option("-1")
            tab.wait_for_function("document.getElementById('corrected').textContent !== "
                                  "'no corrections'")  # fmt: skip
            out["correct"] = time.perf_counter() - start
            where = tab.inner_text("#where")  # "page 1 of N: M report(s) match"
            pages = int(where.split(" of ")[1].split(":")[0])
            start = time.perf_counter()
            tab.evaluate(f"location.hash = 'page={pages}'")
            tab.wait_for_function(f"document.getElementById('where').textContent"
                                  f".startsWith('page {pages} of')")  # fmt: skip
            out["last_page"] = time.perf_counter() - start
            shown = tab.inner_text("#where")
            start = time.perf_counter()
            tab.evaluate("location.hash = 'label=Edema&state=1'")
            tab.wait_for_function(f"document.getElementById('where').textContent !== {shown!r}")
            out["filter"] = time.perf_counter() - start
            start = time.perf_counter()
            tab.evaluate("location.hash = ''")
            tab.reload()
            tab.wait_for_selector("article")
            assert tab.inner_text("#corrected") != "no corrections"  # kept across the reload
            out["reload"] = time.perf_counter() - start
            return out
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium is not installed (apt-get install chromium)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in [None, *args.rows]:
            page = write_page(size, Path(tmp))
            runs = [timed(page, chromium) for _ in range(args.repeat)]
            row: dict[str, float | int] = {
                "reports": size or 6,
                "page_mb": page.stat().st_size / 1e6,
                **{f"{s}_s": statistics.median(r[s] for r in runs) for s in STEPS},
            }
            rows.append(row)
            print(row, flush=True)
    for row in rows:  # each step against the example page's, measured in this invocation
        for step in STEPS:
            row[f"{step}_ratio"] = row[f"{step}_s"] / rows[0][f"{step}_s"]
    save_result(RESULTS, {"machine": machine(), "repeat": args.repeat, "rows": rows})


if __name__ == "__main__":
    main()
