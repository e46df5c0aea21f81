"""Hugging Face ``datasets`` as reports tables, in and out (``pip install "reportfed[datasets]"``).

A dataset is read where it lies: a folder written by ``save_to_disk`` (a ``Dataset``, or a
``DatasetDict`` whose split ``--split`` chooses) is memory-mapped as it is; a folder of Arrow or
Parquet shards, or a dataset of the local Hugging Face hub cache (``hf://datasets/OWNER/NAME``),
is prepared once by ``datasets`` (its splits named by the shards' file names, as
``load_dataset`` names them) into :func:`datasets_cache` and memory-mapped from there. Nothing is
ever downloaded: the hub cache is read with ``local_files_only``, and a folder is read as a
folder.

Labels go back as float32 columns, one per finding (null where not mentioned), beside the input's
own columns (:func:`with_states`), written with ``save_to_disk`` all or none
(:func:`save_dataset`).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from reportfed.core.errors import InputFileError, OutputFileError, ReportfedError

if TYPE_CHECKING:
    from datasets import Dataset, DatasetDict

#: how a dataset of the local hub cache is named
HUB = "hf://datasets/"
_REPO = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")
#: the files a ``save_to_disk`` folder holds at its root (a ``DatasetDict``, a ``Dataset``)
_SAVED = ("dataset_dict.json", "state.json")
#: shard files a folder of shards holds
SHARDS = (".arrow", ".parquet")


def is_dataset(path: str | Path) -> bool:
    """Whether ``path`` names a dataset: ``hf://datasets/...``, a ``save_to_disk`` folder or a
    folder holding Arrow or Parquet shards (up to two folders down)."""
    if str(path).startswith(HUB):
        return True
    folder = Path(path)
    if not folder.is_dir():
        return False
    if any((folder / name).is_file() for name in _SAVED):
        return True
    levels = ("*", "*/*", "*/*/*")  # shards, data/train-*.parquet, default/train/*.arrow
    return any(p.is_file() for level in levels for s in SHARDS for p in folder.glob(level + s))


def datasets_cache() -> Path | None:
    """Where ``datasets`` prepares shards it reads: the user's own setting (``HF_DATASETS_CACHE``
    or ``HF_HOME``) where there is one (``None``: ``datasets`` decides), else ``datasets`` in
    reportfed's user cache, never ``~/.cache/huggingface`` unasked."""
    from reportfed.core.environment import setting
    from reportfed.core.paths import cache_dir

    if setting("HF_DATASETS_CACHE") or setting("HF_HOME"):
        return None
    return cache_dir() / "datasets"


def _library() -> Any:
    """The ``datasets`` module, or an error saying how to install it."""
    try:
        import datasets
    except ImportError:
        raise ReportfedError(
            'Hugging Face datasets are read with the datasets package: pip install "reportfed[datasets]"'
        ) from None
    return datasets


def load(path: str | Path) -> Dataset | DatasetDict:
    """The dataset ``path`` names (:func:`is_dataset`), memory-mapped; an
    :class:`InputFileError` where it cannot be read."""
    datasets = _library()
    folder = _hub_snapshot(str(path)) if str(path).startswith(HUB) else Path(path)
    try:
        if any((folder / name).is_file() for name in _SAVED):
            return datasets.load_from_disk(str(folder))
        cache = datasets_cache()
        return datasets.load_dataset(str(folder), cache_dir=str(cache) if cache else None)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise InputFileError(f"{path}: cannot read as a Hugging Face dataset ({exc})") from None
    except Exception as exc:  # datasets and pyarrow raise their own types for a bad dataset
        raise InputFileError(
            f"{path}: cannot read as a Hugging Face dataset ({type(exc).__name__}: {exc})"
        ) from None


def _hub_snapshot(name: str) -> Path:
    """The folder of ``hf://datasets/OWNER/NAME`` in the local hub cache, never downloaded."""
    repo = name[len(HUB) :].strip("/")
    if not _REPO.match(repo):
        raise InputFileError(f"{name}: a hub dataset is named hf://datasets/OWNER/NAME")
    _library()
    from huggingface_hub import snapshot_download
    from huggingface_hub.constants import HF_HUB_CACHE

    try:
        return Path(snapshot_download(repo, repo_type="dataset", local_files_only=True))
    except Exception:  # LocalEntryNotFoundError, or an offline error of another version
        raise InputFileError(
            f"{name}: not in the local Hugging Face hub cache ({HF_HUB_CACHE}); reportfed never "
            f"downloads a dataset: fetch it first (hf download --repo-type dataset {repo}), or "
            "give the folder it was saved to"
        ) from None


def splits(loaded: Dataset | DatasetDict) -> list[str | None]:
    """The split names of ``loaded`` (``[None]``: one dataset without splits)."""
    return list(loaded) if is_dict(loaded) else [None]


def choose_split(loaded: Dataset | DatasetDict, path: str | Path, split: str | None) -> Dataset:
    """The dataset ``--split`` chooses of ``loaded`` (read from ``path``): a split by name, the
    only split where there is one, the dataset itself where it has no splits."""
    if not is_dict(loaded):
        if split is not None:
            raise InputFileError(f"{path}: one dataset without splits; leave out --split")
        return loaded
    if split is None:
        if len(loaded) == 1:
            return next(iter(loaded.values()))
        raise InputFileError(f"{path}: a dataset with splits {list(loaded)}: choose one (--split)")
    if split not in loaded:
        raise InputFileError(f"{path}: no split {split!r}; its splits are {list(loaded)}")
    return loaded[split]


def is_dict(loaded: Any) -> bool:
    """Whether ``loaded`` is a dataset of splits (a ``DatasetDict`` or
    ``IterableDatasetDict``)."""
    from datasets import DatasetDict, IterableDatasetDict

    return isinstance(loaded, DatasetDict | IterableDatasetDict)


def string_columns(ds: Dataset) -> list[str]:
    """The columns of ``ds`` that hold text."""
    from datasets import Value

    return [n for n, f in ds.features.items() if isinstance(f, Value) and f.dtype in _STRINGS]


_STRINGS = ("string", "large_string")


def batches(ds: Dataset, columns: Sequence[str], rows: int) -> Iterator[dict[str, list[Any]]]:
    """``columns`` of ``ds``, ``rows`` rows at a time, read from its memory-mapped files."""
    return ds.select_columns(list(columns)).iter(batch_size=rows)


def state_columns(names: Sequence[str], states: np.ndarray) -> Dataset:
    """One float32 column per finding of ``names`` holding four-state ``states`` (NaN, not
    mentioned, is null), as a dataset with the finding names in its features."""
    from datasets import Dataset
    from datasets.table import InMemoryTable

    return Dataset(InMemoryTable(_state_table(names, states)), info=_info(label_features(names)))


def label_features(names: Sequence[str]) -> Any:
    """The ``datasets`` features of label columns ``names``: float32 each (null: not
    mentioned)."""
    from datasets import Features, Value

    return Features({n: Value("float32") for n in names})


def _state_table(names: Sequence[str], states: np.ndarray) -> Any:
    """Four-state ``states`` as an Arrow table, a float32 column per finding, NaN as null."""
    import pyarrow as pa

    return pa.table(
        {n: pa.array(states[:, i], pa.float32(), from_pandas=True) for i, n in enumerate(names)}
    )


def _info(features: Any) -> Any:
    from datasets import DatasetInfo

    return DatasetInfo(
        description="Four-state labels (1 positive, 0 negated, -1 uncertain, null not "
        "mentioned) written by reportfed",
        features=features,
    )


def with_states(ds: Dataset, names: Sequence[str], states: np.ndarray) -> Dataset:
    """``ds`` with one label column per finding of ``names`` after its own (``states``: a row
    per row of ``ds``); an error where ``ds`` has a column of a finding's name already."""
    from datasets import concatenate_datasets

    check_columns_free(ds, names)
    return concatenate_datasets([ds, state_columns(names, states)], axis=1)


def check_columns_free(ds: Dataset, names: Sequence[str]) -> None:
    """An error where ``ds`` has a column named as one of the label columns ``names``."""
    clash = [n for n in names if n in (ds.column_names or ())]
    if clash:
        raise ReportfedError(
            f"the dataset has columns named as the model's findings ({', '.join(clash[:3])}"
            f"{', ...' if len(clash) > 3 else ''}): put the label columns under a prefix "
            "(--prefix, prefix=)"
        )


def save_dataset(dataset: Dataset | DatasetDict, out: str | Path) -> Path:
    """Write ``dataset`` with ``save_to_disk`` to the folder ``out``, all or none: it is written
    beside ``out`` and moved there once whole; a dataset already at ``out`` is replaced."""
    out = Path(out)
    check_dataset_folder(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    old = staging.with_name(staging.name + ".old")
    try:
        dataset.save_to_disk(str(staging / "dataset"))
        if out.exists():
            os.replace(out, old)
        os.replace(staging / "dataset", out)
    except OSError as exc:
        if old.exists() and not out.exists():
            os.replace(old, out)
        raise OutputFileError(f"{out}: cannot write the dataset ({exc.strerror or exc})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return out


def check_dataset_folder(out: Path) -> None:
    """``out`` as a folder :func:`save_dataset` may write: new, or a dataset it replaces (never
    another folder or a file)."""
    if out.is_file() or out.is_symlink():
        raise OutputFileError(f"{out}: is a file; a dataset is written to a folder")
    if out.is_dir() and any(out.iterdir()) and not any((out / n).is_file() for n in _SAVED):
        raise OutputFileError(
            f"{out}: is a folder that holds no dataset; reportfed replaces only a dataset"
        )
    parent = next((p for p in out.parents if p.exists()), Path("."))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputFileError(f"{out}: no permission to write in {parent}")


def labelled(
    reader: Any, dataset: Any, text_column: str | None, prefix: str, num_proc: int | None,
    batch_size: int,
) -> Any:  # fmt: skip
    """:meth:`reportfed.reader.ReportReader.label_dataset` of one ``Dataset`` or
    ``IterableDataset`` (each split of a dict is labelled apart)."""
    datasets = _library()
    from reportfed.data.table import dataset_text_column

    if not isinstance(dataset, datasets.Dataset | datasets.IterableDataset):
        raise ReportfedError(
            "label_dataset labels a datasets.Dataset, IterableDataset, DatasetDict or "
            f"IterableDatasetDict, not a {type(dataset).__name__}"
        )
    column = dataset_text_column("the dataset", dataset, text_column)
    names = [prefix + n for n in reader.classes_]
    check_columns_free(dataset, names)
    features = label_features(names)
    labelling = _Labelling(reader, names)
    if isinstance(dataset, datasets.IterableDataset):  # streamed: labelled as it is read
        return dataset.map(
            labelling,
            batched=True,
            batch_size=batch_size,
            input_columns=[column],
            features=datasets.Features({**dataset.features, **features}),
        )
    labels = dataset.map(
        labelling,
        batched=True,
        batch_size=batch_size,
        input_columns=[column],
        remove_columns=dataset.column_names,
        features=features,
        keep_in_memory=True,  # never a cache file beside the user's dataset
        num_proc=num_proc,
        desc="labelling",
    )
    return datasets.concatenate_datasets([dataset, labels], axis=1)


class _Labelling:
    """The function ``map`` runs on a batch of reports: their four states, one column per
    finding of ``names``, ``None`` where not mentioned (and for a report without a word, which
    tables skip). It pickles small (the labeler's weights), and each process loads the
    embedder once, on its first batch."""

    def __init__(self, reader: Any, names: Sequence[str]) -> None:
        self.reader, self.names = reader, list(names)

    def __call__(self, reports: list[Any]) -> dict[str, list[float | None]]:
        from reportfed.data.table import report_text

        texts = [report_text(t) for t in reports]
        kept = [i for i, t in enumerate(texts) if t]
        states = np.full((len(texts), len(self.names)), np.nan, np.float32)
        if kept:
            states[kept] = self.reader.predict_states([texts[i] for i in kept])
        cells = states.astype(object)
        cells[np.isnan(states)] = None
        return {n: cells[:, i].tolist() for i, n in enumerate(self.names)}


class SplitWriter:
    """A ``DatasetDict`` written a frame at a time: each split's rows go to an Arrow file of
    their own in a scratch folder beside ``out`` as they come (flat memory), and leaving the
    ``with`` block saves them to ``out`` (:func:`save_dataset`) or, on an error, writes
    nothing. ``labels``' columns are float32 (null: blank), every other column text; the
    splits are ``splits``, in that order, each written even where no row came."""

    def __init__(self, out: str | Path, splits: Sequence[str], labels: Sequence[str]) -> None:
        self.out, self.splits, self.labels = Path(out), list(splits), list(labels)
        check_dataset_folder(self.out)
        self._writers: dict[str, Any] = {}
        self._features: Any = None
        self._scratch: Path | None = None

    def __enter__(self) -> SplitWriter:
        _library()
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self._scratch = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.", dir=self.out.parent))
        return self

    def append(self, split: str, frame: Any) -> None:
        """Add ``frame``'s rows (a ``pandas.DataFrame``, the columns of the first) to ``split``."""
        import pyarrow as pa
        from datasets import Features, Value
        from datasets.arrow_writer import ArrowWriter

        if self._features is None:
            self._features = Features(
                {c: Value("float32" if c in self.labels else "string") for c in frame.columns}
            )
        if split not in self._writers:
            assert self._scratch is not None
            path = self._scratch / f"{split}.arrow"
            self._writers[split] = ArrowWriter(features=self._features, path=str(path))
        table = pa.Table.from_pandas(
            frame.astype({c: object for c in frame.columns if c not in self.labels}),
            schema=self._features.arrow_schema,
            preserve_index=False,
        )
        self._writers[split].write_table(table)

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        from datasets import Dataset, DatasetDict

        try:
            for writer in self._writers.values():
                writer.finalize()
                writer.close()
            if kind is None:
                assert self._scratch is not None and self._features is not None
                parts = {
                    s: Dataset.from_file(str(self._scratch / f"{s}.arrow"))
                    if s in self._writers
                    else Dataset.from_dict({c: [] for c in self._features}, self._features)
                    for s in self.splits
                }
                save_dataset(DatasetDict(parts), self.out)
        finally:
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)
