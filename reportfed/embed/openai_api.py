"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint, through the ``openai`` client."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from reportfed.core.errors import EmbeddingError

DEFAULT_MODEL = "text-embedding-3-small"


class OpenAIEmbedder:
    """OpenAI-compatible embeddings API.

    Parameters
    ----------
    model:
        Model name sent to the API.
    base_url:
        API base URL (``$OPENAI_BASE_URL`` or OpenAI's by default), e.g. ``http://127.0.0.1:8080/v1``.
    api_key:
        Key (``$OPENAI_API_KEY`` by default; a placeholder is sent to servers that need none).
    batch_size:
        Texts per request.
    max_retries:
        Retries with exponential backoff on connection errors, 408, 409, 429 and 5xx (the client's
        own policy). Other 4xx answers raise :class:`EmbeddingError` at once.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        batch_size: int = 128,
        max_retries: int = 4,
        timeout: float = 60.0,
    ) -> None:
        try:
            import openai
        except ImportError:
            raise EmbeddingError(
                "openai:MODEL embeddings need the openai client: pip install 'reportfed[api]'"
            ) from None

        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        self.batch_size = batch_size
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "unused",
            max_retries=max_retries,
            timeout=timeout,
        )
        self._dim: int | None = None

    @property
    def fingerprint(self) -> str:
        return f"openai:{self.base_url.rstrip('/')}:{self.model}"

    @property
    def cache_key(self) -> str:
        return self.fingerprint

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self._request(["dimension probe"]).shape[1])
        return self._dim

    def _request(self, texts: list[str]) -> np.ndarray:
        import openai

        try:
            resp = self._client.embeddings.create(model=self.model, input=texts)
        except openai.APIStatusError as exc:
            raise EmbeddingError(
                f"embeddings API {self.base_url} answered HTTP {exc.status_code} for model "
                f"{self.model!r}: {exc.message}"
            ) from None
        except openai.APIConnectionError as exc:
            raise EmbeddingError(f"cannot reach embeddings API {self.base_url}: {exc}") from None
        rows = sorted(resp.data, key=lambda d: d.index)
        if len(rows) != len(texts):
            raise EmbeddingError(
                f"embeddings API returned {len(rows)} vectors for {len(texts)} texts"
            )
        return np.asarray([r.embedding for r in rows], dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        parts = [
            self._request(list(texts[i : i + self.batch_size]))
            for i in range(0, len(texts), self.batch_size)
        ]
        out = np.concatenate(parts) if parts else np.zeros((0, self.dim), dtype=np.float32)
        if self._dim is None and len(out):
            self._dim = out.shape[1]
        return out
