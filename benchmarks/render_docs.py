"""Render the measured tables of docs/ from the committed results, so docs state what the
results say: each table sits between ``<!-- rendered: NAME -->`` and ``<!-- end rendered -->``
and is made by ``RENDERERS[NAME]`` from ``benchmarks/results/``. A test fails when a page
differs from its rendering.

    python -m benchmarks.render_docs          # rewrite the tables in docs/
    python -m benchmarks.render_docs --check  # exit 1 if a table is stale
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs"
_BLOCK = re.compile(r"(<!-- rendered: (\S+) -->\n).*?(<!-- end rendered -->)", re.S)


def _load(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((RESULTS / f"{name}.json").read_text())


def _machine(found: dict) -> str:  # type: ignore[type-arg]
    m = found["machine"]
    bf16 = "with" if m["native_bf16"] else "without"
    return f"{m['cores']} cores of {m['cpu']} ({bf16} native bf16), torch {m['torch']}"


def long_report() -> str:
    """Seconds per step of labelling one report, by its length."""
    found = _load("long_report")
    lines = [
        f"Measured on {_machine(found)} (`python benchmarks/long_report.py`):",
        "",
        "| sentences | characters | split (s) | mentions (s) | whole labelling (s) | labelling / half the sentences |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    ratios = {r["sentences"]: r["label_s"] for r in found["ratio_to_half_the_sentences"]}
    for row in found["rows"]:
        ratio = f"{ratios[row['sentences']]:.2f}x" if row["sentences"] in ratios else ""
        lines.append(
            f"| {row['sentences']:,} | {row['characters']:,} | {row['split_s']:.2f} | "
            f"{row['mentions_s']:.2f} | {row['label_s']:.2f} | {ratio} |"
        )
    return "\n".join(lines)


def embedding_backends() -> str:
    """Sentences/s and closeness to fp32 per backend and CPU, and the labels per backend."""
    found = _load("embedding_backends")
    speed, quality = found["speed"], found.get("quality", {})
    caps = {"native": "this CPU", "avx2": "capped to AVX2"}
    head = " | ".join(f"sentences/s, {caps[c]}" for c in speed)
    lines = [
        f"Measured on {_machine(found)}, {found['sentences']:,} distinct IU sentences "
        "(`python benchmarks/embedding_backends.py --quality`; the labels: the default recipe "
        "on IU, seed 0, `benchmarks/labels_iu.py`):",
        "",
        f"| backend | {head} | cosine to fp32 (mean / min) | IU macro AUROC | F1 of state 1 | "
        "cold labelling (reports/s) |",
        "| --- |" + " ---: |" * (len(speed) + 4),
    ]
    first = next(iter(speed.values()))
    for arm in [a for a in first if a != "auto"]:
        rates = " | ".join(
            f"{speed[c][arm]['sentences_per_s']:.0f}" if speed[c][arm] else "cannot run"
            for c in speed
        )
        cos = f"{first[arm]['cosine_to_fp32_mean']:.4f} / {first[arm]['cosine_to_fp32_min']:.4f}"
        q = quality.get(arm)
        labels = (
            f"{q['auroc']:.4f} | {q['f1_states']:.4f} | {q['cold_reports_per_s']:.0f}"
            if q
            else " |  | "
        )
        lines.append(f"| {arm} | {rates} | {cos} | {labels} |")
    auto = ", ".join(f"{caps[c]}: {speed[c]['auto']}" for c in speed)
    lines += ["", f"The default (`auto`) runs: {auto}."]
    return "\n".join(lines)


def many_reports() -> str:
    """Wall time and peak memory of ``reportfed label`` by the table's rows."""
    found = _load("many_reports")
    lines = [
        f"Measured on {_machine(found)}, MIMIC-style stand-in reports made from IU sentences, "
        "warm embedding cache (`python benchmarks/many_reports.py"
        + (f" --before <checkout of {found['before']}>" if found.get("before") else "")
        + "`):",
        "",
        "| code | reports | input (MB) | output (MB) | wall time (s) | reports/s | peak RSS (MB) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in found["rows"]:
        code = "this" if row["code"] == "this" else f"before ({found['before']})"
        lines.append(
            f"| {code} | {row['rows']:,} | {row['input_mb']:,.0f} | {row['output_mb']:,.0f} | "
            f"{row['wall_s']:,.1f} | {row['reports_per_s']:,.0f} | {row['peak_rss_mb']:,.0f} |"
        )
    return "\n".join(lines)


def flower_engines() -> str:
    """Seconds per round of each engine, before and after, and what secure aggregation costs."""
    found = _load("flower_engines")
    rows = {(r["engine"], r["nodes"]): r for r in found["rows"]}
    lines = [
        f"Measured on {_machine(found)} (`python benchmarks/flower_engines.py --skip simulation "
        "--before DIR`, one invocation; before: the Flower processes run the checkout in DIR, a "
        "fresh process per message):",
        "",
        "| nodes, rounds | engine | per round (s) | before (s) | wall (s) | largest weight difference to in-process |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for (engine, k), row in rows.items():
        if engine.endswith("(before)"):
            continue
        before = rows.get((f"{engine} (before)", k))
        was = f"{before['round_s']:.2f}" if before else ""
        lines.append(
            f"| K={k}, {row['rounds']} | {engine} | **{row['round_s']:.2f}** | {was} | "
            f"{row['wall_s']:.1f} | {row['diff']:.1e} |"
        )
    plain, secure = rows[("deployment", 3)], rows[("deployment-secure", 3)]
    mb = 1e6
    lines += [
        "",
        f"At K=3 a secure round takes {secure['round_s'] / plain['round_s']:.2f}x a plain one; "
        f"a node sends {secure['up_bytes'] / mb:.2f} MB a round against "
        f"{plain['up_bytes'] / mb:.2f} MB and receives {secure['down_bytes'] / mb:.2f} MB "
        f"against {plain['down_bytes'] / mb:.2f} MB. After {secure['rounds']} rounds the secure "
        f"and the plain model's label probabilities on the held-out IU reports differ by at "
        f"most {secure['proba_diff']:.1e}.",
    ]
    return "\n".join(lines)


def flower_round() -> str:
    """Seconds of each phase of a node's messages, per way of answering them."""
    found = _load("flower_round")
    ways = {
        "before": "before: a fresh process",
        "after": "a fresh process",
        "after_warm": "the warm process",
    }
    lines = [
        f"Measured on {_machine(found)} (`python benchmarks/flower_round.py --before DIR`, "
        f"median of {found['repeats']} fresh processes per message, one node):",
        "",
        "| message | answered in | start (s) | Flower's imports (s) | reportfed's imports (s) | the message (s) | total (s) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for message in found["after"]:
        for way, name in ways.items():
            if way in found:
                t = found[way][message]
                lines.append(
                    f"| {message} | {name} | {t['start']:.2f} | {t['flower']:.2f} | "
                    f"{t['reportfed']:.2f} | {t['message']:.2f} | **{t['total']:.2f}** |"
                )
    return "\n".join(lines)


RENDERERS: dict[str, Callable[[], str]] = {
    "flower_engines": flower_engines,
    "flower_round": flower_round,
    "many_reports": many_reports,
    "long_report": long_report,
    "embedding_backends": embedding_backends,
}


def render(text: str) -> str:
    """``text`` with every rendered block made anew from the results."""
    return _BLOCK.sub(lambda m: f"{m.group(1)}{RENDERERS[m.group(2)]()}\n{m.group(3)}", text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 where a table is stale")
    args = parser.parse_args()
    stale = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        new = render(text)
        if new != text:
            stale.append(page.name)
            if not args.check:
                page.write_text(new)
    verb = "stale" if args.check else "rendered"
    print(f"{verb}: {', '.join(stale) or 'none'}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
