"""Training and embedding on a busy machine, in one invocation.

Trains the default model (``reportfed.default_model``: two IU sites, 14 CheXpert labels, sentence
level, 20 rounds; embeddings from the cache) and embeds uncached reports, each in a fresh
process, alone and next to a CPU-bound process this script starts (two threads hashing, which
keep both cores busy). Training runs with torch's default thread count (one per core: what
reportfed did before) and with reportfed's (:data:`reportfed.nn.threads.TRAINING_THREADS`);
embedding with torch's default and with one thread.

Writes ``benchmarks/results/contention.json``: ``alone_s``, ``busy_s`` and ``slowdown`` of
reportfed's training, the same for torch's default (``before``), and the embedding rates. A
measurement that passes ``--timeout`` is recorded as that many seconds with ``timed_out``: its
slowdown is then a lower bound.

    python benchmarks/contention.py [--rounds 20] [--timeout 600]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from reportfed.core.files import atomic_write
from reportfed.nn.threads import TRAINING_THREADS

RESULTS = Path(__file__).resolve().parent / "results" / "contention.json"
CPUS = os.cpu_count() or 1
#: training thread counts compared: torch's default and reportfed's
TRAINING = {"before": CPUS, "reportfed": TRAINING_THREADS}
#: embedding thread counts compared
EMBEDDING = {"default": CPUS, "one-thread": 1}

BUSY = """
import hashlib, threading
block = bytes(8 << 20)
def spin():
    while True:
        hashlib.sha256(block).digest()  # releases the GIL: one core per thread
threads = [threading.Thread(target=spin, daemon=True) for _ in range(2)]
for t in threads: t.start()
for t in threads: t.join()
"""

CHILD = """
import json, sys, time
import numpy as np
import torch
from reportfed.core.config import FederationConfig
from reportfed.data.iu import load_iu
from reportfed.labeler import ReportLabeler
task, rounds = sys.argv[1], int(sys.argv[2])
table = load_iu().fully_annotated()
if task == "train":
    sites = [f"site{i % 2}" for i in np.random.default_rng(0).permutation(len(table))]
    x = ReportLabeler(progress=False).embed(table.texts)  # from the embedding cache
    labeler = ReportLabeler(progress=False, config=FederationConfig(rounds=rounds))
    start = time.perf_counter()
    labeler.fit_embeddings(x, table.labels, table.label_space, nodes=sites)
    print(json.dumps({"seconds": time.perf_counter() - start}))
else:
    from reportfed.embed import make_embedder
    torch.set_num_threads(int(sys.argv[3]))
    embedder = make_embedder("minilm")
    texts = [f"{t} (#{i})" for i, t in enumerate(table.texts[:400])]  # never cached
    embedder.embed(texts[:16])
    start = time.perf_counter()
    embedder.embed(texts)
    print(json.dumps({"per_s": len(texts) / (time.perf_counter() - start)}))
"""


def child(task: str, rounds: int, threads: int, timeout: float) -> dict[str, float]:
    """Run one measurement in a fresh process with ``threads`` torch threads."""
    env = os.environ | {"REPORTFED_TRAINING_THREADS": str(threads)}
    cmd = [sys.executable, "-c", CHILD, task, str(rounds), str(threads)]
    try:
        done = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=timeout, check=True
        )
    except subprocess.TimeoutExpired:
        return {"seconds": timeout, "timed_out": 1.0}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def measure(rounds: int, timeout: float) -> dict[str, dict[str, float]]:
    """Training seconds and embedding rates per thread setting, alone and busy."""
    out: dict[str, dict[str, float]] = {}
    for load in ("alone", "busy"):
        busy = subprocess.Popen([sys.executable, "-c", BUSY]) if load == "busy" else None
        time.sleep(1.0)
        try:
            for name, threads in TRAINING.items():
                train = child("train", rounds, threads, timeout)
                entry = out.setdefault(f"training/{name}", {"threads": threads})
                entry[f"{load}_s"] = round(train["seconds"], 2)
                entry[f"{load}_timed_out"] = bool(train.get("timed_out"))
                print(f"{load:5s} training {name:10s} {train['seconds']:7.1f} s", flush=True)
            for name, threads in EMBEDDING.items():
                rate = child("embed", rounds, threads, timeout).get("per_s", 0.0)
                entry = out.setdefault(f"embedding/{name}", {"threads": threads})
                entry[f"{load}_per_s"] = round(rate, 1)
                print(f"{load:5s} embedding {name:10s} {rate:7.1f} reports/s", flush=True)
        finally:
            if busy is not None:
                busy.kill()
    for key, entry in out.items():
        if key.startswith("training/"):
            entry["slowdown"] = round(entry["busy_s"] / entry["alone_s"], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="training rounds (default model)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per measurement")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    measured = measure(args.rounds, args.timeout)
    ours, before = measured["training/reportfed"], measured["training/before"]
    result = {
        "alone_s": ours["alone_s"],
        "busy_s": ours["busy_s"],
        "slowdown": ours["slowdown"],
        "before": {k: before[k] for k in ("alone_s", "busy_s", "slowdown", "busy_timed_out")},
        "rounds": args.rounds,
        "cpus": CPUS,
        "measured": measured,
    }
    atomic_write(args.out, json.dumps(result, indent=1).encode())
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
