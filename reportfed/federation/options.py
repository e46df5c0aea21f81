"""Command-line flags of the training options beyond the paper, shared by ``reportfed train``
and ``reportfed federation run`` (every flag off = the paper's method)."""

from __future__ import annotations

import argparse
from typing import Any


def add_options(p: argparse.ArgumentParser) -> None:
    """Add ``--distill``, ``--weight-decay``, ``--balance``, ``--skip``, ``--server-momentum`` and
    ``--prox`` to ``p``."""
    p.add_argument(
        "--distill",
        type=float,
        default=0.0,
        help="weight of knowledge transfer for labels a node lacks (0 = the paper's method)",
    )
    p.add_argument("--weight-decay", type=float, default=0.0, help="L2 term of the nodes' Adam")
    p.add_argument(
        "--balance", action="store_true", help="weigh positives by negatives/positives per label"
    )
    p.add_argument(
        "--skip", action="store_true", help="add a linear term on the embedding to the head"
    )
    p.add_argument(
        "--server-momentum",
        type=float,
        default=0.0,
        help="server momentum on the representation block (FedAvgM; 0 = plain average)",
    )
    p.add_argument("--prox", type=float, default=0.0, help="FedProx proximal term weight (0 = off)")


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~reportfed.federation.engine.FederationConfig` fields of those flags."""
    return {
        "distill": args.distill,
        "weight_decay": args.weight_decay,
        "balance": args.balance,
        "skip": args.skip,
        "server_momentum": args.server_momentum,
        "prox": args.prox,
    }
