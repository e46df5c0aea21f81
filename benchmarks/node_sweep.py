"""The full node sweep (K = 2..10 sites x 20 repeats x 20 rounds, IU, 0 shared labels) trained by
the lockstep engine and by the per-node loop, on the same runs, in one invocation.

Prints the wall time of each path, the ratio, the training throughput (node-rows per second) and
how far the two paths' results are apart: the largest weight difference after one round (float
rounding), and over the full 20 rounds the test-set macro AUROC difference per run. Over 20
rounds Adam amplifies float rounding in weights whose gradient is ~0 (the loop run with 1 and
2 threads differs as much), so full runs agree statistically, not bit for bit.

    python benchmarks/node_sweep.py [--repeats 20] [--nodes 2 3 ... 10]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from experiments.runner import iu_data
from reportfed.config import FederationConfig
from reportfed.federation.baselines import METHODS, Scenario, method_nodes
from reportfed.federation.engine import Node, run_federation
from reportfed.federation.lockstep import run_federations
from reportfed.io import atomic_write
from reportfed.metrics import auroc
from reportfed.model import predict_state
from reportfed.protocol import Protocol, scenario

RESULTS = Path(__file__).resolve().parent / "results" / "node_sweep.json"


def sweep(k_values: list[int], repeats: int) -> list[tuple[int, Scenario, list[Node]]]:
    x, y, labels, _, _ = iu_data()
    runs = []
    for k in k_values:
        for seed in range(repeats):
            sc = scenario(x, y, labels, Protocol(n_nodes=k), seed)
            runs.append((k, sc, method_nodes(sc, METHODS["surgical"])))
    return runs


def macro_auroc(sc: Scenario, state, config: FederationConfig) -> float:  # type: ignore[no-untyped-def]
    p = predict_state(state, sc.x[sc.test], config)
    return float(np.nanmean(auroc(sc.y[np.ix_(sc.test, sc.labels.indices(state.labels))], p)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--nodes", type=int, nargs="+", default=list(range(2, 11)))
    args = parser.parse_args()
    config = FederationConfig()
    runs = sweep(args.nodes, args.repeats)
    configs = [replace(config, seed=sc.seed) for _, sc, _ in runs]
    rows = sum(len(n.x) for _, _, nodes in runs for n in nodes) * config.rounds

    # one round: both paths must agree to float rounding
    one = replace(config, rounds=1)
    first = run_federations([runs[0][2]], [one])[0].state
    ref = run_federation(runs[0][2], one, progress=False).state
    assert first is not None
    round_diff = max(float(np.abs(first.shared[k] - ref.shared[k]).max()) for k in ref.shared)

    start = time.perf_counter()
    lockstep = []
    for k in args.nodes:  # one lockstep call per K: its 20 repeats train together
        batch = [(i, r) for i, r in enumerate(runs) if r[0] == k]
        states = run_federations([r[2] for _, r in batch], [configs[i] for i, _ in batch])
        lockstep += [s.state for s in states]
    t_lockstep = time.perf_counter() - start

    start = time.perf_counter()
    loop = [
        run_federation(nodes, c, progress=False).state
        for (_, _, nodes), c in zip(runs, configs, strict=True)
    ]
    t_loop = time.perf_counter() - start

    gaps = np.array(
        [
            macro_auroc(sc, a, config) - macro_auroc(sc, b, config)
            for (_, sc, _), a, b in zip(runs, lockstep, loop, strict=True)
        ]
    )
    result = {
        "runs": len(runs),
        "nodes": args.nodes,
        "repeats": args.repeats,
        "rounds": config.rounds,
        "loop_s": round(t_loop, 1),
        "lockstep_s": round(t_lockstep, 1),
        "ratio": round(t_loop / t_lockstep, 2),
        "loop_node_rows_per_s": round(rows / t_loop),
        "lockstep_node_rows_per_s": round(rows / t_lockstep),
        "max_weight_diff_after_one_round": round_diff,
        "auroc_diff_mean": float(gaps.mean()),
        "auroc_diff_max_abs": float(np.abs(gaps).max()),
    }
    atomic_write(RESULTS, json.dumps(result, indent=2).encode())
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
