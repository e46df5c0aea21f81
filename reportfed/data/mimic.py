"""MIMIC-CXR reports (credentialed; bring your own copy) with the CheXpert-labeler labels.

Layout: ``<root>/files/pXX/pXXXXXXXX/sXXXXXXXX.txt`` free-text reports and
``mimic-cxr-2.0.0-chexpert.csv(.gz)`` with ``subject_id, study_id`` and the 14 CheXpert columns
(1, 0, -1, blank).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from reportfed.core.errors import InputFileError
from reportfed.core.labels import CHEXPERT_14, LabelSpace
from reportfed.data.table import Blank, ReportTable, Uncertain, parse_label_column

_SECTION = re.compile(r"^\s*([A-Z][A-Z /]+):", re.MULTILINE)


def report_sections(text: str) -> dict[str, str]:
    """Split a MIMIC-CXR report into its upper-case sections (``FINDINGS``, ``IMPRESSION``...)."""
    marks = list(_SECTION.finditer(text))
    return {
        m.group(1).strip(): " ".join(text[m.end() : nxt.start() if nxt else len(text)].split())
        for m, nxt in zip(marks, [*marks[1:], None], strict=True)
    }


def load_mimic(
    root: str | Path,
    *,
    labels_csv: str | Path | None = None,
    uncertain: Uncertain = "zeros",
    blank: Blank = "negative",
) -> ReportTable:
    """Reports with findings or impression joined to their CheXpert labels (missing study =
    skipped). A blank label is "not mentioned", a negative (``blank="ignore"``: not annotated)."""
    root = Path(root)
    if labels_csv is None:
        found = sorted(root.glob("mimic-cxr-2.0.0-chexpert.csv*"))
        if not found:
            raise InputFileError(f"{root}: no mimic-cxr-2.0.0-chexpert.csv(.gz); pass labels_csv")
        labels_csv = found[0]
    frame = pd.read_csv(labels_csv, dtype=str, keep_default_na=False)
    missing = [c for c in ("subject_id", "study_id", *CHEXPERT_14) if c not in frame.columns]
    if missing:
        raise InputFileError(f"{labels_csv}: missing columns {missing}")
    texts, ids, rows = [], [], []
    for i, (subject, study) in enumerate(zip(frame["subject_id"], frame["study_id"], strict=True)):
        path = root / "files" / f"p{subject[:2]}" / f"p{subject}" / f"s{study}.txt"
        if not path.is_file():
            continue
        sections = report_sections(path.read_text(encoding="utf-8", errors="replace"))
        text = " ".join(
            s for s in (sections.get("FINDINGS", ""), sections.get("IMPRESSION", "")) if s
        )
        if text:
            texts.append(text)
            ids.append(f"s{study}")
            rows.append(i)
    if not texts:
        raise InputFileError(f"{root}: no report with findings or impression matched {labels_csv}")
    y = np.stack(
        [
            parse_label_column(Path(labels_csv), c, frame[c], uncertain, 2, blank)
            for c in CHEXPERT_14
        ],
        axis=1,
    )
    return ReportTable(
        texts=texts,
        labels=y[rows],
        label_space=LabelSpace(CHEXPERT_14),
        ids=ids,
        source=f"MIMIC-CXR ({root})",
    )
