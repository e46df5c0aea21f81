"""A sentence-transformers model in ONNX Runtime, in fp32 or dynamically quantized int8.

sentence-transformers' own ONNX backend needs ``optimum``, which does not import with the
transformers reportfed installs; so the transformer is exported here with ``torch.onnx.export``
from the same local weights, once, into the user cache (``onnx/`` in :func:`cache_dir`), and
quantized there with ``onnxruntime.quantization.quantize_dynamic`` for int8. Tokenizing, mean
pooling and normalising follow the model's sentence-transformers modules, which must be a
transformer, mean pooling and (optionally) normalisation, as all-MiniLM-L6-v2's are.

fp32 gives torch fp32's vectors (one vector space: the same fingerprint, another cache key);
int8's differ (cosine ~0.95 to fp32), so int8 is a vector space of its own and a model trained on
fp32 vectors refuses it. ``benchmarks/embedding_backends.py`` measures both.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np

from reportfed.core.errors import ConfigError, EmbeddingError
from reportfed.core.paths import cache_dir
from reportfed.embed.local import LocalEmbedder, quiet_transformers

OnnxPrecision = Literal["fp32", "int8"]
#: the sentence-transformers modules this backend reproduces, in order
_PIPELINE = ("Transformer", "Pooling", "Normalize")
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class OnnxEmbedder(LocalEmbedder):
    """A sentence-transformers model (default all-MiniLM-L6-v2) run by ONNX Runtime on the CPU."""

    kind = "st"

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
        super().__init__(model, numerics=f"onnx-{precision}", batch_size=batch_size, device="cpu")
        self._modules = _check_pipeline(Path(self.path))

    def _suffix(self) -> str:
        return ":int8" if self.precision == "int8" else ""

    @cached_property
    def dim(self) -> int:
        pooling = json.loads((Path(self.path) / "1_Pooling" / "config.json").read_text())
        return int(pooling["word_embedding_dimension"])

    @cached_property
    def _max_length(self) -> int:
        config = Path(self.path) / "sentence_bert_config.json"
        return int(json.loads(config.read_text()).get("max_seq_length", 256))

    @cached_property
    def _tokenizer(self) -> Any:
        from transformers import AutoTokenizer

        quiet_transformers()
        return AutoTokenizer.from_pretrained(self.path)

    @cached_property
    def _session(self) -> Any:
        try:
            import onnxruntime
        except ImportError:
            raise EmbeddingError(
                "the onnx backend needs onnxruntime and onnx: pip install 'reportfed[onnx]'"
            ) from None
        return onnxruntime.InferenceSession(
            str(self._exported()), providers=["CPUExecutionProvider"]
        )

    def _exported(self) -> Path:
        """The model's ONNX file in this precision, exported (and quantized) on first use."""
        folder = cache_dir() / "onnx" / self.fingerprint.split(":")[2]
        fp32 = folder / "model-fp32.onnx"
        if not fp32.is_file():
            print(
                f"reportfed: exporting {self.model_name} to ONNX in {folder} (once)",
                file=sys.stderr,
            )
            _atomically(fp32, lambda tmp: _export(self.path, tmp))
        if self.precision == "fp32":
            return fp32
        int8 = folder / "model-int8.onnx"
        if not int8.is_file():
            from onnxruntime.quantization import QuantType, quantize_dynamic

            _atomically(int8, lambda tmp: quantize_dynamic(fp32, tmp, weight_type=QuantType.QInt8))
        return int8

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        session = self._session
        wanted = {i.name for i in session.get_inputs()}
        order = np.argsort([len(t) for t in texts], kind="stable")  # similar lengths, less padding
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            idx = order[start : start + self.batch_size]
            batch = self._tokenizer(
                [texts[i] for i in idx],
                padding=True,
                truncation=True,
                max_length=self._max_length,
                return_tensors="np",
            )
            feed = {k: v.astype(np.int64) for k, v in batch.items() if k in wanted}
            (hidden,) = session.run(None, feed)
            mask = batch["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(1) / np.clip(mask.sum(1), 1.0, None)
            if "Normalize" in self._modules:
                pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            out[idx] = pooled
        return out


def _check_pipeline(path: Path) -> tuple[str, ...]:
    """The model's sentence-transformers module names, if this backend reproduces them."""
    try:
        modules = json.loads((path / "modules.json").read_text())
        names = tuple(m["type"].rsplit(".", 1)[-1] for m in modules)
        pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"the onnx backend needs a sentence-transformers model: {exc}") from None
    if names not in (_PIPELINE, _PIPELINE[:2]) or not pooling.get("pooling_mode_mean_tokens"):
        raise ConfigError(
            f"the onnx backend runs a transformer, mean pooling and normalisation; {path} has "
            f"{list(names)}: use the torch backend"
        )
    return names


def _export(model_path: str, out: Path) -> None:
    """Export the transformer of ``model_path`` (token ids -> last hidden states) to ``out``."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    quiet_transformers()
    model = AutoModel.from_pretrained(model_path, dtype=torch.float32).eval()
    example = AutoTokenizer.from_pretrained(model_path)(["a chest radiograph"], return_tensors="pt")
    names = [n for n in _INPUTS if n in example]

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.model(**dict(zip(names, inputs, strict=True))).last_hidden_state

    axes = {n: {0: "batch", 1: "tokens"} for n in [*names, "hidden"]}
    with torch.inference_mode(False), torch.no_grad():
        torch.onnx.export(
            Hidden(),
            tuple(example[n] for n in names),
            str(out),
            input_names=names,
            output_names=["hidden"],
            dynamic_axes=axes,
            dynamo=False,
        )


def _atomically(path: Path, write: Any) -> None:
    """Run ``write(tmp)`` into a temporary file beside ``path``, then move it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".onnx.part")
    os.close(fd)
    try:
        # the exporter's tracer warnings and the quantizer's advice are not the user's to act on
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.disable(logging.WARNING)
            write(Path(tmp))
        os.replace(tmp, path)
    except Exception as exc:
        Path(tmp).unlink(missing_ok=True)
        raise EmbeddingError(f"cannot build the onnx model {path}: {exc}") from None
    finally:
        logging.disable(logging.NOTSET)
