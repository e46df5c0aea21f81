"""``python -m experiments simulate``: train a labeler on simulated IU sites under the papers'
protocol (:func:`experiments.protocol.simulate`) and write it with its test metrics."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import asdict

from experiments.protocol import Protocol, simulate
from reportfed.cli import run
from reportfed.cli.options import Parser, check_outputs, say
from reportfed.cli.train import (
    add_training_options,
    save_labeler,
    training_labeler,
    training_outputs,
)
from reportfed.core import schema
from reportfed.core.config import PAPER_SETTINGS, FederationConfig
from reportfed.core.errors import ReportfedError
from reportfed.core.labels import CHEXPERT_13, CHEXPERT_14


def cmd_simulate(args: argparse.Namespace) -> None:
    """Split IU, train the sites, evaluate on the held-out test reports, write model + summary."""
    from reportfed.data.iu import load_iu

    labels = CHEXPERT_14 if args.with_no_finding else CHEXPERT_13
    if args.nodes < 1:
        raise ReportfedError(f"--nodes must be at least 1, got {args.nodes}")
    if not 0 <= args.shared <= len(labels):
        raise ReportfedError(
            f"--shared must be in [0, {len(labels)}] (the labels), got {args.shared}"
        )
    check_outputs(training_outputs(args))
    config = schema.from_args(FederationConfig, args)
    protocol = Protocol(args.nodes, args.shared, val_fraction=args.val_fraction, federation=config)
    labeler = training_labeler(args, config, args.val_fraction)
    table = load_iu(args.archive).select_labels(list(labels)).fully_annotated()
    x = labeler.embed(table.texts)
    result = simulate(
        x,
        table.labels,
        table.label_space,
        protocol,
        args.seed,
        labeler=labeler,
        fingerprint=None,
        texts=table.texts,
    )
    for name, info in result.labeler.provenance_["nodes"].items():
        read = f", reads {info['read']}" if info.get("read") else ""
        say(f"{name}: {info['rows']} training reports, labels {info['labels']}{read}")
    say("test metrics: " + ", ".join(f"{k} {v:.4f}" for k, v in result.metrics.items()))
    summary = {
        "protocol": {
            "nodes": args.nodes,
            "shared": args.shared,
            "seed": args.seed,
            "reports": len(table),
            "granularity": args.granularity,
            "val_fraction": args.val_fraction,
        },
        "config": asdict(config),
        "test_metrics": result.metrics,
        "node_labels": [list(s) for s in result.node_labels],
    }
    save_labeler(result.labeler, args.out, args.metrics, summary, report=args.report)


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m experiments simulate``."""
    p = Parser(
        prog="python -m experiments simulate",
        description="train a labeler on simulated IU sites under the papers' protocol and write "
        "it with its test metrics",
    )
    p.add_argument("--archive", default=None, help="IU archive path (else resolved)")
    p.add_argument("--nodes", type=int, default=2, help="simulated sites")
    p.add_argument("--shared", type=int, default=0, help="labels every site has")
    p.add_argument("--with-no-finding", action="store_true", help="train No Finding too")
    p.add_argument(
        "--val-fraction",
        type=float,
        default=0.1,
        help="share of each site's training rows held out to choose thresholds, in [0, 1)",
    )
    add_training_options(p)
    # the papers' protocol and settings: whole-report embeddings, 20 rounds x 1 local epoch
    p.set_defaults(func=cmd_simulate, granularity="report", **PAPER_SETTINGS)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``simulate`` with ``argv``; bad input ends in one line and status 2."""
    return run(build_parser().parse_args(argv))
