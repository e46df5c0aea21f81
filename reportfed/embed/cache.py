"""On-disk embedding cache keyed by the embedder's cache key (:attr:`Embedder.cache_key`) and text hash.

Layout: ``<root>/<sha256(cache key)[:16]>/`` holds ``fingerprint.txt`` (the key) and shards
``shard-*.npz``, each with ``keys`` (sha256 of each text, ``(n, 32)`` uint8), ``vectors``
(``(n, dim)`` float32) and ``digest`` (sha256 over keys and vectors). Shards are written
atomically, one per chunk of new texts, so an interrupted run keeps what it finished; ``dim.txt``
records the size of the embedder's vectors. A shard that fails to load, whose digest does not
match or whose vectors are of another size (or an entry that is no file) is removed and its
texts embedded again, with a warning: a corrupted entry is never returned.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from reportfed.core.errors import EmbeddingError, OutputFileError
from reportfed.core.files import atomic_write, file_signature
from reportfed.embed.base import Embedder

_log = logging.getLogger(__name__)


def text_key(text: str) -> bytes:
    """The 32-byte cache key of a text."""
    return hashlib.sha256(text.encode("utf-8")).digest()


def _digest(keys: np.ndarray, vectors: np.ndarray) -> bytes:
    h = hashlib.sha256(keys.tobytes())
    h.update(vectors.tobytes())
    return h.digest()


#: the shards last read (their signatures) and their vectors, by cache folder and vector size
_READ: dict[tuple[Path, int], tuple[dict[str, tuple[int, int, int]], dict[bytes, np.ndarray]]] = {}


class EmbeddingCache:
    """The cache directory of one embedder cache key."""

    def __init__(self, root: str | Path, fingerprint: str) -> None:
        self.fingerprint = fingerprint
        self.dir = Path(root) / hashlib.sha256(fingerprint.encode()).hexdigest()[:16]

    @property
    def dim(self) -> int | None:
        """The size of this embedder's vectors as recorded by :meth:`store` (None: unknown)."""
        try:
            return int((self.dir / "dim.txt").read_text())
        except (OSError, ValueError):
            return None

    def load(self, dim: int) -> dict[bytes, np.ndarray]:
        """Every valid cached vector of this fingerprint, of ``dim`` values; corrupted entries
        are removed. What was read stays in memory for the next call, which reads only the
        shards written since (a labelling run asks once per chunk); a shard that changed or went
        makes it read them all again."""
        shards = {p.name: file_signature(p) for p in sorted(self.dir.glob("shard-*.npz"))}
        seen, found = _READ.get((self.dir, dim), ({}, {}))
        if any(shards.get(name) != signature for name, signature in seen.items()):
            seen, found = {}, {}
        for name, signature in shards.items():
            if name not in seen:
                found.update(self._shard(self.dir / name, dim))
                seen[name] = signature
        _READ.clear()  # one cache at a time: the one in use
        _READ[(self.dir, dim)] = (seen, found)
        if found:
            self._record_dim(dim)
        return found

    def _shard(self, shard: Path, dim: int) -> dict[bytes, np.ndarray]:
        """The vectors of one shard, or none (the shard removed) when it is corrupted."""
        try:
            with np.load(shard, allow_pickle=False) as z:
                keys, vectors, digest = z["keys"], z["vectors"], z["digest"].tobytes()
            if keys.shape[0] != vectors.shape[0] or _digest(keys, vectors) != digest:
                raise ValueError("digest mismatch")
            if vectors.ndim != 2 or vectors.shape[1] != dim:
                raise ValueError(f"vectors of shape {vectors.shape}, the embedder makes {dim}")
        except Exception as exc:  # any unreadable shard is treated the same way
            _log.warning(
                "embedding cache shard %s is corrupted (%s): removed, will re-embed", shard, exc
            )
            if shard.is_dir() and not shard.is_symlink():
                shutil.rmtree(shard, ignore_errors=True)
            else:
                shard.unlink(missing_ok=True)
            return {}
        return {k.tobytes(): v for k, v in zip(keys, vectors, strict=True)}

    def _record_dim(self, dim: int) -> None:
        """Write ``dim.txt`` where it is missing (a read-only cache goes without)."""
        if self.dim is None:
            with contextlib.suppress(OutputFileError):
                atomic_write(self.dir / "dim.txt", str(dim).encode())

    def store(self, keys: list[bytes], vectors: np.ndarray) -> None:
        """Write one shard atomically."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise EmbeddingError(
                f"cannot write the embedding cache {self.dir} ({exc.strerror}): "
                "give a writable --cache-dir"
            ) from None
        fp_file = self.dir / "fingerprint.txt"
        if not fp_file.exists():
            atomic_write(fp_file, self.fingerprint.encode())
        self._record_dim(vectors.shape[1])
        k = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), 32)
        v = np.ascontiguousarray(vectors, dtype=np.float32)

        def write(tmp: Path) -> None:
            with open(tmp, "wb") as f:
                np.savez(f, keys=k, vectors=v, digest=np.frombuffer(_digest(k, v), dtype=np.uint8))

        atomic_write(self.dir / f"shard-{uuid.uuid4().hex}.npz", write)


def embed_texts(
    texts: Sequence[str],
    embedder: Embedder,
    *,
    cache_dir: str | Path | None,
    chunk_size: int = 512,
    progress: bool = True,
    counts: dict[str, int] | None = None,
    unit: str = "text",
) -> np.ndarray:
    """Embed ``texts`` through the cache: only texts never embedded under this cache key are computed.

    Returns a float32 array ``(len(texts), dim)`` in the order of ``texts``. ``cache_dir=None``
    disables the cache. ``counts``, where given, receives how many distinct texts were embedded
    (``"new"``) and how many came from the cache (``"cached"``). ``unit`` names a text in the
    progress bar (``sentence``, ``report``). With ``progress``, the cache directory is
    named on stderr the first time it holds this embedder's vectors.
    """
    keys = [text_key(t) for t in texts]
    cache = EmbeddingCache(cache_dir, embedder.cache_key) if cache_dir is not None else None
    known: dict[bytes, np.ndarray] = {}
    if cache is not None and any(cache.dir.glob("shard-*.npz")):
        known = cache.load(cache.dim or embedder.dim)
    todo: dict[bytes, str] = {}
    for k, t in zip(keys, texts, strict=True):
        if k not in known and k not in todo:
            todo[k] = t
    if counts is not None:
        counts["new"] = len(todo)
        counts["cached"] = len(set(keys)) - len(todo)
    if todo:
        if cache is not None and progress and not cache.dir.exists():
            _log.info(
                "caching %s embeddings in %s (REPORTFED_EMBEDDINGS_CACHE or --cache-dir to change)",
                embedder.cache_key,
                cache.dir.parent.resolve(),
            )
        pending = list(todo.items())
        with tqdm(
            total=len(pending), desc="embedding", unit=unit, disable=not progress, leave=False
        ) as bar:
            for start in range(0, len(pending), chunk_size):
                chunk = pending[start : start + chunk_size]
                vectors = embedder.embed([t for _, t in chunk])
                if vectors.shape[0] != len(chunk) or not np.isfinite(vectors).all():
                    raise EmbeddingError(
                        f"embedder {embedder.fingerprint} returned {vectors.shape} (non-finite or wrong "
                        f"count) for {len(chunk)} texts"
                    )
                if cache is not None:
                    cache.store([k for k, _ in chunk], vectors)
                known.update({k: v for (k, _), v in zip(chunk, vectors, strict=True)})
                bar.update(len(chunk))
    if not keys:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.stack([known[k] for k in keys]).astype(np.float32, copy=False)
