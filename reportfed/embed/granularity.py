"""What the model reads of a report: one whole-report vector, or one vector per sentence.

* ``"report"`` (the papers' method): ``(n, dim)``, the encoder reads the whole report (at most
  its window, 256 word pieces for MiniLM);
* ``"sentence"`` (the product's default): ``(n, S, dim)``, each report's sentences
  (:func:`reportfed.text.sentences.report_units`) embedded one by one through the cache, padded with
  all-zero rows to the longest report ``S``. The model scores every sentence and pools per label
  (:class:`reportfed.text.model.ReportMLP`), so a negation or a finding late in a long report is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from reportfed.core.config import Granularity
from reportfed.embed.base import Embedder
from reportfed.embed.cache import embed_texts
from reportfed.text.sentences import check_granularity, report_units


def pad_units(vectors: np.ndarray, counts: Sequence[int]) -> np.ndarray:
    """Stack consecutive runs of ``vectors`` (``counts[i]`` rows for report ``i``) into
    ``(len(counts), max(counts), dim)``, zero-padded."""
    out = np.zeros((len(counts), max(counts, default=1), vectors.shape[-1]), dtype=np.float32)
    start = 0
    for i, c in enumerate(counts):
        out[i, :c] = vectors[start : start + c]
        start += c
    return out


def embed_reports(
    texts: Sequence[str],
    embedder: Embedder,
    *,
    granularity: Granularity,
    cache_dir: str | Path | None,
    progress: bool = True,
    counts: dict[str, int] | None = None,
) -> np.ndarray:
    """Embeddings of ``texts`` at ``granularity``: ``(n, dim)`` or ``(n, S, dim)``; ``counts`` as
    in :func:`~reportfed.embed.cache.embed_texts` (texts are sentences at sentence level)."""
    if check_granularity(granularity) == "report":
        return embed_texts(
            texts, embedder, cache_dir=cache_dir, progress=progress, counts=counts, unit="report"
        )
    units = [report_units(t) for t in texts]
    return embed_units(units, embedder, cache_dir=cache_dir, progress=progress, counts=counts)


def embed_units(
    units: Sequence[Sequence[str]],
    embedder: Embedder,
    *,
    cache_dir: str | Path | None,
    progress: bool = True,
    counts: dict[str, int] | None = None,
) -> np.ndarray:
    """Sentence bags ``(len(units), S, dim)`` of reports already split into ``units``
    (:func:`~reportfed.text.sentences.report_units`), as :func:`embed_reports` makes them."""
    flat = [u for us in units for u in us]
    vectors = embed_texts(
        flat, embedder, cache_dir=cache_dir, progress=progress, counts=counts, unit="sentence"
    )
    return pad_units(vectors, [len(us) for us in units])
