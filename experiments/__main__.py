"""``python -m experiments <name> [--repeats N] [--quick]``: run, summarise, tabulate and plot.

Experiments (IU corpus, 13 CheXpert findings, MiniLM, 80/20 split, 20 rounds x 1 local epoch):

* ``paper``: central vs surgical aggregation at K=2 and K=10 (0 shared labels), next to the paper;
* ``nodes``: K = 2..10 sites, 0 shared labels;
* ``shared``: K=2, shared labels 0..13, IID sites.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from experiments.runner import RESULTS, Setting, markdown, plot, repeats_default, run, summarize
from reportfed.federation.engine import FederationConfig
from reportfed.io import atomic_write
from reportfed.protocol import Protocol

PAPER = {"central": 91.67, "K=2": 89.98, "K=10": 74.73}
CENTRAL = Setting("central", 1, Protocol(n_nodes=1))


def settings_for(name: str, quick: bool) -> tuple[list[Setting], str, str]:
    """The settings of an experiment, its plot x-axis label, and its reference setting."""
    fed = FederationConfig(rounds=5) if quick else FederationConfig()
    central = Setting("central", 1, Protocol(n_nodes=1, federation=fed))
    if name == "paper":
        return (
            [central]
            + [Setting(f"K={k}", k, Protocol(n_nodes=k, federation=fed)) for k in (2, 10)],
            "",
            "central",
        )
    if name == "nodes":
        return (
            [central]
            + [Setting(f"K={k}", k, Protocol(n_nodes=k, federation=fed)) for k in range(2, 11)],
            "sites (K), 0 shared labels",
            "central",
        )
    if name == "shared":
        return (
            [central]
            + [
                Setting(f"shared={s}", s, Protocol(n_nodes=2, n_shared=s, federation=fed))
                for s in range(14)
            ],
            "labels shared by both sites (K=2, IID)",
            "central",
        )
    raise SystemExit(f"unknown experiment {name!r}: choose paper, nodes or shared")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m experiments", description=__doc__.splitlines()[0]
    )
    parser.add_argument("name", choices=["paper", "nodes", "shared"])
    parser.add_argument(
        "--repeats", type=int, default=None, help="repeats (default 20; 3 with --quick)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="5 rounds, 3 repeats, separate result files"
    )
    args = parser.parse_args(argv)
    settings, xlabel, reference = settings_for(args.name, args.quick)
    tag = f"{args.name}-quick" if args.quick else args.name
    runs = run(tag, settings, repeats_default(args.quick, args.repeats))
    summary = summarize(runs, settings, reference)
    notes = (
        "IU reports with all 13 findings annotated (3,832), MeSH-derived labels, all-MiniLM-L6-v2 (bf16), "
        "80/20 split, 10% of each site's training rows held out for leak-free thresholds, "
        "MLP 512-256, Adam 1e-3, batch 32, unweighted surgical aggregation. Seeds 0..n-1."
    )
    if args.name == "paper":
        notes += "\n\nPaper (Shah et al., MIDL 2025, private radiologist labels): " + ", ".join(
            f"{k} {v}%" for k, v in PAPER.items()
        )
    atomic_write(
        RESULTS / f"{tag}.md", markdown(summary, f"Experiment: {tag}", reference, notes).encode()
    )
    if xlabel:
        plot(
            summary[summary["setting"] != "central"],
            RESULTS / f"{tag}.png",
            xlabel,
            central=summary[summary["setting"] == "central"].iloc[0],
        )
    print((RESULTS / f"{tag}.md").read_text())


if __name__ == "__main__":
    main()
