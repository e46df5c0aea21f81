"""The same federated run on three engines, timed in one invocation:

* in-process (``reportfed.reports.engine.run_federation``);
* Flower's simulation engine (a SuperLink in simulation mode, virtual nodes on Ray);
* Flower's deployment engine (SuperLink + one SuperNode process per hospital, loopback);
* at K=3, the deployment engine again with secure aggregation (Flower's SecAgg+).

Writes ``benchmarks/results/flower_engines.json``: ``deployment_per_round_s_k3`` (the seconds of a
deployment round at K=3) beside the in-process figure and the secure round's, the bytes a node
sends and receives per round with and without secure aggregation (from the run's history, Flower's
serialized messages), and every engine's row.

Nodes are IID chunks of the IU reports (13 CheXpert findings, no shared label: the paper's K-node
protocol), written as the CSV tables hospitals would hold. Every engine must give the same global
model (secure aggregation: within its rounding); the script prints the largest difference next
to the timings.

    python -m benchmarks.flower_engines                # K=2, 20 rounds and K=3, 3 rounds
    python -m benchmarks.flower_engines --skip simulation
    python -m benchmarks.flower_engines --before DIR    # DIR: git worktree add DIR <commit>

Needs the ``[flower]`` extra, and ``flwr[simulation]`` (Ray) for the simulation engine.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.machine import machine
from experiments.protocol import Protocol, partition
from reportfed.core.aggregation import GlobalState
from reportfed.core.config import FederationConfig, NodeSettings
from reportfed.core.files import atomic_write
from reportfed.core.labels import CHEXPERT_13, LabelSpace
from reportfed.core.paths import embeddings_cache_dir
from reportfed.data.iu import load_iu
from reportfed.data.table import ReportTable
from reportfed.flower.server_app import HISTORY_FILE, MODEL_FILE
from reportfed.labeler import ReportLabeler
from reportfed.reports.engine import run_federation
from reportfed.reports.node import load_report_node
from tests.loopback import LoopbackFederation


def _partition(k: int, seed: int) -> tuple[ReportTable, tuple[np.ndarray, ...], list[LabelSpace]]:
    """The IU table (13 findings, fully annotated) and its K-node partition: train rows, test
    rows, each train row's node, each node's labels."""
    table = load_iu().select_labels(list(CHEXPERT_13)).fully_annotated()
    rng = np.random.default_rng(seed)
    *rows, spaces = partition(table.labels, table.label_space, Protocol(n_nodes=k), rng)
    return table, tuple(rows), spaces


def node_tables(out: Path, k: int, seed: int = 0) -> list[Path]:
    """The training rows of a K-node IU partition, one CSV per node with its labels only."""
    table, (train, _, site), spaces = _partition(k, seed)
    paths = []
    for node, space in enumerate(spaces):
        rows = train[site == node]
        sub = table.subset(rows).select_labels(space)
        frame = pd.DataFrame({"Reports": sub.texts, **dict(zip(space, sub.labels.T, strict=True))})
        paths.append(out / f"site{node}.csv")
        frame.to_csv(paths[-1], index=False)
    return paths


def held_out_reports(k: int, seed: int = 0) -> list[str]:
    """The IU reports of the same partition's test rows, which no node trains on."""
    table, (_, test, _), _ = _partition(k, seed)
    return [table.texts[i] for i in test]


def max_diff(model: ReportLabeler, state: GlobalState) -> float:
    """Largest absolute weight difference between a saved model and an engine's state."""
    pairs = [(model.state_.shared, state.shared), (model.state_.task, state.task)]
    return max(float(np.abs(x[k] - y[k]).max()) for x, y in pairs for k in x)


def _set_pythonpath(value: str | None) -> None:
    if value is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = value


def bench(
    k: int,
    rounds: int,
    skip: set[str],
    work: Path,
    *,
    secure: bool = False,
    before: str | None = None,
) -> list[dict[str, object]]:
    """Every engine's row at ``k`` nodes and ``rounds`` rounds; with ``before`` (another
    checkout), the deployment engines again with that checkout's reportfed in the Flower
    processes (its ServerApp and ClientApps). The secure row holds ``proba_diff``: the largest
    difference between its model's and the plain deployment model's label probabilities on the
    held-out reports."""
    paths = node_tables(work, k)
    cache = str(embeddings_cache_dir().resolve())
    run = {"reports.rounds": rounds, "min-nodes": k, "evaluate-every": 0, "round-timeout": 600.0}
    rows: list[dict[str, object]] = []

    nodes = [  # embeds once
        load_report_node(
            NodeSettings(data=str(p), cache_dir=str(cache)), FederationConfig(rounds=rounds)
        ).node
        for p in paths
    ]
    start = time.perf_counter()
    reference = run_federation(nodes, FederationConfig(rounds=rounds), progress=False).state
    wall = time.perf_counter() - start
    rows.append({"engine": "in-process", "wall_s": wall, "round_s": wall / rounds, "diff": 0.0})

    engines = ["simulation", "deployment"] + (["deployment-secure"] if secure else [])
    if before:
        engines += [e + " (before)" for e in engines if e.startswith("deployment")]
    models = {}
    own = os.environ.get("PYTHONPATH")  # this checkout's, when it is not the installed one
    for engine in engines:
        if engine.split("-")[0].split(" ")[0] in skip:
            continue
        root = work / engine.replace(" (before)", "-before")
        root.mkdir()
        if engine.endswith("(before)"):
            assert before is not None
            os.environ["PYTHONPATH"] = str(Path(before).resolve())  # the Flower processes'
        else:
            _set_pythonpath(own)
        sim = k if engine == "simulation" else None
        with LoopbackFederation(root, simulation_nodes=sim) as fed:
            if sim is None:
                for p in paths:
                    fed.add_node(p.stem, p, **{"cache-dir": cache})
            extra: dict[str, str | bool] = {"secure-aggregation": "secure" in engine}
            if sim:
                extra["partitions"] = ",".join(map(str, paths))
            start = time.perf_counter()
            fed.run({**run, "out": str(root / "out"), **extra})
            wall = time.perf_counter() - start
        history = json.loads((root / "out" / HISTORY_FILE).read_text())
        model = models[engine] = ReportLabeler.load(root / "out" / MODEL_FILE, progress=False)
        traffic = [b for e in history for b in e.get("bytes", {}).values()]
        rows.append(
            {
                "engine": engine,
                "wall_s": wall,
                "round_s": float(np.mean([e["seconds"] for e in history])),
                "diff": max_diff(model, reference),
                "up_bytes": float(np.mean([b["up"] for b in traffic])) if traffic else None,
                "down_bytes": float(np.mean([b["down"] for b in traffic])) if traffic else None,
            }
        )
    _set_pythonpath(own)
    if "deployment" in models and "deployment-secure" in models:
        texts = held_out_reports(k)
        diff = models["deployment"].predict_proba(texts) - models[
            "deployment-secure"
        ].predict_proba(texts)
        next(r for r in rows if r["engine"] == "deployment-secure")["proba_diff"] = float(
            np.abs(diff).max()
        )
    for row in rows:
        row.update(nodes=k, rounds=rounds, ratio=float(row["wall_s"]) / float(rows[0]["wall_s"]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip", action="append", default=[], choices=["simulation", "deployment"])
    parser.add_argument("--out", default="benchmarks/results/flower_engines.json")
    parser.add_argument("--before", help="another checkout's root: its deployment rounds too")
    args = parser.parse_args()
    rows = []
    for k, rounds in ((3, 3), (2, 20)):
        with tempfile.TemporaryDirectory() as tmp:
            rows += bench(k, rounds, set(args.skip), Path(tmp), secure=k == 3, before=args.before)
    columns = ["nodes", "rounds", "engine", "wall_s", "round_s", "ratio", "diff"]
    frame = pd.DataFrame(rows).reindex(columns=[*columns, "proba_diff", "up_bytes", "down_bytes"])
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    by = {(r["engine"], r["nodes"]): r for r in rows}
    result = {
        "machine": machine(),
        "deployment_per_round_s_k3": by.get(("deployment", 3), {}).get("round_s"),
        "secure_deployment_per_round_s_k3": by.get(("deployment-secure", 3), {}).get("round_s"),
        "in_process_per_round_s_k3": by.get(("in-process", 3), {}).get("round_s"),
        "secure_plain_proba_diff_k3": by.get(("deployment-secure", 3), {}).get("proba_diff"),
        "bytes_per_node_per_round_k3": {
            engine: {d: by.get((engine, 3), {}).get(f"{d}_bytes") for d in ("up", "down")}
            for engine in ("deployment", "deployment-secure")
        },
        "rows": rows,
    }
    atomic_write(args.out, json.dumps(result, indent=1).encode())


if __name__ == "__main__":
    main()
