"""A sentence-transformers model in OpenVINO, in bf16 where the CPU multiplies bf16 natively and
fp32 elsewhere. In bf16 it is the fastest backend measured and the closest to fp32, and ``auto``'s
choice on such a CPU (``benchmarks/embedding_backends.py``).

OpenVINO reads the ONNX file exported once into the user cache (:mod:`reportfed.embed.exported`)
with its runtime alone, and keeps the model it compiles for the CPU in its own cache beside it.
``openvino.convert_model``, which would trace torch directly, reports usage to its makers unless
the user has opted out, and a hospital's labeller must not.
Both precisions give torch fp32's vector space (cosine >= 0.9999): the same fingerprint as
torch's, another cache key.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

import numpy as np

from reportfed.core.errors import ConfigError, EmbeddingError
from reportfed.core.telemetry import import_openvino
from reportfed.embed.exported import ExportedEmbedder
from reportfed.embed.precision import Precision, native_bf16, precision_for

#: OpenVINO's name of each precision (its ``INFERENCE_PRECISION_HINT``)
_HINTS = {"fp32": "f32", "bf16": "bf16"}


class OpenVinoEmbedder(ExportedEmbedder):
    """A sentence-transformers model (default all-MiniLM-L6-v2) run by OpenVINO on the CPU."""

    engine = "openvino"

    def __init__(
        self,
        model: str = "all-MiniLM-L6-v2",
        *,
        precision: Precision = "auto",
        batch_size: int = 64,
    ) -> None:
        self.precision = precision_for(precision, "cpu")
        if self.precision == "bf16" and not native_bf16("cpu"):
            raise ConfigError(
                "the openvino backend runs bf16 only on a CPU that multiplies bf16 natively "
                "(AVX512-BF16 or AMX); use --precision fp32 or auto, or --backend torch"
            )
        super().__init__(model, numerics=f"openvino-{self.precision}", batch_size=batch_size)

    @cached_property
    def _compiled(self) -> Any:
        try:
            openvino = import_openvino()
        except ImportError:
            raise EmbeddingError(
                "the openvino backend needs openvino, which reportfed installs: pip install openvino"
            ) from None
        core = openvino.Core()

        def compile_exported() -> Any:
            exported = self.exported()
            # compiled for this CPU once, then loaded from OpenVINO's own cache beside the export
            # in a fifth of the time (0.2 s against 0.7 s of every start)
            settings = {
                "INFERENCE_PRECISION_HINT": _HINTS[self.precision],
                "CACHE_DIR": str(exported.parent / "openvino"),
                # batches run side by side, a core or two each (:meth:`embed`), instead of one
                # batch at a time over every core, whose short sentences leave the cores waiting
                # on each other: the throughput hint, measured in benchmarks/embedding_backends.py
                "PERFORMANCE_HINT": "THROUGHPUT",
            }
            return core.compile_model(str(exported), "CPU", settings)

        return self.loaded(compile_exported)

    @cached_property
    def _requests(self) -> list[Any]:
        """The infer requests batches run on, as many as OpenVINO finds best for this CPU (made
        once: the model is only ever run through them)."""
        compiled = self._compiled
        count = int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        return [compiled.create_infer_request() for _ in range(max(count, 1))]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts``: batches in flight at once on OpenVINO's infer requests (as many
        as it finds best for this CPU), each pooled once its request is needed again."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        wanted = {port.any_name for port in self._compiled.inputs}
        requests = self._requests
        pending: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(requests)

        def collect(k: int) -> None:
            job = pending[k]
            if job is not None:
                requests[k].wait()
                out[job[0]] = self._pool(job[1], requests[k].get_output_tensor(0).data)
                pending[k] = None

        for n, (idx, batch) in enumerate(self._batches(texts)):
            k = n % len(requests)
            collect(k)  # its last batch, before the request takes the next
            requests[k].start_async({key: v for key, v in batch.items() if key in wanted})
            pending[k] = (idx, batch["attention_mask"])
        for k in range(len(requests)):
            collect(k)
        return out
