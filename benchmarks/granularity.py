"""Sentence-level vs whole-report embeddings, in one invocation:

1. **Quality** on IU (13 findings, 3,832 fully annotated reports, the papers' protocol: 80/20
   split, 20 rounds x 1 local epoch, 0 shared labels), central, K=2 and K=10, the same seeds and
   splits for both inputs: macro AUROC, leak-free F1 (thresholds chosen for F1 on the sites'
   validation rows) and the paper's accuracy, with paired t-tests.
2. **Labelling throughput** (reports/s of :meth:`ReportLabeler.predict_states`, embedding
   included) with a cold embedding cache and a warm one.

Writes ``benchmarks/results/granularity.json``.

    python benchmarks/granularity.py [--repeats 20] [--nodes 1 2 10] [--throughput-reports 1000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from scipy import stats
from tqdm.auto import tqdm

from experiments.protocol import Protocol, simulate
from reportfed.core.config import GRANULARITIES
from reportfed.core.files import atomic_write
from reportfed.core.labels import CHEXPERT_13
from reportfed.core.paths import embeddings_cache_dir
from reportfed.data.iu import load_iu
from reportfed.embed import make_embedder
from reportfed.embed.granularity import embed_reports
from reportfed.labeler import ReportLabeler

RESULTS = Path(__file__).resolve().parent / "results" / "granularity.json"
METRICS = ("auroc", "leakfree_f1", "paper_accuracy")


def quality(repeats: int, nodes: list[int]) -> dict[str, dict[str, object]]:
    """Per setting: each granularity's metrics per seed, their means and paired p-values."""
    table = load_iu().select_labels(list(CHEXPERT_13)).fully_annotated()
    embedder = make_embedder("minilm")
    x = {
        g: embed_reports(table.texts, embedder, granularity=g, cache_dir=embeddings_cache_dir())
        for g in GRANULARITIES
    }
    out: dict[str, dict[str, object]] = {}
    runs = [(k, g, seed) for k in nodes for g in GRANULARITIES for seed in range(repeats)]
    per_run: dict[tuple[int, str], list[dict[str, float]]] = {}
    for k, g, seed in tqdm(runs, desc="runs"):
        result = simulate(x[g], table.labels, table.label_space, Protocol(n_nodes=k), seed)
        per_run.setdefault((k, g), []).append(result.metrics)
    for k in nodes:
        setting = "central" if k == 1 else f"K={k}"
        entry: dict[str, object] = {}
        for metric in METRICS:
            values = {g: np.array([m[metric] for m in per_run[(k, g)]]) for g in GRANULARITIES}
            entry[metric] = {
                **{
                    g: {"mean": float(v.mean()), "sd": float(v.std(ddof=1))}
                    for g, v in values.items()
                },
                "sentence_minus_report": float((values["sentence"] - values["report"]).mean()),
                "paired_p": float(stats.ttest_rel(values["sentence"], values["report"]).pvalue),
                "per_seed": {g: [round(float(a), 5) for a in v] for g, v in values.items()},
            }
        out[setting] = entry
    return out


def throughput(n_reports: int) -> dict[str, dict[str, float]]:
    """Reports per second of labelling (embedding + scoring + states), cold and warm cache."""
    table = load_iu().select_labels(list(CHEXPERT_13)).fully_annotated()
    train, texts = table.subset(np.arange(1000)), table.texts[-n_reports:]
    out: dict[str, dict[str, float]] = {}
    for g in GRANULARITIES:
        labeler = ReportLabeler(granularity=g, progress=False).fit(
            train.texts, train.labels, list(train.label_space)
        )
        with tempfile.TemporaryDirectory() as cache:
            labeler.cache_dir = cache
            labeler._embedder().embed(["warm-up"])  # load the weights outside the timing
            times = {}
            for run in ("cold", "warm"):
                start = time.perf_counter()
                labeler.predict_states(texts)
                times[run] = time.perf_counter() - start
        out[g] = {f"{run}_reports_per_s": n_reports / s for run, s in times.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 10])
    parser.add_argument("--throughput-reports", type=int, default=1000)
    args = parser.parse_args()
    torch.set_num_threads(2)
    result = {
        "machine": "2 CPU cores",
        "throughput": throughput(args.throughput_reports),
        "quality": quality(args.repeats, args.nodes),
        "repeats": args.repeats,
    }
    for g, t in result["throughput"].items():  # type: ignore[union-attr]
        print(
            f"{g:9s} labelling: cold {t['cold_reports_per_s']:.1f} reports/s, "
            f"warm {t['warm_reports_per_s']:.1f} reports/s"
        )
    for setting, entry in result["quality"].items():  # type: ignore[union-attr]
        for metric in METRICS:
            e = entry[metric]
            print(
                f"{setting:8s} {metric:15s} report {e['report']['mean']:.4f} "
                f"sentence {e['sentence']['mean']:.4f}  diff {e['sentence_minus_report']:+.4f} "
                f"p={e['paired_p']:.2g}"
            )
    atomic_write(RESULTS, json.dumps(result, indent=1).encode())
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
