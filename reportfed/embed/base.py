"""The :class:`Embedder` protocol shared by every embedding backend, and what the backends that run
weights on this machine share (:class:`LocalEmbedder`)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from reportfed.core.errors import EmbeddingError
from reportfed.embed.weights import canonical_model_name, local_fingerprint, resolve_model_path


def cached_model_path(model: str) -> str:
    """The folder of hub model ``model`` in this machine's Hugging Face cache, found without
    any request (the hub library's own loaders, even told to stay local, ask the hub for a list
    of AI agents while they build their request headers); an :class:`EmbeddingError` where it
    is not there."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return str(snapshot_download(model, local_files_only=True))
    except (LocalEntryNotFoundError, ValueError):
        raise EmbeddingError(
            f"{model!r} is neither a folder on this machine nor in its Hugging Face cache, and "
            "this node downloads weights only when started with --allow-remote-embedder"
        ) from None


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


def quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


class LocalEmbedder:
    """What the local backends share: a model path, precision, batch size, device, fingerprint.

    The fingerprint names the vector space (model, weights, settings that change the vectors);
    fp32 and bf16 vectors of the same weights, from any fp32 or bf16 backend, are one space
    (cosine >= 0.996), so a model trained on either machine runs on the other. The cache key adds
    how they were computed (:attr:`numerics`): cached vectors of one way are never served for
    another."""

    kind = ""

    def __init__(
        self, model: str, *, numerics: str, batch_size: int, device: str, local_only: bool = False
    ) -> None:
        self.device = device
        self.numerics = numerics  #: how the vectors are computed (e.g. fp32, bf16, onnx-int8)
        self.model_name = canonical_model_name(model)
        self.path = resolve_model_path(model)
        self.batch_size = batch_size
        #: load the weights from this machine's files and cache alone, never from the hub
        self.local_only = local_only
        if local_only and not Path(self.path).is_dir():
            self.path = cached_model_path(self.path)

    @cached_property
    def fingerprint(self) -> str:
        return local_fingerprint(self.kind, self.model_name, self.path, self._suffix())

    @property
    def cache_key(self) -> str:
        return f"{self.fingerprint}:{self.numerics}"

    def _suffix(self) -> str:
        """Settings beyond the weights that change the vectors."""
        return ""
