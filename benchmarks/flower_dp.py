"""What differential privacy costs: the same K=2 IU federation on Flower's deployment engine
without DP and with client-side clipping + central Gaussian noise (Flower's DP wrapper), macro
AUROC and per-label AUROC on the nodes' held-out rows after the last round.

    python -m benchmarks.flower_dp [--rounds 10] [--clip 0.5] [--noise 0 0.05 0.2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import pandas as pd

from benchmarks.flower_engines import node_tables
from reportfed.core import schema
from reportfed.core.config import PAPER_SETTINGS
from reportfed.core.files import atomic_write
from reportfed.core.paths import embeddings_cache_dir
from reportfed.flower.server_app import HISTORY_FILE
from tests.loopback import LoopbackFederation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--clip", type=float, default=0.5)
    parser.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.05, 0.2])
    parser.add_argument("--out", default="benchmarks/results/flower_dp.json")
    args = parser.parse_args()
    # the paper's training (DP needs distill 0), which the committed results were measured with
    paper_run = schema.in_table(
        "reports", {schema.dashed(name): value for name, value in PAPER_SETTINGS.items()}
    )
    cache = str(embeddings_cache_dir().resolve())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        paths = node_tables(work, 2)
        with LoopbackFederation(work) as fed:
            for p in paths:
                fed.add_node(p.stem, p, **{"cache-dir": cache})
            for noise in args.noise:
                out = work / f"noise-{noise}"
                fed.run({"reports.rounds": args.rounds, "min-nodes": 2, "evaluate-every": 0,
                         "out": str(out), "dp-noise": noise, "dp-clip": args.clip,
                         **paper_run})  # fmt: skip
                evaluation = json.loads((out / HISTORY_FILE).read_text())[-1]["evaluation"]
                rows.append({"noise": noise, "clip": args.clip if noise else None,
                             "rounds": args.rounds, **evaluation})  # fmt: skip
    frame = pd.DataFrame(rows)
    print(frame[["noise", "clip", "rounds", "macro-auroc"]].to_string(index=False))
    atomic_write(args.out, json.dumps(rows, indent=1).encode())


if __name__ == "__main__":
    main()
