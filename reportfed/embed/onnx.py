"""A sentence-transformers model in ONNX Runtime, in fp32 or dynamically quantized int8.

The model is exported once into the user cache (:mod:`reportfed.embed.exported`) and, for int8,
quantized there with ``onnxruntime.quantization.quantize_dynamic``, one scale per output channel
of each weight matrix (one per matrix moved MiniLM's vectors to a mean cosine of 0.955 to fp32's;
per channel 0.991, and it runs as fast). fp32 gives torch fp32's vectors (one vector space: the
same fingerprint, another cache key); int8's differ, so int8 is a vector space of its own and a
model trained on fp32 vectors refuses it. ``benchmarks/embedding_backends.py`` measures both.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np

from reportfed.core.errors import ConfigError, EmbeddingError
from reportfed.embed.exported import ExportedEmbedder, build_atomically

OnnxPrecision = Literal["fp32", "int8"]


class OnnxEmbedder(ExportedEmbedder):
    """A sentence-transformers model (default all-MiniLM-L6-v2) run by ONNX Runtime on the CPU."""

    engine = "onnx"

    def __init__(
        self,
        model: str = "all-MiniLM-L6-v2",
        *,
        precision: OnnxPrecision = "fp32",
        batch_size: int = 64,
    ) -> None:
        if precision not in ("fp32", "int8"):
            raise ConfigError(f"the onnx backend runs fp32 or int8, got {precision!r}")
        self.precision = precision
        super().__init__(model, numerics=f"onnx-{precision}", batch_size=batch_size)

    def _suffix(self) -> str:
        return ":int8-per-channel" if self.precision == "int8" else ""

    @cached_property
    def _session(self) -> Any:
        try:
            import onnxruntime
        except ImportError:
            raise EmbeddingError(
                "the onnx backend needs onnxruntime: pip install 'reportfed[onnx]'"
            ) from None
        return self.loaded(
            lambda: onnxruntime.InferenceSession(
                str(self._model_file()), providers=["CPUExecutionProvider"]
            )
        )

    def _model_file(self) -> Path:
        """The ONNX file in this precision, quantized on first use for int8."""
        fp32 = self.exported()
        if self.precision == "fp32":
            return fp32
        int8 = fp32.parent / "model-int8-per-channel.onnx"
        if not int8.is_file():
            from onnxruntime.quantization import QuantType, quantize_dynamic

            build_atomically(
                int8,
                lambda tmp: quantize_dynamic(
                    fp32, tmp, weight_type=QuantType.QInt8, per_channel=True
                ),
                self.engine,
            )
        return int8

    def _hidden(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        wanted = {i.name for i in self._session.get_inputs()}
        (hidden,) = self._session.run(None, {k: v for k, v in feed.items() if k in wanted})
        return hidden
