"""Where reportfed keeps things on disk."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def cache_dir() -> Path:
    """User cache directory (``$REPORTFED_CACHE_DIR`` or the platform's user cache)."""
    root = os.environ.get("REPORTFED_CACHE_DIR") or platformdirs.user_cache_dir("reportfed")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def embeddings_cache_dir() -> Path:
    """Embedding cache directory (``$REPORTFED_EMBEDDINGS_CACHE`` or ``./embeddings_cache``)."""
    return Path(os.environ.get("REPORTFED_EMBEDDINGS_CACHE", "embeddings_cache"))
