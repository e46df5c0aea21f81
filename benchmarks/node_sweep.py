"""The full node sweep (K = 2..10 sites x 20 repeats x 20 rounds, IU, 0 shared labels) trained by
the lockstep engine in float32 and in bfloat16, and by the per-node loop, on the same runs, in
one invocation, against this machine's matrix-product peak measured in the same invocation.

Prints and writes, per path: wall time, training throughput (node-rows per second), achieved
GFLOP/s (forward and backward matrix products of the sweep) and its fraction of the float32 and
bfloat16 peaks. Quality: test-set macro AUROC per run, and the paired difference of each path
from lockstep float32 (mean, SD, paired t-test p) over the same runs. Exactness: the largest
weight difference after one round between lockstep with ``replay`` and the loop (float rounding).

Lockstep draws its own dropout masks (no replay) and trains a chunk per torch thread; the loop
trains with reportfed's one training thread. Over 20 rounds runs agree statistically, not bit for
bit (Adam amplifies float rounding in weights whose gradient is ~0). ``lockstep_s`` is the sweep
on the faster lockstep path whose AUROC does not differ from float32's (paired p > 0.05): bf16
where this CPU makes it faster, else float32; ``lockstep_path`` names it.

    python benchmarks/node_sweep.py [--repeats 20] [--nodes 2 3 ... 10] [--skip loop bf16]
        [--granularity sentence]   # writes node_sweep_sentence.json
        [--device cuda]            # lockstep on a GPU: writes node_sweep_cuda.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import numpy as np
import torch
from machine import cpu_model
from scipy import stats

from experiments.baselines import METHODS, Scenario, method_nodes
from experiments.lockstep import Compute, run_federations
from experiments.protocol import Protocol, scenario
from experiments.runner import iu_data
from reportfed.core.config import GRANULARITIES, FederationConfig
from reportfed.core.files import atomic_write
from reportfed.core.metrics import auroc
from reportfed.reports.engine import run_federation
from reportfed.reports.node import Node
from reportfed.text.scoring import predict_state

RESULTS = Path(__file__).resolve().parent / "results"
PATHS = ("float32", "bf16", "loop")
DEFAULT = ("report", "cpu")  # the settings of node_sweep.json; others add their names


def sweep(
    k_values: list[int], repeats: int, granularity: str = "report"
) -> list[tuple[int, Scenario, list[Node]]]:
    x, y, labels, _, _ = iu_data()
    bags = iu_data(granularity="sentence")[0] if granularity == "sentence" else None
    runs = []
    for k in k_values:
        for seed in range(repeats):
            sc = scenario(x, y, labels, Protocol(n_nodes=k), seed, sentences=bags)
            sc = sc.at(granularity)  # type: ignore[arg-type]
            runs.append((k, sc, method_nodes(sc, METHODS["surgical"])))
    return runs


def peak_gflops(dtype: torch.dtype, device: str, size: int = 2048, repeats: int = 10) -> float:
    """The device's matrix-product throughput: a large square product (torch's threads)."""
    a, b = (torch.randn(size, size, dtype=dtype, device=device) for _ in range(2))
    a @ b
    sync = torch.cuda.synchronize if device.startswith("cuda") else lambda: None
    sync()
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    sync()
    return 2 * size**3 * repeats / (time.perf_counter() - start) / 1e9


def flop_per_row(dim: int, config: FederationConfig, labels: int, sentences: float) -> float:
    """Matrix-product FLOP of one training row: forward, weight gradients, and the input
    gradients of every layer after the first; a row of sentence bags scores each sentence."""
    widths = [dim, *config.hidden, labels]
    products = [i * o for i, o in pairwise(widths)]
    return 2 * (2 * sum(products) + sum(products[1:])) * sentences


def macro_auroc(sc: Scenario, state, config: FederationConfig) -> float:  # type: ignore[no-untyped-def]
    p = predict_state(state, sc.x[sc.test])
    return float(np.nanmean(auroc(sc.y[np.ix_(sc.test, sc.labels.indices(state.labels))], p)))


def timed(train: Callable[[], list]) -> tuple[list, float]:  # type: ignore[type-arg]
    start = time.perf_counter()
    states = train()
    return states, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--nodes", type=int, nargs="+", default=list(range(2, 11)))
    parser.add_argument("--granularity", choices=GRANULARITIES, default="report")
    parser.add_argument("--skip", nargs="*", choices=PATHS[1:], default=[])
    parser.add_argument("--device", default="cpu", help="the lockstep paths' torch device")
    args = parser.parse_args()
    config = FederationConfig()
    runs = sweep(args.nodes, args.repeats, args.granularity)
    configs = [replace(config, seed=sc.seed) for _, sc, _ in runs]
    nodes = [n for _, _, fed in runs for n in fed]
    rows = sum(len(n.x) for n in nodes) * config.rounds
    sentences = (
        float(np.mean([(n.x != 0).any(-1).sum(-1).mean() for n in nodes]))
        if nodes[0].x.ndim == 3
        else 1.0
    )
    dim, labels = nodes[0].x.shape[-1], len(runs[0][1].labels)
    tflop = rows * flop_per_row(dim, config, labels, sentences) / 1e12
    peaks = {t: peak_gflops(getattr(torch, t), args.device) for t in ("float32", "bfloat16")}

    # one round: lockstep replaying the loop's dropout draws equals the loop to float rounding
    one = replace(config, rounds=1)
    first = run_federations([runs[0][2]], [one], compute=Compute(replay=True))[0].state
    ref = run_federation(runs[0][2], one, progress=False).state
    assert first is not None
    round_diff = max(float(np.abs(first.shared[k] - ref.shared[k]).max()) for k in ref.shared)

    def lockstep(compute: Compute) -> list:  # type: ignore[type-arg]
        out = []
        for k in args.nodes:  # one call per K: its repeats train together
            batch = [i for i, r in enumerate(runs) if r[0] == k]
            results = run_federations(
                [runs[i][2] for i in batch], [configs[i] for i in batch], compute=compute
            )
            out += [r.state for r in results]
        return out

    trainers: dict[str, Callable[[], list]] = {  # type: ignore[type-arg]
        "float32": lambda: lockstep(Compute(device=args.device)),
        "bf16": lambda: lockstep(Compute(device=args.device, bf16=True)),
        "loop": lambda: [
            run_federation(fed, c, progress=False).state
            for (_, _, fed), c in zip(runs, configs, strict=True)
        ],
    }
    paths: dict[str, dict[str, object]] = {}
    scores: dict[str, np.ndarray] = {}
    wall: dict[str, float] = {}
    for name in (p for p in PATHS if p not in args.skip):
        states, seconds = timed(trainers[name])
        wall[name] = seconds
        scores[name] = np.array(
            [macro_auroc(sc, s, config) for (_, sc, _), s in zip(runs, states, strict=True)]
        )
        gflops = tflop * 1e3 / seconds
        paths[name] = {
            "s": round(seconds, 1),
            "node_rows_per_s": round(rows / seconds),
            "gflops": round(gflops, 1),
            "of_float32_peak": round(gflops / peaks["float32"], 3),
            "of_bfloat16_peak": round(gflops / peaks["bfloat16"], 3),
            "auroc_mean": float(scores[name].mean()),
        }
        print(name, json.dumps(paths[name]), flush=True)
    same_auroc = ["float32"]  # lockstep paths whose AUROC does not differ from float32's
    for name in paths:
        if name != "float32":
            gap = scores[name] - scores["float32"]
            p_value = float(stats.ttest_rel(scores[name], scores["float32"]).pvalue)
            paths[name]["auroc_minus_float32"] = {
                "mean": float(gap.mean()),
                "sd": float(gap.std(ddof=1)),
                "paired_p": p_value,
            }
            if name != "loop" and p_value > 0.05:
                same_auroc.append(name)
    fastest = min(same_auroc, key=wall.__getitem__)
    result = {
        "machine": f"{os.cpu_count()} cores of {cpu_model()}, torch {torch.__version__}",
        "device": torch.cuda.get_device_name(args.device)
        if args.device.startswith("cuda")
        else "cpu",
        "granularity": args.granularity,
        "runs": len(runs),
        "nodes": args.nodes,
        "repeats": args.repeats,
        "rounds": config.rounds,
        "sentences_per_report": round(sentences, 2),
        "sweep_tflop": round(tflop, 2),
        "peak_gflops": {k: round(v, 1) for k, v in peaks.items()},
        "lockstep_s": paths[fastest]["s"],
        "lockstep_path": fastest,
        "paths": paths,
        "max_weight_diff_after_one_round": round_diff,
    }
    suffix = "".join(
        f"_{part}" for part in (args.granularity, args.device.split(":")[0]) if part not in DEFAULT
    )
    atomic_write(RESULTS / f"node_sweep{suffix}.json", json.dumps(result, indent=2).encode())
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
