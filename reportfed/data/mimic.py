"""MIMIC-CXR (credentialed: bring your own copy): its reports and their CheXpert or NegBio labels,
read from PhysioNet's published layout as a stream.

A root folder holds, itself or in the folders up to two levels below it (MIMIC-CXR and
MIMIC-CXR-JPG side by side, as PhysioNet's downloads unpack):

* the reports, ``files/pNN/pNNNNNNNN/sNNNNNNNN.txt`` (MIMIC-CXR), or ``mimic-cxr-reports.zip``
  holding that tree, read without unpacking;
* the labels, ``mimic-cxr-2.0.0-chexpert.csv.gz`` or ``mimic-cxr-2.0.0-negbio.csv.gz``
  (MIMIC-CXR-JPG): ``subject_id, study_id`` and the 14 CheXpert columns in the four states
  (1.0, 0.0, -1.0, blank);
* the official split, ``mimic-cxr-2.0.0-split.csv.gz``: ``dicom_id, study_id, subject_id,
  split``, one row per image; a study is in the split of its images.

The labels were read from one section of each report, as the MIMIC-CXR authors' section parser
chooses it (``txt/section_parser.py`` and ``create_section_files.py`` in the MIT-LCP/mimic-cxr
repository, described in Johnson et al., *MIMIC-CXR, a de-identified publicly available database
of chest radiographs with free-text reports*, Scientific Data 2019): the impression, else the
findings, else the report's last paragraph (:func:`section_text`, ``sections="labelled"``).
``"findings-impression"`` keeps both sections under their headers (as IU's text is built) and
``"report"`` the whole report, for reportfed's own section scope to read.
"""

from __future__ import annotations

import gzip
import os
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from reportfed.core.config import Blank, Uncertain
from reportfed.core.errors import InputFileError
from reportfed.core.labels import CHEXPERT_14, LabelSpace
from reportfed.data.table import ReportTable, training_labels

Labeler = Literal["chexpert", "negbio"]
Sections = Literal["labelled", "findings-impression", "report"]
Split = Literal["train", "validate", "test"]
LABELERS: tuple[Labeler, ...] = ("chexpert", "negbio")
SECTIONS: tuple[Sections, ...] = ("labelled", "findings-impression", "report")
SPLITS: tuple[Split, ...] = ("train", "validate", "test")
REPORTS_ZIP = "mimic-cxr-reports.zip"
LABEL_FILES: dict[Labeler, str] = {
    "chexpert": "mimic-cxr-2.0.0-chexpert.csv.gz",
    "negbio": "mimic-cxr-2.0.0-negbio.csv.gz",
}
SPLIT_FILE = "mimic-cxr-2.0.0-split.csv.gz"
#: a file at a root that says it is a stand-in in MIMIC-CXR's layout, not MIMIC-CXR (the one
#: tests/data/make_mimic_fixture.py writes): what is measured on it says so
STAND_IN = "STAND-IN.txt"
#: rows of a label or split file read at once
CHUNK = 50_000
#: bytes of the largest report file read (MIMIC-CXR's reports are a few kilobytes; its largest,
#: about 20): a larger one is left out, counted and named, never read whole
MAX_REPORT_BYTES = 1 << 20

#: a section header: capitals (and spaces, slashes, brackets) then a colon, starting a line
_HEADER = re.compile(r"^[ \t]*([A-Z][A-Z ()/,&-]*[A-Z)])[ \t]*:", re.MULTILINE)
#: a report's path inside the tree or the zip: the patient's folders and the study's file
_REPORT_PATH = re.compile(r"(?:^|/)p\d\d/p(\d+)/s(\d+)\.txt$")
#: the header names that mean the impression, and those that mean the findings (lower case)
_IMPRESSION = re.compile(r"impression|conclusion|summary|opinion")
_FINDINGS = re.compile(r"findings?|observations?")


def report_sections(text: str) -> dict[str, str]:
    """A report's sections by normalised name, the text under each with its whitespace
    collapsed: ``impression`` (also "IMPRESSIONS", "CONCLUSION", "FINDINGS AND IMPRESSION"),
    ``findings`` ("FINDING", "OBSERVATIONS"), the other headers in lower case, ``preamble``
    before the first header and ``last_paragraph``, the report's last paragraph without its
    header. A name that comes twice keeps its last text."""
    out: dict[str, str] = {}
    marks = list(_HEADER.finditer(text))
    out["preamble"] = " ".join(text[: marks[0].start() if marks else len(text)].split())
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        name = " ".join(mark.group(1).lower().split())
        if _IMPRESSION.search(name):
            name = "impression"
        elif _FINDINGS.fullmatch(name):
            name = "findings"
        out[name] = " ".join(text[mark.end() : end].split())
    paragraphs = [p for p in re.split(r"\n[ \t]*\n", text) if p.strip()]
    last = paragraphs[-1] if paragraphs else ""
    out["last_paragraph"] = " ".join(_HEADER.sub("", last, count=1).split())
    return {name: body for name, body in out.items() if body}


def section_text(text: str, choice: Sections = "labelled") -> str:
    """The text of a report that ``choice`` keeps (the module docstring); "" where it has none."""
    if choice == "report":
        return text.strip()
    found = report_sections(text)
    if choice == "findings-impression":
        return "\n\n".join(
            f"{name.upper()}: {found[name]}" for name in ("findings", "impression") if name in found
        )
    for name in ("impression", "findings", "last_paragraph"):
        if name in found:
            return found[name]
    return ""


def _near(root: Path, skip: str = "") -> Iterator[Path]:
    """``root``, then the folders one level below it, then two, each level in sorted order
    (never into a folder named ``skip``): where a PhysioNet download puts MIMIC's files."""
    level = [root]
    for _ in range(3):
        yield from level
        level = sorted(p for folder in level for p in _subfolders(folder) if p.name != skip)


def find_file(root: Path, name: str) -> Path | None:
    """``name`` (or, for a ``.gz`` name, the file unpacked) in ``root`` or up to two folders
    below it, never inside a reports tree (``files/``); the first found in sorted order."""
    names = [name, name.removesuffix(".gz")] if name.endswith(".gz") else [name]
    return next(
        (f / n for f in _near(root, skip="files") for n in names if (f / n).is_file()), None
    )


def _subfolders(folder: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(folder) if e.is_dir()]
    except OSError:
        return []


def _reports_tree(root: Path) -> Path | None:
    """The ``files`` folder of a reports tree in ``root`` or up to two folders below it."""
    return next((f / "files" for f in _near(root) if (f / "files").is_dir()), None)


def iter_reports(root: Path, counts: MimicCounts | None = None) -> Iterator[tuple[str, str]]:
    """``(study_id, text)`` of every report under ``root``: the ``files/`` tree, else
    ``mimic-cxr-reports.zip`` (:func:`find_file`), in sorted order; a
    :class:`InputFileError` where there is neither. A report reached twice (through a linked
    folder, or a study's id in two files) is read once; one over :data:`MAX_REPORT_BYTES` or
    that cannot be read is left out; ``counts`` says how many of each, naming the first."""
    counts = counts if counts is not None else MimicCounts()
    tree = _reports_tree(root)
    if tree is not None:
        seen_files: set[str] = set()
        seen_studies: set[str] = set()
        for group in sorted(_subfolders(tree)):
            for patient in sorted(_subfolders(group)):
                for entry in sorted(os.scandir(patient), key=lambda e: e.name):
                    found = _REPORT_PATH.search(Path(entry.path).as_posix())
                    if not (found and entry.is_file()):
                        continue
                    real = os.path.realpath(entry.path)
                    study = found.group(2)
                    if real in seen_files or study in seen_studies:
                        counts.repeated += 1
                        continue
                    seen_files.add(real)
                    seen_studies.add(study)
                    text = _read_report(Path(entry.path), counts)
                    if text is not None:
                        yield study, text
        return
    archive = find_file(root, REPORTS_ZIP)
    if archive is None:
        raise InputFileError(
            f"{root}: no reports: neither a files/pNN/pNNNNNNNN/sNNNNNNNN.txt tree nor "
            f"{REPORTS_ZIP} in it or the two folders below"
        )
    try:
        with zipfile.ZipFile(archive) as zipped:
            seen: set[str] = set()
            for info in sorted(zipped.infolist(), key=lambda i: i.filename):
                found = _REPORT_PATH.search(info.filename)
                if not found or info.is_dir():
                    continue
                if found.group(2) in seen:
                    counts.repeated += 1
                    continue
                seen.add(found.group(2))
                if info.file_size > MAX_REPORT_BYTES:
                    counts.too_large += 1
                    counts.first_too_large = counts.first_too_large or f"{archive}:{info.filename}"
                    continue
                yield found.group(2), zipped.read(info).decode("utf-8", "replace")
    except zipfile.BadZipFile as exc:
        raise InputFileError(f"{archive}: not a zip archive ({exc})") from None


def _read_report(path: Path, counts: MimicCounts) -> str | None:
    """A report file's text, or ``None`` (counted) where it is over :data:`MAX_REPORT_BYTES`
    or cannot be read: its size is checked before it is read."""
    try:
        if path.stat().st_size > MAX_REPORT_BYTES:
            counts.too_large += 1
            counts.first_too_large = counts.first_too_large or str(path)
            return None
        return path.read_text("utf-8", "replace")
    except OSError as exc:
        counts.unreadable += 1
        counts.first_unreadable = counts.first_unreadable or f"{path} ({exc.strerror or exc})"
        return None


def _read_csv_chunks(path: Path, columns: list[str]) -> Iterator[pd.DataFrame]:
    """``path`` (gzip-compressed where its name ends in .gz) in chunks of :data:`CHUNK` rows,
    as strings; a :class:`InputFileError` naming a missing column or a file that is not what
    its name says."""
    try:
        reader = pd.read_csv(
            path,
            dtype=str,
            keep_default_na=False,
            chunksize=CHUNK,
            compression="gzip" if path.name.endswith(".gz") else None,
        )
        for chunk in reader:
            missing = [c for c in columns if c not in chunk.columns]
            if missing:
                raise InputFileError(
                    f"{path}: no column {missing[0]!r} (it has {', '.join(chunk.columns)})"
                )
            yield chunk
    except (gzip.BadGzipFile, EOFError, zipfile.BadZipFile) as exc:
        raise InputFileError(f"{path}: not a gzip file ({exc})") from None
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise InputFileError(f"{path}: not a CSV table ({str(exc).splitlines()[0]})") from None


@dataclass
class MimicLabels:
    """One label file: per study, its 14 states (1.0, 0.0, -1.0, NaN for blank) in
    :data:`~reportfed.core.labels.CHEXPERT_14` order, in one array."""

    path: Path
    rows: dict[str, int] = field(default_factory=dict)  # study id -> row of ``states``
    states: np.ndarray = field(default_factory=lambda: np.zeros((0, len(CHEXPERT_14))))

    @classmethod
    def read(cls, path: Path) -> MimicLabels:
        """Read ``path`` chunk by chunk, each study's row kept by its id (written with or
        without its ``s``, as the reports' file names have it); a state other than the four,
        and a study labelled twice (a file concatenated or exported again), are errors naming
        the study and the line."""
        parts: list[np.ndarray] = []
        rows: dict[str, int] = {}
        line = 2  # the file's line of the chunk's first row: its header is line 1
        for chunk in _read_csv_chunks(path, ["study_id", *CHEXPERT_14]):
            values = chunk[list(CHEXPERT_14)].replace("", "nan")
            try:
                states = values.to_numpy(dtype=np.float32)
            except ValueError as exc:
                raise InputFileError(f"{path}: a label that is not a number ({exc})") from None
            bad = ~np.isnan(states) & ~np.isin(states, (1.0, 0.0, -1.0))
            if bad.any():
                row, col = np.argwhere(bad)[0]
                raise InputFileError(
                    f"{path}: study {chunk['study_id'].iloc[row]}: {CHEXPERT_14[col]} is "
                    f"{states[row, col]:g}; the states are 1.0, 0.0, -1.0 and blank"
                )
            for k, study in enumerate(chunk["study_id"]):
                key = study_key(study)
                if key in rows:
                    raise InputFileError(
                        f"{path}: study {study} is labelled twice (line {line + k}, and line "
                        f"{rows[key] + 2}); one row a study: remove the repeated rows"
                    )
                rows[key] = line - 2 + k
            line += len(chunk)
            parts.append(states)
        return cls(path, rows, np.concatenate(parts) if parts else cls(path).states)


def study_key(study: str) -> str:
    """A study's id as reportfed keys it: its digits, with or without the ``s`` its report's
    file name has ("s50000001" and "50000001" are one study)."""
    study = study.strip()
    return study[1:] if study[:1] in ("s", "S") and study[1:].isdigit() else study


def read_split(path: Path, split: Split, key: str = "study_id") -> set[str]:
    """The study ids (``key="dicom_id"``: the images) that ``path``, the official split file,
    puts in ``split`` (a study is in the split of its images)."""
    kept: set[str] = set()
    for chunk in _read_csv_chunks(path, [key, "split"]):
        ids = chunk.loc[chunk["split"] == split, key]
        kept.update(ids.map(study_key) if key == "study_id" else ids)
    return kept


def official_splits(root: Path) -> dict[str, str]:
    """Each study id of the official split file under ``root`` -> its split (``train``,
    ``validate``, ``test``), or an :class:`InputFileError` where there is no split file."""
    path = find_file(root, SPLIT_FILE)
    if path is None:
        raise InputFileError(
            f"{root}: no {SPLIT_FILE} (the official splits) in it or the two folders below"
        )
    return {study: split for split in SPLITS for study in read_split(path, split)}


@dataclass
class MimicCounts:
    """What a pass over MIMIC-CXR found: reports kept, reports without a label row, labelled
    studies without a report, reports left out by the split, reports without text in the
    chosen sections, reports reached twice (read once), reports over
    :data:`MAX_REPORT_BYTES` and reports that could not be read (the first of each named)."""

    kept: int = 0
    unlabelled: int = 0
    without_report: int = 0
    other_split: int = 0
    empty: int = 0
    repeated: int = 0
    too_large: int = 0
    unreadable: int = 0
    first_too_large: str = ""
    first_unreadable: str = ""

    def why_empty(self, root: Path, sections: str, split: str | None) -> str:
        """Why a pass kept no report, naming the stage that left nothing: the ids, the
        split or the sections."""
        read = self.unlabelled + self.other_split + self.empty + self.kept
        if read == 0:
            return f"{root}: no report could be read"
        if self.unlabelled == read:
            return (
                f"{root}: none of its {read:,} reports' study ids is in the label file (are "
                "they the same studies? a label file's study_id is the number of a report's "
                "sNNNNNNNN.txt)"
            )
        if split is not None and self.other_split + self.unlabelled == read:
            return f"{root}: no labelled report is in the {split} split ({SPLIT_FILE})"
        return f"{root}: no labelled report has text in its {sections} sections"


def stand_in(root: str | Path) -> bool:
    """Whether ``root`` is a stand-in in MIMIC-CXR's layout (:data:`STAND_IN`)."""
    return (Path(root) / STAND_IN).is_file()


def label_file(root: Path, labeler: Labeler) -> Path:
    """The label file of ``labeler`` under ``root``, or a :class:`InputFileError` naming it."""
    found = find_file(root, LABEL_FILES[labeler])
    if found is None:
        raise InputFileError(
            f"{root}: no {LABEL_FILES[labeler]} (MIMIC-CXR-JPG's {labeler} labels) in it or the "
            "two folders below"
        )
    return found


def iter_mimic(
    root: str | Path,
    *,
    labeler: Labeler = "chexpert",
    split: Split | None = None,
    sections: Sections = "labelled",
    counts: MimicCounts | None = None,
) -> Iterator[tuple[str, str, np.ndarray]]:
    """``(study_id, text, states)`` for every report under ``root`` that ``labeler``'s file
    labels (states in :data:`CHEXPERT_14` order) and, with ``split``, the split file puts
    there; ``counts`` (filled as the stream goes) says what was left out and why."""
    root = Path(root)
    if not root.is_dir():
        raise InputFileError(f"{root}: no such folder (the root of a MIMIC-CXR copy)")
    labels = MimicLabels.read(label_file(root, labeler))
    wanted: set[str] | None = None
    if split is not None:
        split_path = find_file(root, SPLIT_FILE)
        if split_path is None:
            raise InputFileError(
                f"{root}: no {SPLIT_FILE} for --split in it or the two folders below"
            )
        wanted = read_split(split_path, split)
    counts = counts if counts is not None else MimicCounts()
    seen: set[str] = set()
    for study, text in iter_reports(root, counts):
        row = labels.rows.get(study)
        if row is None:
            counts.unlabelled += 1
            continue
        seen.add(study)
        if wanted is not None and study not in wanted:
            counts.other_split += 1
            continue
        kept = section_text(text, sections)
        if not kept:
            counts.empty += 1
            continue
        counts.kept += 1
        yield study, kept, labels.states[row]
    counts.without_report = len(labels.rows) - len(seen)


def load_mimic(
    root: str | Path,
    *,
    labeler: Labeler = "chexpert",
    split: Split | None = None,
    sections: Sections = "labelled",
    uncertain: Uncertain = "zeros",
    blank: Blank = "negative",
) -> ReportTable:
    """Every report :func:`iter_mimic` gives, as a training table: ids the study ids, the 14
    labels with -1 and blank by the ``uncertain`` and ``blank`` policies
    (:func:`~reportfed.data.table.training_labels`)."""
    ids, texts, states = [], [], []
    counts = MimicCounts()
    rows = iter_mimic(root, labeler=labeler, split=split, sections=sections, counts=counts)
    for study, text, row in rows:
        ids.append(study)
        texts.append(text)
        states.append(row)
    if not texts:
        raise InputFileError(counts.why_empty(Path(root), sections, split))
    return ReportTable(
        texts=texts,
        labels=training_labels(np.stack(states), uncertain, blank),
        label_space=LabelSpace(CHEXPERT_14),
        ids=ids,
        source=f"MIMIC-CXR ({root}, {labeler} labels)",
    )
