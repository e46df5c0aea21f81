"""The training options beyond the paper, listed once: their command-line flags (shared by
``reportfed train`` and ``reportfed federation run``) and their run-config / wire keys.

Each is a :class:`~reportfed.federation.engine.FederationConfig` field whose default (0 or off)
is the paper's method. A flag and a key are the field name with dashes.
"""

from __future__ import annotations

import argparse
from typing import Any

from reportfed.sentences import GRANULARITIES

#: field -> (type, help); every default is off (0.0 / False)
OPTIONS: dict[str, tuple[type, str]] = {
    "distill": (
        float,
        "weight of knowledge transfer for labels a node lacks (0 = the paper's method)",
    ),
    "weight_decay": (float, "L2 term of the nodes' Adam"),
    "balance": (bool, "weigh positives by negatives/positives per label"),
    "skip": (bool, "add a linear term on the embedding to the head"),
    "server_momentum": (
        float,
        "server momentum on the representation block (FedAvgM; 0 = plain average)",
    ),
    "prox": (float, "FedProx proximal term weight (0 = off)"),
}


def dashed(field: str) -> str:
    """The flag / run-config key of a field (``weight_decay`` -> ``weight-decay``)."""
    return field.replace("_", "-")


def add_options(p: argparse.ArgumentParser) -> None:
    """Add a flag per option (``--distill``, ``--balance``, ...) to ``p``."""
    for field, (kind, text) in OPTIONS.items():
        if kind is bool:
            p.add_argument(f"--{dashed(field)}", action="store_true", help=text)
        else:
            p.add_argument(f"--{dashed(field)}", type=kind, default=kind(), help=text)


def add_granularity(p: argparse.ArgumentParser) -> None:
    """Add ``--granularity`` (how reports are embedded; the product's default, sentence) to ``p``."""
    p.add_argument(
        "--granularity",
        choices=GRANULARITIES,
        default="sentence",
        help="sentence: score every sentence, pool per label; report: one embedding per report "
        "(the papers' method)",
    )


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~reportfed.federation.engine.FederationConfig` fields of those flags."""
    return {field: getattr(args, field) for field in OPTIONS}
