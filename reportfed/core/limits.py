"""Bounds on what one party of a federation accepts from another, checked before anything is
allocated from it: a node's handshake and updates at the server, the messages a node receives,
and the size of any one request the nodes' gateway passes.

A bound that a real party never comes near (the largest embedder served here has 3,072
dimensions, the CheXpert and NIH vocabularies together 20 labels) turns a value that only a
hostile or broken party sends into one refusal that names it, instead of an allocation of
terabytes, a model no one can read, or an exception that ends the run for everybody.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

#: input dimension of any embedder a run may declare
MAX_DIM = 4096
#: labels one node annotates, and a federation's model holds
MAX_LABELS = 256
#: characters of a node's name or a label's
MAX_NAME = 200
#: rows a node may say it trains on
MAX_ROWS = 10**9
#: characters of every text a node's handshake carries, together (its settings, its findings'
#: definitions and corrected phrasings as JSON)
MAX_HANDSHAKE_CHARS = 1 << 20
#: bytes of one value in the largest update: SecAgg+ masks float64 vectors (plain updates are
#: float32)
_VALUE_BYTES = 8
#: bytes of any one request the nodes' gateway passes (nginx's ``client_max_body_size``): the
#: largest update a run may produce, :func:`update_bytes` at :data:`MAX_DIM`,
#: :data:`MAX_LABELS` and the default hidden widths (27 MB), with room for Flower's framing; a
#: run whose own largest update exceeds it is refused at its start
MAX_REQUEST_BYTES = 64 << 20


def update_bytes(dim: int, labels: int, hidden: Sequence[int], *, skip: bool = False) -> int:
    """Bytes of the largest update of a report MLP of input ``dim``, ``hidden`` widths and
    ``labels`` output rows (``skip``: a linear term on the input too), at 8 bytes a value: the
    shared block (every hidden layer's weights and biases) and every label's row (its weights
    on the last hidden layer, or the input with ``skip``, and its bias)."""
    widths = [dim, *hidden]
    shared = sum(a * b + b for a, b in itertools.pairwise(widths))
    task = labels * (widths[-1] + 1 + (dim if skip else 0))
    return (shared + task) * _VALUE_BYTES


def bounded_int(name: str, value: object, low: int, high: int) -> int:
    """``value`` as an integer in [``low``, ``high``] (a ``ValueError`` naming ``name``
    otherwise: not an integer, not finite, out of range)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be an integer, got {type(value).__name__}")
    if not math.isfinite(value) or value != int(value):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if not low <= int(value) <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {int(value)}")
    return int(value)


def bounded_name(what: str, value: object) -> str:
    """``value`` as a name: text of 1 to :data:`MAX_NAME` printable characters (a
    ``ValueError`` naming ``what`` otherwise)."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be text, got {type(value).__name__}")
    if not 0 < len(value) <= MAX_NAME or not value.isprintable():
        shown = value[:40] + ("..." if len(value) > 40 else "")
        raise ValueError(f"{what} must be 1 to {MAX_NAME} printable characters, got {shown!r}")
    return value
