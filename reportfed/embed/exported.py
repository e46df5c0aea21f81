"""A sentence-transformers model exported once to ONNX and run by an inference engine on the CPU.

sentence-transformers' own ONNX and OpenVINO backends need ``optimum``, which does not import with
the transformers reportfed installs; so the transformer is exported here with
``torch.onnx.export`` from the same local weights, once, into the user cache (``onnx/`` in
:func:`cache_dir`). Tokenizing, mean pooling and normalising follow the model's
sentence-transformers modules, which must be a transformer with a fast tokenizer
(``tokenizer.json``), mean pooling and (optionally) normalisation, as all-MiniLM-L6-v2's are. :mod:`reportfed.embed.onnx` (ONNX Runtime) and
:mod:`reportfed.embed.openvino` (OpenVINO) run the exported file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from reportfed.core.errors import ConfigError, EmbeddingError, warn
from reportfed.core.paths import cache_dir
from reportfed.embed.base import LocalEmbedder, quiet_transformers

_log = logging.getLogger(__name__)

T = TypeVar("T")

#: the sentence-transformers modules an exported model reproduces, in order
_PIPELINE = ("Transformer", "Pooling", "Normalize")
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class ExportedEmbedder(LocalEmbedder):
    """What the engines that run the exported transformer share: tokenizing, pooling, the file.

    Subclasses name the engine (:attr:`engine`) and run a batch of token ids (:meth:`_hidden`),
    or run :meth:`_batches` their own way in :meth:`embed` (OpenVINO, several at once)."""

    kind = "st"
    engine = ""

    def __init__(self, model: str, *, numerics: str, batch_size: int) -> None:
        super().__init__(model, numerics=numerics, batch_size=batch_size, device="cpu")
        self._modules = exportable_modules(Path(self.path))

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
        """The model's fast tokenizer (``tokenizer.json``) read by ``tokenizers`` itself, which
        loads in milliseconds where transformers' ``AutoTokenizer`` takes seconds; truncation
        and padding as sentence-transformers sets them (the file's own are the hub export's)."""
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(Path(self.path) / "tokenizer.json"))
        config = json.loads((Path(self.path) / "tokenizer_config.json").read_text())
        pad = config.get("pad_token", "[PAD]")
        pad = pad["content"] if isinstance(pad, dict) else pad
        tokenizer.enable_truncation(self._max_length)
        tokenizer.enable_padding(pad_id=tokenizer.token_to_id(pad), pad_token=pad)
        return tokenizer

    def tokenize(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Token ids, attention mask and token types of ``texts``, padded to the longest."""
        encodings = self._tokenizer.encode_batch(list(texts))
        return {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }

    def _hidden(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        """The transformer's last hidden states for one batch of int64 token ids."""
        raise NotImplementedError

    def _folder(self) -> Path:
        return cache_dir() / "onnx" / self.fingerprint.split(":")[2]

    def exported(self) -> Path:
        """The model's fp32 ONNX file, exported on first use."""
        fp32 = self._folder() / "model-fp32.onnx"
        if not fp32.is_file():
            _log.info("exporting %s to ONNX in %s (once)", self.model_name, fp32.parent)
            build_atomically(fp32, lambda tmp: _export(self.path, tmp), self.engine)
        return fp32

    def loaded(self, load: Callable[[], T]) -> T:
        """``load()`` of the files built in :meth:`_folder`; where they cannot be read (a
        truncated or emptied export), the folder is a cache: it is built anew once, with a
        warning naming it, and loaded again. A second failure is an :class:`EmbeddingError`."""
        try:
            return load()
        except Exception as exc:
            folder = self._folder()
            reason = " ".join(str(exc).split())[-300:] or type(exc).__name__
            warn(
                f"the {self.engine} model in {folder} cannot be read ({reason}): it is a cache, "
                "building it anew"
            )
            shutil.rmtree(folder, ignore_errors=True)
        try:
            return load()
        except EmbeddingError:
            raise
        except Exception as exc:
            reason = " ".join(str(exc).split())[-300:] or type(exc).__name__
            raise EmbeddingError(
                f"the {self.engine} model in {self._folder()} cannot be read even when built "
                f"anew: {reason}"
            ) from None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for idx, batch in self._batches(texts):
            out[idx] = self._pool(batch["attention_mask"], self._hidden(batch))
        return out

    def _batches(self, texts: Sequence[str]) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
        """The positions and tokens of ``batch_size`` texts at a time, in order of length (similar
        lengths, less padding)."""
        order = np.argsort([len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), self.batch_size):
            idx = order[start : start + self.batch_size]
            yield idx, self.tokenize([texts[i] for i in idx])

    def _pool(self, attention_mask: np.ndarray, hidden: np.ndarray) -> np.ndarray:
        """Sentence vectors from a batch's last hidden states: the mean over its tokens, then
        normalised where the model's pipeline normalises."""
        mask = attention_mask[..., None].astype(np.float32)
        pooled = (hidden * mask).sum(1) / np.clip(mask.sum(1), 1.0, None)
        if "Normalize" in self._modules:
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return pooled


def exportable_modules(path: Path) -> tuple[str, ...]:
    """The model's sentence-transformers module names, if an exported model reproduces them."""
    try:
        modules = json.loads((path / "modules.json").read_text())
        names = tuple(m["type"].rsplit(".", 1)[-1] for m in modules)
        pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
        (path / "tokenizer.json").stat()  # a fast tokenizer
        (path / "tokenizer_config.json").stat()
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(
            f"an exported backend needs a sentence-transformers model: {exc}"
        ) from None
    if names not in (_PIPELINE, _PIPELINE[:2]) or not pooling.get("pooling_mode_mean_tokens"):
        raise ConfigError(
            f"an exported backend runs a transformer, mean pooling and normalisation; {path} has "
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


def build_atomically(path: Path, write: Callable[[Path], Any], engine: str) -> None:
    """Run ``write(tmp)`` into a temporary file beside ``path``, then move it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=f"{path.suffix}.part")
    os.close(fd)
    try:
        # the exporter's tracer warnings and the quantizer's advice are not the user's to act on
        with warnings.catch_warnings(), _quiet_exporters():
            warnings.simplefilter("ignore")
            write(Path(tmp))
        os.replace(tmp, path)
    except Exception as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, ModuleNotFoundError):
            raise EmbeddingError(
                f"the {engine} backend exports the model with the onnx package, which reportfed "
                f"installs: pip install onnx ({exc})"
            ) from None
        raise EmbeddingError(f"cannot build the {engine} model {path}: {exc}") from None


#: the libraries that log while a model is exported or quantized (ONNX Runtime's quantizer logs
#: on the root logger itself)
_EXPORTERS = ("torch", "onnx", "onnxruntime")


def _below_error(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR


@contextlib.contextmanager
def _quiet_exporters() -> Iterator[None]:
    """While a model is exported, the exporters' loggers say errors only, and a record logged on
    the root logger itself below ERROR is dropped; each logger's own level is restored after,
    and no other logger (the application's) is touched."""
    loggers = [logging.getLogger(name) for name in _EXPORTERS]
    levels = [logger.level for logger in loggers]
    root = logging.getLogger()
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    root.addFilter(_below_error)
    try:
        yield
    finally:
        root.removeFilter(_below_error)
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
