"""The :class:`Embedder` protocol shared by every embedding backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns report texts into fixed-size float32 vectors.

    ``fingerprint`` names the vector space (the model, its weights, settings that change the
    vectors): a trained model refuses to run on an embedder with another fingerprint, and every
    node of a federation must share it. ``cache_key`` adds how the vectors are computed
    (precision, backend): the embedding cache is keyed by it, so vectors computed one way are
    never served for another.
    """

    @property
    def fingerprint(self) -> str: ...

    @property
    def cache_key(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (no caching) into an array of shape ``(len(texts), dim)``."""
        ...
