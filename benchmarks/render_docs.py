"""Render the measured tables of docs/ (and the README's measured sentence) from the committed
results, so docs state what the results say: each table sits between ``<!-- rendered: NAME -->``
and ``<!-- end rendered -->`` and is made by ``RENDERERS[NAME]`` from ``benchmarks/results/``.
A test fails when a page differs from its rendering.

    python -m benchmarks.render_docs          # rewrite the tables in docs/
    python -m benchmarks.render_docs --check  # exit 1 if a table is stale
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs"
#: every page with rendered blocks
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
_BLOCK = re.compile(r"(<!-- rendered: (\S+) -->\n).*?(<!-- end rendered -->)", re.S)


def _load(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((RESULTS / f"{name}.json").read_text())


def _machine(found: dict) -> str:  # type: ignore[type-arg]
    m = found["machine"]
    bf16 = "with" if m["native_bf16"] else "without"
    return f"{m['cores']} cores of {m['cpu']} ({bf16} native bf16), torch {m['torch']}"


def _current(found: dict) -> list[dict]:  # type: ignore[type-arg]
    """The rows this code measured (a benchmark run with ``--before`` also stores the compared
    checkout's rows, which the docs leave to the JSON and git log)."""
    return [row for row in found["rows"] if row.get("code", "this") == "this"]


def long_report() -> str:
    """Seconds per step of labelling one report, by its length: reports of many sentences, then
    one run-on sentence."""
    found = _load("long_report")
    lines = [
        f"Measured on {_machine(found)} (`python benchmarks/long_report.py`; seconds, the "
        f"median of {found.get('repeats', 1)} runs):",
    ]
    tables = (("", "sentences"), ("run_on_", "IU sentences in one run-on sentence"))
    for key, unit in tables:
        ratios = {r["sentences"]: r["label_s"] for r in found[key + "ratio_to_half_the_sentences"]}
        lines += [
            "",
            f"| {unit} | characters | split (s) | mentions (s) | whole labelling (s) | labelling / half the sentences |",
            "| ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for row in found[key + "rows"]:
            ratio = f"{ratios[row['sentences']]:.2f}x" if row["sentences"] in ratios else ""
            lines.append(
                f"| {row['sentences']:,} | {row['characters']:,} | {row['split_s']:.2f} | "
                f"{row['mentions_s']:.2f} | {row['label_s']:.2f} | {ratio} |"
            )
    return "\n".join(lines)


def embedding_backends(name: str) -> str:
    """Sentences/s and closeness to fp32 per backend and CPU, and the labels per backend, from
    the results file ``name`` (one CPU)."""
    found = _load(name)
    speed, quality = found["speed"], found.get("quality", {})
    caps = {"native": "this CPU", "avx2": "capped to AVX2"}
    head = " | ".join(f"sentences/s, {caps[c]}" for c in speed)
    lines = [
        f"Measured on {_machine(found)}, {found['sentences']:,} distinct IU sentences, "
        f"sentences/s the median of {found.get('repeats', 1)} interleaved runs "
        "(`python benchmarks/embedding_backends.py --quality`; the labels: the default recipe "
        f"on IU, mean over seeds {', '.join(map(str, found.get('quality_seeds', [0])))}, "
        "`benchmarks/labels_iu.py`"
        + (
            f", as measured at {found['quality_from']}, whose vectors these backends still give"
            if "quality_from" in found
            else ""
        )
        + "):",
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
        ran = next((speed[c][arm] for c in speed if speed[c][arm]), None)
        cos = f"{ran['cosine_to_fp32_mean']:.4f} / {ran['cosine_to_fp32_min']:.4f}" if ran else ""
        q = quality.get(arm)
        labels = (
            f"{q['auroc']:.4f} | {q['f1_states']:.4f} | {q['cold_reports_per_s']:.0f}"
            if q
            else " |  | "
        )
        lines.append(f"| {arm} | {rates} | {cos} | {labels} |")
    named = {c: speed[c]["auto"] for c in speed}  # a torch cache key ends in the precision alone
    auto = ", ".join(f"{caps[c]}: {a if '-' in a else 'torch-' + a}" for c, a in named.items())
    lines += ["", f"The default (`auto`) runs: {auto}."]
    if "note" in found:
        lines += ["", found["note"]]
    return "\n".join(lines)


def cold_label(name: str) -> str:
    """``reportfed label`` from cold: start-up and reports/s, per CPU kind, from the results file
    ``name`` (one CPU)."""
    found = _load(name)
    cpus = {"native": "this CPU", "avx2": "capped to AVX2"}
    lines = [
        f"Measured on {_machine(found)} (`python benchmarks/cold_label.py`, median of 3; "
        f"{found['reports']:,} MIMIC-style stand-in reports of 15 to 25 distinct IU sentences"
        + (
            f", {found['distinct_sentences']:,} distinct sentences in all"
            if "distinct_sentences" in found
            else ""
        )
        + ", an empty embedding cache, the default model and backend):",
        "",
        "| CPU | start-up: 6 example reports (s) | 1,000 reports (s) | reports/s after start-up |",
        "| --- | ---: | ---: | ---: |",
    ]
    for row in _current(found):
        lines.append(
            f"| {cpus[row['cpu']]} | {row['start_s']:.2f} | {row['whole_s']:.2f} | "
            f"**{row['reports_per_s']:.0f}** |"
        )
    return "\n".join(lines)


def many_reports() -> str:
    """Wall time and peak memory of ``reportfed label`` by the table's rows."""
    found = _load("many_reports")
    datasets = any(row.get("input") == "dataset" for row in found["rows"])
    lines = [
        f"Measured on {_machine(found)}, MIMIC-style stand-in reports made from IU sentences, "
        "warm embedding cache (`python benchmarks/many_reports.py"
        + (
            " --datasets`: a CSV table in and out, and the same reports as a Hugging Face "
            "dataset in and out, `--format hf`, in one invocation):"
            if datasets
            else "`):"
        ),
        "",
        "| reports | in and out | input (MB) | output (MB) | wall time (s) | reports/s | "
        "peak RSS (MB) | of it anonymous (MB) |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    kinds = {"csv": "CSV", "dataset": "dataset (Arrow)"}
    for row in _current(found):
        anon = row.get("peak_anon_mb")
        lines.append(
            f"| {row['rows']:,} | {kinds[row.get('input', 'csv')]} | {row['input_mb']:,.0f} | "
            f"{row['output_mb']:,.0f} | {row['wall_s']:,.1f} | {row['reports_per_s']:,.0f} | "
            f"{row['peak_rss_mb']:,.0f} | {'—' if anon is None else f'{anon:,.0f}'} |"
        )
    return "\n".join(lines)


def flower_engines() -> str:
    """Seconds per round of each engine and what secure aggregation costs."""
    found = _load("flower_engines")
    rows = {(r["engine"], r["nodes"]): r for r in found["rows"]}
    lines = [
        f"Measured on {_machine(found)} (`python -m benchmarks.flower_engines --skip simulation`, "
        "one invocation):",
        "",
        "| nodes, rounds | engine | per round (s) | wall (s) | largest weight difference to in-process |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for (engine, k), row in rows.items():
        if not engine.endswith("(before)"):
            lines.append(
                f"| K={k}, {row['rounds']} | {engine} | **{row['round_s']:.2f}** | "
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
    ways = {"after": "a fresh process", "after_warm": "the warm process"}
    lines = [
        f"Measured on {_machine(found)} (`python benchmarks/flower_round.py`, "
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


def _p(p: float) -> str:
    """A p value as the docs write it (one significant digit below 0.01)."""
    return f"{p:.0e}".replace("e-0", "e-") if p < 0.01 else f"{p:.2g}"


def granularity() -> str:
    """Sentence-level against whole-report embeddings, paired over the same seeds."""
    found = _load("granularity")
    metrics = ("auroc", "leakfree_f1", "paper_accuracy")
    lines = [
        f"`python benchmarks/granularity.py`, IU, the papers' protocol, the same "
        f"{found['repeats']} seeds and splits for both, paired t-tests, percent, mean ± SD:",
        "",
        "| setting | input | macro AUROC | leak-free F1 | paper acc. |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for setting, by_metric in found["quality"].items():
        for level in ("report", "sentence"):
            cells = []
            for metric in metrics:
                m = by_metric[metric]
                cell = f"{100 * m[level]['mean']:.2f} ± {100 * m[level]['sd']:.2f}"
                if level == "sentence":
                    better = m["sentence_minus_report"] > 0 and m["paired_p"] < 0.05
                    cell = f"**{cell}**" if better else cell
                    cell += f" (p = {_p(m['paired_p'])})"
                cells.append(cell)
            lines.append(f"| {setting} | {level} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def labels_iu() -> str:
    """The default recipe's labels on IU reports it never saw, and how fast it labels them."""
    found = _load("labels_iu")
    seeds = [run["seed"] for run in found["runs"]]
    names = {
        "auroc": "macro AUROC, calibrated probabilities",
        "auroc_model": "macro AUROC, the model's scores",
        "f1_model": "macro F1 of the positives, the model's thresholds alone",
        "f1_states": "macro F1 of state 1 (the four states)",
        "brier": "Brier score, calibrated probabilities",
        "brier_model": "Brier score, the model's scores",
        "ece": "expected calibration error, calibrated probabilities",
        "ece_model": "expected calibration error, the model's scores",
    }
    lines = [
        f"`python benchmarks/labels_iu.py`, seeds {', '.join(map(str, seeds))}, mean ± SD:",
        "",
        "| metric | value |",
        "| --- | ---: |",
    ]
    for key, title in names.items():
        if key in found["mean_sd"]:
            mean, sd = found["mean_sd"][key]
            lines.append(f"| {title} | {mean:.3f} ± {sd:.3f} |")
    speed = found["throughput"]
    where = f"on {_machine(found)}" if "machine" in found else "on 2 cores"
    if "embedder" in found:
        where += f", embedder `{found['embedder']}`"
    lines += [
        "",
        f"Labelling 1,000 of the test reports (embedding, scoring, states) {where}: "
        f"{speed['cold_reports_per_s']:,.0f} reports/s with a cold embedding cache, "
        f"{speed['warm_reports_per_s']:,.0f} warm.",
    ]
    return "\n".join(lines)


def node_sweep(name: str) -> str:
    """The lockstep engine's paths on one node sweep: time, throughput, share of the peak, AUROC."""
    found = _load(name)
    float32 = found["paths"]["float32"]
    lines = [
        f"Measured on {found['machine']} (`python benchmarks/node_sweep.py"
        + (" --granularity sentence" if found["granularity"] == "sentence" else "")
        + (f" --repeats {found['repeats']}" if found["repeats"] != 20 else "")
        + (" --skip loop" if "loop" not in found["paths"] else "")
        + f"`: K=2..10, {found['repeats']} repeats x {found['rounds']} rounds = {found['runs']} "
        f"runs at {found['granularity']} level, {found['sweep_tflop']} TFLOP of products; the "
        f"matrix-product peak of the same invocation {found['peak_gflops']['float32']:,.0f} "
        f"GFLOP/s in fp32 and {found['peak_gflops']['bfloat16']:,.0f} in bf16):",
        "",
        "| path | wall (s) | node-rows/s | GFLOP/s | of fp32 peak | macro AUROC | minus lockstep fp32 (mean, SD, paired p) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    names = {
        "loop": "per-node loop (`run_federation`), one training thread",
        "float32": "lockstep fp32 (`Compute()`)",
        "bf16": "lockstep bf16 (`Compute(bf16=True)`)",
    }
    for path, title in names.items():
        if path not in found["paths"]:
            continue
        row = found["paths"][path]
        diff = row.get("auroc_minus_float32")
        versus = (
            f"{diff['mean']:+.5f}, {diff['sd']:.4f}, p = {diff['paired_p']:.2f}" if diff else ""
        )
        lines.append(
            f"| {title} | {row['s']:.1f} | {row['node_rows_per_s']:,} | {row['gflops']:.1f} | "
            f"{row['of_float32_peak']:.1%} | {row['auroc_mean']:.4f} | {versus} |"
        )
    lines += [
        "",
        f"The sweep's path (`lockstep_path`, the fastest whose AUROC does not differ from fp32's): "
        f"**{found['lockstep_path']}, {found['lockstep_s']} s**, "
        f"{float32['s'] / found['lockstep_s']:.1f}x faster than lockstep fp32"
        + (
            f" and {found['paths']['loop']['s'] / found['lockstep_s']:.1f}x faster than the loop. "
            f"Largest weight difference after one round between `Compute(replay=True)` and the "
            f"loop: {found['max_weight_diff_after_one_round']:.1e}."
            if "loop" in found["paths"]
            else "."
        ),
    ]
    return "\n".join(lines)


def contention() -> str:
    """Training and embedding alone and next to a process keeping every core busy."""
    found = _load("contention")
    runs = found["measured"]
    lines = [
        f"Measured on {found['cpus']} cores (`python benchmarks/contention.py`: the default "
        f"model, {found['rounds']} rounds, embeddings cached; each in a fresh process):",
        "",
        "| work | threads | alone | busy | slowdown |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, row in runs.items():
        if name.startswith("training"):
            who = "torch's default" if name.endswith("before") else "reportfed"
            lines.append(
                f"| training, {who} | {row['threads']} | {row['alone_s']:.1f} s | "
                f"{row['busy_s']:.1f} s | **{row['slowdown']:.2f}x** |"
            )
        else:
            lines.append(
                f"| embedding, {name.split('/')[1]} | {row['threads']} | "
                f"{row['alone_per_s']:.0f} reports/s | {row['busy_per_s']:.0f} reports/s | "
                f"{row['alone_per_s'] / row['busy_per_s']:.2f}x |"
            )
    return "\n".join(lines)


def evidence() -> str:
    """The example reports' evidence (``examples/evidence.csv``, which a test holds the default
    model to) as a table."""
    import pandas as pd

    found = pd.read_csv(ROOT / "examples" / "evidence.csv", keep_default_na=False)
    columns = ["id", "row", "label", "state", "probability", "score", "sentence", "cue", "source"]
    right = {"row", "state", "probability", "score"}
    lines = [
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join("---:" if c in right else "---" for c in columns) + " |",
    ]
    for r in found.itertuples(index=False):
        cells = [
            r.id, r.row, r.label, f"{float(r.state):g}", f"{r.probability:.3f}",
            f"{r.score:.3f}", r.sentence, r.cue, r.source,
        ]  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def defined_findings() -> str:
    """The example's defined findings on IU, beside IU's MeSH (docs/labels.md)."""
    found = _load("defined_findings")
    lines = [
        f"On the {found['reports']:,} IU reports (`python benchmarks/defined_findings.py`; the "
        "example's regular expressions were written from IU reports its phrases missed, so "
        "these are counts on the rows that chose them, not a held-out measure):",
        "",
        "| finding | read affirmed | negated | uncertain | indexed by MeSH (heading) | "
        "affirmed and indexed |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, f in found.items():
        if isinstance(f, dict):
            lines.append(
                f"| {name} | {f['affirmed']} | {f['negated']} | {f['uncertain']} | "
                f"{f['indexed']} ({'; '.join(f['mesh'])}) | {f['affirmed_and_indexed']} |"
            )
    return "\n".join(lines)


def review_page() -> str:
    """Seconds of each step on the review page by the reports it holds."""
    found = _load("review_page")
    lines = [
        f"Measured on {_machine(found)}, Debian's chromium driven by Playwright, median of "
        f"{found['repeat']} fresh browsers (`python benchmarks/review_page.py`):",
        "",
        "| reports | page (MB) | open (s) | a correction (s) | last page (s) | filter (s) | "
        "reload, correction kept (s) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in found["rows"]:
        lines.append(
            f"| {row['reports']:,} | {row['page_mb']:.1f} | {row['open_s']:.2f} | "
            f"{row['correct_s']:.2f} | {row['last_page_s']:.2f} | {row['filter_s']:.2f} | "
            f"{row['reload_s']:.2f} |"
        )
    return "\n".join(lines)


def flower_dp() -> str:
    """What differential privacy cost a two-node Flower run (docs/federation.md)."""
    runs = json.loads((RESULTS / "flower_dp.json").read_text())
    base = next(r for r in runs if not r["noise"])
    noisy = [r for r in runs if r["noise"]]
    said = ", ".join(f"{r['macro-auroc']:.3f} with noise {r['noise']:g}" for r in noisy)
    return (
        f"- **What it costs** (`python -m benchmarks.flower_dp`, 2 IU nodes, {base['rounds']} "
        f"rounds of the paper's settings, clip {noisy[0]['clip']:g}, deployment engine): macro "
        f"AUROC (node-mean: each node's own held-out rows, averaged weighted by rows) "
        f"{base['macro-auroc']:.3f} without DP, {said}."
    )


def vision_steps() -> str:
    """Seconds of a training step of each image model on the CPU (docs/vision.md)."""
    rows = json.loads((RESULTS / "vision_steps.json").read_text())
    names = {"densenet121": "DenseNet121", "vit": "ViT-B/16"}
    said = ", ".join(
        f"{r['s_per_step']:.2f} s ({names[r['arch']]}, {r['image_size']} x {r['image_size']})"
        for r in rows
        if r["device"] == "cpu"
    )
    return (
        "- GPU when present (bf16 autocast, channels-last, pinned memory), CPU otherwise. On 2 "
        f"CPU cores a train step on a batch of {rows[0]['batch']} takes {said} "
        "(`python benchmarks/vision_steps.py`)."
    )


def mimic_style() -> str:
    """The default model on the MIMIC-style suite: cells right, F1 by state, per family."""
    found = _load("mimic_style")
    f1 = found["f1"]
    lines = [
        f"Measured on {_machine(found)} (`python benchmarks/mimic_style.py`): "
        f"{found['accuracy']:.2%} of {found['cells']:,} cells right ({found['wrong']} wrong) on "
        f"{found['reports']} reports; F1 of state 1 {f1['1']:.3f}, 0 {f1['0']:.3f}, -1 "
        f"{f1['-1']:.3f}, blank {f1['blank']:.3f}.",
        "",
        "| family | cells right |",
        "| --- | ---: |",
    ]
    lines += [f"| {k} | {v:.3f} |" for k, v in found["families"].items()]
    return "\n".join(lines)


def mimic_corpus() -> str:
    """``reportfed corpus mimic`` on generated MIMIC-CXR-sized trees: time and peak memory."""
    found = _load("mimic_corpus")
    lines = [
        f"Measured on {_machine(found)} (`python -m benchmarks.mimic_corpus`, generated trees):",
        "",
        "| reports | wall | reports/s | peak RSS | table written |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {r['studies']:,} | {r['wall_s']:.1f} s | {r['reports_per_s']:,.0f} | "
        f"{r['peak_rss_mb']:.0f} MB | {r['output_mb']:.1f} MB |"
        for r in found["rows"]
    ]
    return "\n".join(lines)


#: the engines of the comparison, by their results file: (column title, file)
ENGINES = (
    ("reportfed's rules before round five", "yardsticks_before"),
    ("ConText on that lexicon", "yardsticks_context"),
    ("reportfed's rules, kept", "yardsticks_rules"),
    ("ConText on the kept lexicon", "yardsticks_context_after"),
)


def engines() -> str:
    """Every yardstick of the text rules (``benchmarks/yardsticks.py``), per engine: the OpenI gold
    standard's macro F1 of state 1 and the suites' cells right, all and by half."""
    found = {title: _load(name) for title, name in ENGINES}
    lines = [
        "| yardstick | part | " + " | ".join(found) + " |",
        "| --- | --- |" + " ---: |" * len(found),
    ]
    rows = [("OpenI gold, macro F1 of state 1", "openi", "macro F1 (state 1)")]
    rows += [(f"{s.replace('_', '-')} suite, cells right", s, "accuracy")
             for s in ("behaviour", "layouts", "mimic_style")]  # fmt: skip
    for title, key, field in rows:
        for part in ("all", "A", "B"):
            cells = [r[key][part][field] for r in found.values()]
            best = max(cells)
            shown = [f"**{v:.3f}**" if v == best else f"{v:.3f}" for v in cells]
            lines.append(f"| {title} | {part} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


def openi_gold() -> str:
    """Per mapped finding, state 1 (1 or -1, 1 or a likely hedge) against NegBio's OpenI gold
    standard's 1."""
    from benchmarks.openi_gold import FEW

    found = _load("openi_gold")
    lines = [
        f"Measured on {_machine(found)} (`python benchmarks/openi_gold.py`), {found['reports']:,} "
        f"IU reports (half A {found['halves']['A']:,}, half B {found['halves']['B']:,}):",
        "",
        "| finding | gold positives | rules: precision | recall | F1 of 1 | F1 of 1 or -1 | "
        "F1 of 1 or a likely hedge | default model: F1 of 1 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    rules, model = found["rules"]["all"], found["model"]["all"]
    for label, r in rules["labels"].items():
        few = " (few)" if r["positives"] < FEW else ""
        lines.append(
            f"| {label} | {r['positives']}{few} | {r['state 1']['precision']:.3f} | "
            f"{r['state 1']['recall']:.3f} | {r['state 1']['f1']:.3f} | "
            f"{r['1 or -1']['f1']:.3f} | {r['1 or a likely hedge']['f1']:.3f} | "
            f"{model['labels'][label]['state 1']['f1']:.3f} |"
        )
    lines.append(
        f"| **macro** | | | | **{rules['macro F1 (state 1)']:.3f}** | "
        f"{rules['macro F1 (1 or -1)']:.3f} | {rules['macro F1 (1 or a likely hedge)']:.3f} | "
        f"**{model['macro F1 (state 1)']:.3f}** |"
    )
    halves = "; ".join(
        f"half {h}: rules {found['rules'][h]['macro F1 (state 1)']:.3f} "
        f"({found['rules'][h]['macro F1 (1 or a likely hedge)']:.3f} with likely hedges), "
        f"default model {found['model'][h]['macro F1 (state 1)']:.3f}, its probabilities' Brier "
        f"score {found['model'][h]['brier']:.4f}"
        for h in ("A", "B")
    )
    return (
        "\n".join(lines)
        + f"\n\nMacro F1 of state 1 by half ({halves}); (few): under {FEW} gold positives, a figure "
        "that moves with a handful of reports."
    )


def calibration_coefficients() -> str:
    """What the default model's calibration makes of each mention flag, in log-odds."""
    coef = _load("openi_gold")["model"]["coefficients"]
    return (
        f"In the default model a negation moves the log-odds by {coef['negated']:+.2f}, an "
        f"affirmation by {coef['affirmed']:+.2f}, a hedge by {coef['uncertain']:+.2f} and a "
        f"hedge that leans to present by {coef['uncertain'] + coef['likely']:+.2f} "
        f"(`benchmarks/results/openi_gold.json`)."
    )


def calibration_iu() -> str:
    """The model's scores and the calibrated probabilities on IU's test rows
    (``benchmarks/labels_iu.py``): AUROC, Brier score and ECE, mean ± SD over the seeds."""
    found = _load("labels_iu")["mean_sd"]
    lines = ["| | AUROC | Brier score | ECE (10 bins) |", "| --- | ---: | ---: | ---: |"]
    for title, suffix in (("model score", "_model"), ("calibrated with the mentions", "")):
        (auroc, a), (brier, b), (ece, e) = (
            found[f"{m}{suffix}"] for m in ("auroc", "brier", "ece")
        )
        lines.append(
            f"| {title} | {auroc:.3f} ± {a:.3f} | {brier:.4f} ± {b:.4f} | {ece:.4f} ± {e:.4f} |"
        )
    return "\n".join(lines)


def warm_labelling() -> str:
    """Round five's speed: warm labelling of the MIMIC-style suite against the checkout before
    it, and the same measured from this session's starting checkout."""
    lines = [
        "| this checkout | against | repeats | copies, median s (this / before) | "
        "new to the rules, median s (this / before) |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for name, this in (("warm_labelling", "now"), ("warm_labelling_b165c93", "b165c93")):
        found = _load(name)
        med = found["median_s"]
        lines.append(
            f"| {this} | {found['before']} | {len(found['seconds']['repeated']['this'])} | "
            + " | ".join(
                f"{med[m]['this']:.3f} / {med[m]['before']:.3f} "
                f"({med[m]['this'] / med[m]['before'] - 1:+.0%})"
                for m in ("repeated", "distinct")
            )
            + " |"
        )
    return "\n".join(lines)


def openi_sort() -> str:
    """Every cell where the rules' state 1 and the OpenI gold's 1 disagree, by how the state
    came about, per finding and half."""
    from benchmarks.openi_gold import WHY

    found = _load("openi_gold")["rules"]
    labels = list(found["all"]["disagreements"])
    lines = [
        "| how the state came about | " + " | ".join(labels) + " | all | half A | half B |",
        "| --- |" + " ---: |" * (len(labels) + 3),
    ]
    for why, said in WHY.items():
        counts = [found["all"]["disagreements"][label][why] for label in labels]
        if not sum(counts):
            continue
        halves = [sum(found[h]["disagreements"][label][why] for label in labels) for h in "AB"]
        lines.append(
            f"| {said} | "
            + " | ".join(map(str, counts))
            + f" | **{sum(counts)}** | "
            + " | ".join(map(str, halves))
            + " |"
        )
    return "\n".join(lines)


_YARDSTICKS = {
    "openi": "OpenI gold, half B",
    "mesh": "IU MeSH labels, half B",
    "behaviour": "behaviour suite",
    "layouts": "layouts suite",
    "mimic_style": "MIMIC-style suite",
}


def _source_total(one: dict, source: str) -> tuple[int, int]:  # type: ignore[type-arg]
    """(right, cells) a decision source has over every finding of one yardstick's result."""
    found = one["findings"].values()
    return sum(f[source]["right"] for f in found), sum(f[source]["cells"] for f in found)


def decision_summary() -> str:
    """The README's sentence on what decides the labels a user receives and what federating
    changes in them (:func:`decision_sources`)."""
    arms = _load("decision_sources")["arms"]
    openi, mesh = arms["default"]["yardsticks"]["openi"], arms["default"]["yardsticks"]["mesh"]

    def cells(one: dict, source: str) -> int:  # type: ignore[type-arg]
        return _source_total(one, source)[1]

    stated = cells(openi, "text") + cells(openi, "model")
    one, ten = (arms[k]["yardsticks"] for k in ("K=1", "K=10"))
    f1 = {
        k: (one[k]["macro F1 (state 1)"]["shipped"], ten[k]["macro F1 (state 1)"]["shipped"])
        for k in ("openi", "mesh")
    }
    return (
        f"On IU reports no rule was tuned to, the text rules decide {cells(openi, 'text'):,} of "
        f"the {stated:,} finding cells the default model gives a state against NegBio's expert "
        f"labels (the model alone {cells(openi, 'model')}; {cells(mesh, 'model')} of "
        f"{cells(mesh, 'text') + cells(mesh, 'model'):,} against IU's MeSH labels), so training "
        f"by 10 sites, each with its own labels, instead of one changes "
        f"{ten['openi']['cells differing from K=1']} and {ten['mesh']['cells differing from K=1']} "
        f"cells and macro F1 of state 1 goes {f1['openi'][0]:.3f} → {f1['openi'][1]:.3f} and "
        f"{f1['mesh'][0]:.3f} → {f1['mesh'][1]:.3f}: what the federation adds today is the "
        "probabilities, findings no rule reads (a hospital's own) and the few calls no phrase "
        "covers ([what decides a label](docs/labels.md#what-decides-a-label))."
    )


def _share(right: int, cells: int) -> str:
    return f"{cells:,} ({right / cells:.1%})" if cells else "0"


def decision_sources() -> str:
    """Per yardstick, the cells the text, a correction and the model decide for the default
    model and each right, then per finding on the real reports."""
    from benchmarks.openi_gold import FEW

    found = _load("decision_sources")
    arms = found["arms"]
    lines = [
        f"Measured on {_machine(found)} (`python benchmarks/decision_sources.py`). Cells decided "
        "by each source, and the share of them right, for the default model:",
        "",
        "| yardstick | reports | text | model alone | blank |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    default = arms["default"]["yardsticks"]
    for name, title in _YARDSTICKS.items():
        one = default[name]
        total = {key: _source_total(one, key) for key in ("text", "model", "blank")}
        lines.append(
            f"| {title} | {one['reports']:,} | {_share(*total['text'])} | "
            f"{_share(*total['model'])} | {_share(*total['blank'])} |"
        )
    for name in ("openi", "mesh"):
        lines += [
            "",
            f"Per finding, {_YARDSTICKS[name]} (default model; model cells are all state 1):",
            "",
            "| finding | positives | text | model alone | blank |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for finding, f in default[name]["findings"].items():
            few = " (few)" if f["positives"] < FEW else ""
            lines.append(
                f"| {finding} | {f['positives']}{few} | "
                + " | ".join(
                    _share(f[k]["right"], f[k]["cells"]) for k in ("text", "model", "blank")
                )
                + " |"
            )
    lines += [
        "",
        "The ablation: macro F1 of state 1, by labeler (`K=n`: trained on IU's half A over n "
        "sites; the default model has read IU's text, so its IU rows are not unseen), and the "
        "cells of the shipped labels that differ from `K=1`'s:",
        "",
        "| yardstick | labeler | rules alone | model alone | shipped | model-alone cells (right) "
        "| cells differing from K=1 |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, title in _YARDSTICKS.items():
        for arm, result in arms.items():
            one = result["yardsticks"][name]
            f1 = one["macro F1 (state 1)"]
            model = _source_total(one, "model")
            lines.append(
                f"| {title} | {arm} | {f1['rules alone']:.3f} | {f1['model alone']:.3f} | "
                f"{f1['shipped']:.3f} | {_share(*model)} | {one.get('cells differing from K=1', '')} |"
            )
    return "\n".join(lines)


EXPERIMENT_RESULTS = ROOT / "experiments" / "results"
#: each experiment's result tag, in the order docs/experiments.md lists them, and its row's title
EXPERIMENTS = {
    "paper": "paper: central, K=2 and K=10 next to the paper",
    "nodes": "node sweep K = 2..10",
    "shared": "shared labels 0..13",
    "noniid": "non-IID sites",
    "noniid-mimic": "IU + MIMIC-CXR (`noniid --mimic-root`)",
    "embeddings": "embedders",
    "vocab": "vocabularies",
    "psi": "label heterogeneity ψ",
    "size": "training-set size",
    "beyond": "beyond the paper",
    "sentence": "sentence level",
    "consortium": "leak-free F1 of a consortium",
    "styles": "sites that write differently",
    "gap": "ten sites against central",
}


def _owner(stem: str) -> str | None:
    """The experiment a result file's stem belongs to: the longest tag it starts with."""
    tags = [*EXPERIMENTS, *(f"{t}-quick" for t in EXPERIMENTS)]
    mine = [t for t in tags if stem == t or stem.startswith(f"{t}-")]
    return max(mine, key=len, default=None)


def experiment_index(results: Path = EXPERIMENT_RESULTS) -> str:
    """A row per experiment whose table is in ``results`` (a ``--quick`` run's too), with its
    plots: a rerun that adds one, as ``noniid --mimic-root`` does, shows here once rendered."""
    link = "../experiments/results" if results == EXPERIMENT_RESULTS else results.as_posix()
    lines = ["| experiment | tables | plots |", "| --- | --- | --- |"]
    for tag, title in EXPERIMENTS.items():
        for name, shown in ((tag, title), (f"{tag}-quick", f"{title}, `--quick`")):
            if not (results / f"{name}.md").is_file():
                continue
            plots = [p.name for p in sorted(results.glob("*.png")) if _owner(p.stem) == name]
            cells = [
                f"[{name}.md]({link}/{name}.md)",
                ", ".join(f"[{p}]({link}/{p})" for p in plots),
            ]
            lines.append(f"| {shown} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def language_id() -> str:
    """Per language identifier: English sentences it calls another language, other languages'
    sentences it misses, and its speed."""
    found = _load("language_id")
    lines = [
        f"Measured on {_machine(found)}:",
        "",
        "| identifier | IU sentences called not English | suites' | telegraphic English | "
        "other languages' missed | s per 1,000 IU reports |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in found["rows"]:
        languages = [k.split(":")[0] for k in row if k.endswith(": missed")]
        missed = sum(len(row[f"{lang}: missed"]) for lang in languages)
        total = sum(row[f"{lang}: sentences"] for lang in languages)
        lines.append(
            f"| {row['identifier']} | {row['IU: English called another language']} of "
            f"{row['IU: sentences']:,} | {row['suites: English called another language']} of "
            f"{row['suites: sentences']} | {len(row['telegraphic: called another language'])} of "
            f"{row['telegraphic: sentences']} | {missed} of {total} | "
            f"{row['seconds per 1,000 reports']:.2f} |"
        )
    return "\n".join(lines)


def openi_disagreements() -> str:
    """Each cell where the rules' state 1 and the gold's 1 disagree, sorted by why."""
    found = _load("openi_disagreements")
    lines = ["| finding | why | cells |", "| --- | --- | ---: |"]
    for label, sort in found.items():
        for why, n in sorted(sort["classes"].items(), key=lambda kv: -kv[1]):
            lines.append(f"| {label} ({sort['disagreements']}) | {why} | {n} |")
    return "\n".join(lines)


def openi_reach() -> str:
    """How far mending the rules could take macro F1 of state 1 on the OpenI gold while the
    CheXpert labeler's conventions stand: in the findings read by hand, every cell sorted as
    reportfed's error mended; in the others, every disagreement but a hedge's, whatever its
    cause (an upper bound: it counts the gold's errors and de-identified words as mendable)."""
    from benchmarks.openi_gold import _prf

    gold = _load("openi_gold")["rules"]["all"]
    by_hand = _load("openi_disagreements")
    reach = {}
    for label, r in gold["labels"].items():
        tp, fp, fn = (r["state 1"][k] for k in ("tp", "fp", "fn"))
        if label in by_hand:
            own = sum(
                n for why, n in by_hand[label]["classes"].items() if why.startswith("reportfed's")
            )
            # each mended cell a missed positive found or a false one removed, the better split
            reach[label] = max(
                _prf(tp + k, max(fp - own + k, 0), max(fn - k, 0))["f1"] for k in range(own + 1)
            )
        else:
            sort = gold["disagreements"][label]
            found = sort["negated"] + sort["unmentioned"]
            removed = sort["deidentified"] + sort["affirmed"] + sort["model"]
            reach[label] = _prf(tp + found, fp - removed, fn - found)["f1"]
    macro = sum(reach.values()) / len(reach)
    *first, last = by_hand
    return (
        "Mending every disagreement that is not the CheXpert labeler's convention would take "
        f"macro F1 of state 1 from {gold['macro F1 (state 1)']:.3f} to at most {macro:.3f}: in "
        f"{', '.join(first)} and {last}, every cell sorted above as reportfed's error; in the "
        f"other {len(reach) - len(by_hand)} findings, every disagreement but a hedge's, whatever "
        "its cause (an upper bound: it counts the gold's errors and de-identified words as "
        "mendable). Above that, the hedges and the phrase lists decide: reading the hedges that "
        "lean to present as 1, the gold's convention, gives "
        f"{gold['macro F1 (1 or a likely hedge)']:.3f} today."
    )


def consortium() -> str:
    """The consortium experiment's arms per setting: F1 with each way of choosing thresholds,
    the ceiling, AUROC, paper accuracy, and the paired tests
    (``experiments/results/consortium.csv``)."""
    from experiments.beyond import BASE, DEFAULTS, FEDPROX, consortium_arms

    runs = _experiment("consortium.csv")
    names = {
        "sentence": "the paper's settings",
        BASE: "5 epochs + distill + balance + templates",
        FEDPROX: "+ FedProx 0.01",
        f"{BASE}+momentum=0.9": "+ server momentum 0.9",
        DEFAULTS: "+ FedProx + reading (**the defaults**)",
        "central-sentence": "central",
    }
    metrics = (
        "leakfree_f1", "all_rows_f1", "matched_all_f1", "f1_ceiling", "auroc", "paper_accuracy"
    )  # fmt: skip
    lines = [
        "From `experiments/results/consortium.csv` (`python -m experiments consortium`; percent, "
        "mean over the seeds; F1 with thresholds best on the annotated validation rows, best on "
        "every annotated row (training rows too: the product's thresholds where no site "
        "reads), and matching each label's prevalence over all rows; p: paired t-test against "
        "5 epochs + distill + balance + templates on the same seeds, and of the other "
        "thresholds against the validation ones on the same models):",
        "",
        "| K | method | n | F1, validation thresholds | F1, all-rows thresholds "
        "| F1, matched thresholds | F1 ceiling | macro AUROC | paper accuracy | p (F1) "
        "| p (AUROC) | p (paper accuracy) | p (all rows vs validation) "
        "| p (matched vs validation) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |",
    ]
    for setting in sorted(runs["setting"].unique(), key=lambda s: -int(s.removeprefix("K="))):
        arms = consortium_arms(runs, setting)
        for method, name in names.items():
            if method not in arms:
                continue
            arm = arms[method]
            tests = [
                arm.p[m]
                for m in ("leakfree_f1", "auroc", "paper_accuracy", "all_rows_f1", "matched_all_f1")
            ]
            cells = " | ".join(
                "" if math.isnan(arm.mean[m]) else f"{arm.mean[m]:.2f}" for m in metrics
            )
            said = " | ".join("" if p is None else f"{p:.2g}" for p in tests)
            lines.append(f"| {setting[2:]} | {name} | {arm.n} | {cells} | {said} |")
    return "\n".join(lines)


def reading() -> str:
    """Reading against FedProx, the defaults before it, paired on the same seeds at every K of
    the consortium experiment (``experiments/results/consortium.csv``)."""
    from experiments.beyond import DEFAULTS, FEDPROX
    from experiments.runner import paired_p

    runs = _experiment("consortium.csv")
    metrics = {"all_rows_f1": "F1, all-rows thresholds", "auroc": "macro AUROC",
               "leakfree_f1": "F1, validation thresholds"}  # fmt: skip
    lines = [
        "From `experiments/results/consortium.csv`: + FedProx 0.01 -> + FedProx + reading, "
        "percent, mean over the seeds both ran, paired t-test p:",
        "",
        "| K | n | " + " | ".join(metrics.values()) + " |",
        "| --- | ---: |" + " ---: |" * len(metrics),
    ]
    for setting in sorted(runs["setting"].unique(), key=lambda s: -int(s.removeprefix("K="))):
        here = runs[runs["setting"] == setting]
        before = here[here["method"] == FEDPROX].set_index("seed")
        after = here[here["method"] == DEFAULTS].set_index("seed")
        seeds = before.index.intersection(after.index)
        if not len(seeds):
            continue
        cells = [
            f"{100 * before.loc[seeds, m].mean():.2f} -> {100 * after.loc[seeds, m].mean():.2f} "
            f"(p {paired_p(after.loc[seeds, m], before.loc[seeds, m]):.2g})"
            for m in metrics
        ]
        lines.append(f"| {setting[2:]} | {len(seeds)} | {' | '.join(cells)} |")
    return "\n".join(lines)


def threshold_rules() -> str:
    """The defaults' F1 with each way of choosing thresholds at every K of the consortium
    experiment, the sites reading the labels they lack (``experiments/results/consortium.csv``)."""
    from experiments.beyond import DEFAULTS, threshold_rules_table

    runs = _experiment("consortium.csv")
    sites = runs["setting"].str.removeprefix("K=").astype(int)
    runs = runs.iloc[(-sites).argsort(kind="stable")]
    return (
        "From `experiments/results/consortium.csv`. "
        + threshold_rules_table(runs, DEFAULTS).rstrip()
    )


def gap_labels() -> str:
    """Per label at K=10: central, the defaults and the defaults without reading (the
    consortium experiment's runs, F1 at each site's reading thresholds), beside how the text
    rules' reading agrees with IU's MeSH labels (``benchmarks/results/reading_mesh.json``)."""
    from benchmarks.openi_gold import _prf
    from experiments.beyond import DEFAULTS, FEDPROX
    from reportfed.core.metrics import FEW_POSITIVES
    from reportfed.data.partition import TEST_FRACTION

    labels = _experiment("consortium-labels.csv.gz")
    arms = {"central-sentence": "central", DEFAULTS: "the defaults", FEDPROX: "without reading"}
    here = labels[(labels["setting"] == "K=10") & labels["method"].isin(arms)]
    f1 = 100 * here.pivot_table(index="label", columns="method", values="read_mean_f1")[list(arms)]
    seeds = here.groupby("method")["seed"].nunique()
    gap = f1["central-sentence"] - f1[DEFAULTS]
    found = _load("reading_mesh")
    lines = [
        f"From `experiments/results/consortium-labels.csv.gz` (K=10, {seeds.min()} seeds; F1 at "
        "each site's best thresholds on its rows read, averaged by positives, percent, mean over "
        "the seeds) and `benchmarks/results/reading_mesh.json` (`python "
        f"benchmarks/reading_mesh.py`: the rules' reading of the {found['reports']:,} IU "
        "reports against their MeSH labels; F1 on the reports the rules do not leave hedged), "
        "by the defaults' gap to central; (few): under "
        f"{FEW_POSITIVES / TEST_FRACTION:.0f} IU positives, so under {FEW_POSITIVES} in a seed's "
        "test rows:",
        "",
        "| label | IU positives | read positive | MeSH positives read negative | reading's F1 "
        "| " + " | ".join(arms.values()) + " | gap |",
        "| --- | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in arms) + " | ---: |",
    ]
    for label in gap.sort_values(ascending=False).index:
        r = found["findings"][label]
        read_f1 = _prf(r["true_positive"], r["false_positive"], r["missed"])["f1"]
        few = " (few)" if r["positives"] * TEST_FRACTION < FEW_POSITIVES else ""
        cells = " | ".join(f"{v:.1f}" for v in f1.loc[label])
        lines.append(
            f"| {label} | {r['positives']}{few} | {r['read_positive']} | {r['missed']} | "
            f"{read_f1:.3f} | {cells} | {gap[label]:.1f} |"
        )
    macro = " | ".join(f"**{v:.2f}**" for v in f1.mean())
    lines.append(f"| **macro** | | | | | {macro} | **{gap.mean():.2f}** |")
    return "\n".join(lines)


def _experiment(name: str) -> pd.DataFrame:
    """An experiment's stored results (``experiments/results/NAME``)."""
    import pandas as pd

    return pd.read_csv(ROOT / "experiments" / "results" / name)


def _by_seed(runs: pd.DataFrame, setting: str, method: str) -> pd.DataFrame:
    """One arm's runs of one setting, indexed by seed."""
    return runs[(runs["setting"] == setting) & (runs["method"] == method)].set_index("seed")


def defaults_sweep() -> str:
    """The candidates for the product's defaults over the K sweep at sentence level, paired
    with the paper's settings and with the same combination without templates."""
    from experiments.beyond import BEST, LIGHT, TEMPLATED
    from experiments.runner import paired_p

    runs = _experiment("beyond.csv")
    arms = {
        "sentence": "paper's settings",
        f"sentence+{LIGHT}": "5 epochs + distill + balance",
        f"sentence+{BEST}": "20 epochs + distill + balance",
        f"sentence+{TEMPLATED}": "+ templates",
    }
    lines = [
        "From `experiments/results/beyond.csv` (`python -m experiments beyond`; sentence level, "
        "no shared label, 20 seeds; macro AUROC / paper accuracy / leak-free F1, percent, mean "
        "over the seeds; p: paired t-test of the AUROC on the same seeds):",
        "",
        "| K | " + " | ".join(arms.values()) + " | p, + templates vs paper's "
        "| p, + templates vs without |",
        "| --- | " + " | ".join("---:" for _ in arms) + " | ---: | ---: |",
    ]
    for k in (2, 4, 6, 8, 10):
        setting = f"K={k}"
        subs = {m: _by_seed(runs, setting, m) for m in arms}
        cells = [
            " / ".join(
                f"{100 * sub[m].mean():.2f}" for m in ("auroc", "paper_accuracy", "leakfree_f1")
            )
            for sub in subs.values()
        ]
        templated = subs[f"sentence+{TEMPLATED}"]["auroc"]
        tests = [paired_p(templated, subs[m]["auroc"]) for m in ("sentence", f"sentence+{LIGHT}")]
        said = " | ".join("" if p is None else _p(p) for p in tests)
        lines.append(f"| {k} | {' | '.join(cells)} | {said} |")
    central = _by_seed(runs, "K=10", "central-sentence")
    lines += [
        "",
        "Central at sentence level (every report in one place, same splits): "
        + " / ".join(
            f"{100 * central[m].mean():.2f}" for m in ("auroc", "paper_accuracy", "leakfree_f1")
        )
        + ".",
    ]
    return "\n".join(lines)


def options_alone() -> str:
    """Each option of the beyond experiment alone and in combination at K=10 and K=2, at both
    granularities, paired with the paper's settings at the same granularity."""
    from experiments.beyond import VARIANTS
    from experiments.runner import paired_p

    runs = _experiment("beyond.csv")
    columns = [(k, g) for k in (10, 2) for g in ("sentence", "whole report")]
    lines = [
        "From `experiments/results/beyond.csv` (20 seeds; macro AUROC / paper accuracy, percent, "
        "mean over the seeds; in brackets the paired p of the AUROC against the paper's settings "
        "at the same granularity, the first row):",
        "",
        "| option | " + " | ".join(f"K={k}, {g}" for k, g in columns) + " |",
        "| --- | " + " | ".join("---:" for _ in columns) + " |",
    ]
    for option in ("", *VARIANTS):
        cells = []
        for k, granularity in columns:
            paper = "sentence" if granularity == "sentence" else "surgical"
            if not option:
                method = paper
            elif paper == "sentence":
                method = f"sentence+{option}"
            else:
                method = option  # whole-report arms are named by their options alone
            sub, ref = _by_seed(runs, f"K={k}", method), _by_seed(runs, f"K={k}", paper)
            cell = f"{100 * sub['auroc'].mean():.2f} / {100 * sub['paper_accuracy'].mean():.2f}"
            p = paired_p(sub["auroc"], ref["auroc"]) if option else None
            cells.append(cell + (f" ({_p(p)})" if p is not None else ""))
        name = f"`{option}`" if option else "none (the paper's settings)"
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines)


def rare_labels() -> str:
    """Per-label AUROC at K=10, sentence level: the paper's settings, the defaults' combination
    without and with templates, and central."""
    from experiments.beyond import LIGHT, TEMPLATED

    labels = _experiment("beyond-labels.csv.gz")
    arms = {
        "sentence": "paper's settings",
        f"sentence+{LIGHT}": "without templates",
        f"sentence+{TEMPLATED}": "with templates",
        "central-sentence": "central",
    }
    here = labels[labels["setting"] == "K=10"]
    table = here[here["method"].isin(arms)].pivot_table(
        index="label", columns="method", values="auroc", aggfunc="mean"
    )[list(arms)]
    lines = [
        "From `experiments/results/beyond-labels.csv.gz` (K=10, sentence level, no shared "
        "label, 20 seeds; AUROC, mean over the seeds):",
        "",
        "| label | " + " | ".join(arms.values()) + " |",
        "| --- | " + " | ".join("---:" for _ in arms) + " |",
    ]
    for label, row in table.iterrows():
        lines.append(f"| {label} | " + " | ".join(f"{v:.3f}" for v in row) + " |")
    macro = " | ".join(f"**{v:.3f}**" for v in table.mean())
    lines.append(f"| **macro** | {macro} |")
    return "\n".join(lines)


def styles() -> str:
    """The styles experiment's table: each setting on the test rows written in each style."""
    from experiments.beyond import DEFAULTS
    from experiments.styles import styles_table

    return (
        "From `experiments/results/styles.csv` (`python -m experiments styles`). "
        + styles_table(_experiment("styles.csv"), DEFAULTS).rstrip()
    )


def gap() -> str:
    """Ten sites against central: the gap experiment's table (``experiments/results/gap.csv``)."""
    from experiments.beyond import gap_table

    return (
        "From `experiments/results/gap.csv` (`python -m experiments gap`, 20 seeds, on today's "
        "labels). " + gap_table(_experiment("gap.csv"), "K=10").rstrip()
    )


def environment() -> str:
    """reportfed's environment variables, as ``reportfed.core.environment`` declares them."""
    from reportfed.core.environment import VARIABLES

    lines = ["| variable | read by | what it sets | default |", "| --- | --- | --- | --- |"]
    lines += [f"| `{v.name}` | {v.reader} | {v.help} | {v.default} |" for v in VARIABLES]
    return "\n".join(lines)


RENDERERS: dict[str, Callable[[], str]] = {
    "environment": environment,
    "consortium": consortium,
    "experiment_index": experiment_index,
    "reading": reading,
    "defaults_sweep": defaults_sweep,
    "options_alone": options_alone,
    "rare_labels": rare_labels,
    "styles": styles,
    "gap": gap,
    "engines": engines,
    "openi_gold": openi_gold,
    "openi_sort": openi_sort,
    "calibration_coefficients": calibration_coefficients,
    "calibration_iu": calibration_iu,
    "warm_labelling": warm_labelling,
    "decision_sources": decision_sources,
    "decision_summary": decision_summary,
    "openi_disagreements": openi_disagreements,
    "language_id": language_id,
    "mimic_style": mimic_style,
    "evidence": evidence,
    "defined_findings": defined_findings,
    "review_page": review_page,
    "flower_dp": flower_dp,
    "vision_steps": vision_steps,
    "mimic_corpus": mimic_corpus,
    "cold_label": functools.partial(cold_label, "cold_label"),
    "cold_label_avx2": functools.partial(cold_label, "cold_label_avx2"),
    "granularity": granularity,
    "labels_iu": labels_iu,
    "node_sweep": functools.partial(node_sweep, "node_sweep"),
    "node_sweep_sentence": functools.partial(node_sweep, "node_sweep_sentence"),
    "contention": contention,
    "flower_engines": flower_engines,
    "flower_round": flower_round,
    "many_reports": many_reports,
    "long_report": long_report,
    "openi_reach": openi_reach,
    "threshold_rules": threshold_rules,
    "gap_labels": gap_labels,
    "embedding_backends": functools.partial(embedding_backends, "embedding_backends"),
    "embedding_backends_avx2": functools.partial(embedding_backends, "embedding_backends_avx2"),
}


def render(text: str) -> str:
    """``text`` with every rendered block made anew from the results."""
    return _BLOCK.sub(lambda m: f"{m.group(1)}{RENDERERS[m.group(2)]()}\n{m.group(3)}", text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 where a table is stale")
    args = parser.parse_args()
    stale = []
    for page in PAGES:
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
