"""Write a MIMIC-CXR stand-in in PhysioNet's published layout (never real MIMIC text).

The tree is what ``reportfed corpus mimic`` and the experiments read from a real copy:
``files/pNN/pNNNNNNNN/sNNNNNNNN.txt`` (or ``mimic-cxr-reports.zip`` holding that tree), the
CheXpert and NegBio label files and the official split as gzip-compressed CSVs with their real
column names and order (``dicom_id`` first in the split, one row per image). The reports are
written in MIMIC's dictation from the sentences of ``make_mimic_suite.py`` (banner,
``EXAMINATION:``, an indication line with ``//``, ``COMPARISON:``, ``FINDINGS:``,
``IMPRESSION:``, wet reads, ``___`` redactions), with reports that have only an impression and
reports with no header at all; the labels are the states of the section they were read from
(the impression, else the findings, else the last paragraph), so that text and labels agree. A
few labelled studies have no report, a few reports no label row.

    python tests/data/make_mimic_fixture.py DIR [--studies 60] [--zip]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import random
import zipfile
from pathlib import Path

from reportfed.data.mimic import STAND_IN
from tests.data.make_mimic_suite import FAMILIES, Sentence, _report, _state

#: MIMIC-CXR-JPG's label columns, in their published order
LABEL_COLUMNS = [
    "subject_id", "study_id", "Atelectasis", "Cardiomegaly", "Consolidation", "Edema",
    "Enlarged Cardiomediastinum", "Fracture", "Lung Lesion", "Lung Opacity", "No Finding",
    "Pleural Effusion", "Pleural Other", "Pneumonia", "Pneumothorax", "Support Devices",
]  # fmt: skip
SPLIT_COLUMNS = ["dicom_id", "study_id", "subject_id", "split"]
#: the label file's spelling of each state
STATE_TEXT = {"1": "1.0", "0": "0.0", "-1": "-1.0", "": ""}


def _sentences(rng: random.Random) -> list[Sentence]:
    pool = [s for family in FAMILIES.values() for s in family]
    chosen: list[Sentence] = []
    for s in rng.sample(pool, rng.randint(2, 4)):
        if not {label for _, st in chosen for label in st} & set(s[1]):
            chosen.append(s)
    return chosen


def build(studies: int = 60, seed: int = 61) -> dict[str, object]:
    """The fixture's content: reports by (subject, study), CheXpert and NegBio label rows, split
    rows, and which studies have no report and which reports no label row."""
    rng = random.Random(seed)
    reports: dict[tuple[str, str], str] = {}
    labels: list[dict[str, str]] = []
    for k in range(studies):
        subject = f"1{k // 3:07d}"
        study = f"5{k:07d}"
        sentences = _sentences(rng)
        cut = rng.randint(1, len(sentences))
        findings, impression = sentences[:cut], sentences[cut:]
        kind = k % 10
        if kind == 7:  # only an impression
            text = "FINAL REPORT\n IMPRESSION:\n \n" + " ".join(s for s, _ in sentences) + "\n"
            read = sentences
        elif kind == 8:  # no header at all: the last paragraph was read
            text = " ".join(s for s, _ in findings) + "\n \n" + " ".join(s for s, _ in sentences)
            read = sentences
        else:
            text = _report(rng, findings, impression)
            read = impression or findings
        reports[(subject, study)] = text
        cells = _state(read)
        labels.append(
            {"subject_id": subject, "study_id": study}
            | {name: STATE_TEXT[cells[name]] for name in LABEL_COLUMNS[2:]}
        )
    no_report = [(f"19{k:06d}", f"59{k:06d}") for k in range(3)]
    labels += [
        {"subject_id": s, "study_id": t}
        | dict.fromkeys(LABEL_COLUMNS[2:], "")
        | {"No Finding": "1.0"}
        for s, t in no_report
    ]
    unlabelled = list(reports)[-2:]  # reports whose label rows were never written
    labels = [row for row in labels if (row["subject_id"], row["study_id"]) not in unlabelled]
    split = []
    for k, row in enumerate(labels):
        part = ("test", "validate", "train", "train", "train")[k % 5]
        for image in range(1 + k % 3):
            dicom = f"{rng.getrandbits(64):016x}-{image}"
            split.append({"dicom_id": dicom, "study_id": row["study_id"],
                          "subject_id": row["subject_id"], "split": part})  # fmt: skip
    negbio = [dict(row) for row in labels]
    for row in negbio:  # NegBio leaves a hedged edema blank where CheXpert says -1
        if row["Edema"] == "-1.0":
            row["Edema"] = ""
    return {
        "reports": reports,
        "chexpert": labels,
        "negbio": negbio,
        "split": split,
        "no_report": len(no_report),
        "unlabelled": len(unlabelled),
    }


def _gzip_csv(path: Path, columns: list[str], rows: list[dict[str, str]]) -> None:
    with gzip.open(path, "wt", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def write_fixture(
    root: Path, studies: int = 60, *, seed: int = 61, as_zip: bool = False
) -> dict[str, object]:
    """Write the fixture under ``root`` (the reports as a tree, or as ``mimic-cxr-reports.zip``
    with ``as_zip``) and return what :func:`build` made."""
    made = build(studies, seed)
    root.mkdir(parents=True, exist_ok=True)
    (root / STAND_IN).write_text(
        "A stand-in in MIMIC-CXR's published layout, written by tests/data/make_mimic_fixture.py:"
        " no real MIMIC text; results on it measure the code, not the labels.\n"
    )
    reports: dict[tuple[str, str], str] = made["reports"]  # type: ignore[assignment]
    paths = {
        f"files/p{subject[:2]}/p{subject}/s{study}.txt": text
        for (subject, study), text in reports.items()
    }
    if as_zip:
        with zipfile.ZipFile(root / "mimic-cxr-reports.zip", "w", zipfile.ZIP_DEFLATED) as z:
            for name, text in paths.items():
                z.writestr(name, text)
    else:
        for name, text in paths.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
    _gzip_csv(root / "mimic-cxr-2.0.0-chexpert.csv.gz", LABEL_COLUMNS, made["chexpert"])  # type: ignore[arg-type]
    _gzip_csv(root / "mimic-cxr-2.0.0-negbio.csv.gz", LABEL_COLUMNS, made["negbio"])  # type: ignore[arg-type]
    _gzip_csv(root / "mimic-cxr-2.0.0-split.csv.gz", SPLIT_COLUMNS, made["split"])  # type: ignore[arg-type]
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--studies", type=int, default=60)
    parser.add_argument("--zip", action="store_true", help="the reports as mimic-cxr-reports.zip")
    args = parser.parse_args()
    made = write_fixture(args.root, args.studies, as_zip=args.zip)
    print(f"wrote a MIMIC-CXR stand-in of {len(made['reports'])} reports to {args.root}")  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
