"""The :class:`Embedder` protocol shared by every embedding backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns report texts into fixed-size float32 vectors.

    ``fingerprint`` identifies the exact model (and weights and precision): the embedding cache is
    keyed by it, and a trained model refuses to run on an embedder with another fingerprint.
    """

    @property
    def fingerprint(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (no caching) into an array of shape ``(len(texts), dim)``."""
        ...
