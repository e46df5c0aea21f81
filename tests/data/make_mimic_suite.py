"""Write ``mimic_style.csv``: reports in MIMIC-style dictation, each cell's state written by hand.

Every sentence here was written for reportfed (none is taken from MIMIC-CXR or any test set),
each with the states a radiologist reads in it under the CheXpert labeler's conventions; a
report places a few of them in MIMIC's dictation: a banner, ``EXAMINATION:``, an indication
(labelled or not, its history before ``//`` and its question after), ``TECHNIQUE:``,
``COMPARISON:``, ``FINDINGS:`` and ``IMPRESSION:`` (paragraphs or numbered), wet reads, ``___``
for redactions and lines cut where the dictation wrapped. Run ``python
tests/data/make_mimic_suite.py`` to regenerate the CSV (deterministic). Columns: ``id``,
``family`` (the idiom the report exercises, or ``plain``), ``report``, ``expected``
(``Label=state`` pairs joined by ``;``: 1 positive, 0 negated, -1 uncertain, blank not
mentioned) over **every** CheXpert finding, so that each report is judged on all 14 cells.

Conventions, beyond those of ``make_layout_suite.py`` (a report's state is its most positive
mention: affirmed, then uncertain, then negated):

* the history is not a finding: whatever the indication, history, reason for exam or clinical
  information names (before or after ``//``) is not mentioned, and a question there ("?PTX",
  "eval for pneumonia") is not a hedge;
* "if any", "if present" and "any ... is tiny" hedge the finding: -1;
* a caveat after a negation keeps it ("no pneumothorax, although evaluation is limited"): 0;
  "subtle pneumonia could be missed" is -1;
* a finding seen stays seen when its cause is hedged ("opacity, possibly pneumonia": the
  opacity 1, pneumonia -1);
* a heart "top normal", "at the upper limits of normal" or "borderline normal" in size is not
  enlarged (0); "borderline enlarged" is -1;
* a mass, nodular opacities, metastases or a cavitary lesion of the lung are Lung Lesion;
  collapse and volume loss are Atelectasis; a mediastinal mass is not a lung lesion;
* hardware is not a fracture ("fractured sternal wire": Support Devices 1, no Fracture);
* a sentence that names no finding ("low lung volumes crowd the bronchovascular markings")
  leaves every cell blank, whatever a model would guess.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

from reportfed.core.labels import CHEXPERT_14

#: findings whose 1 or -1 rules out No Finding (the CheXpert labeler's rule)
DISEASE = [n for n in CHEXPERT_14 if n not in ("No Finding", "Support Devices")]

Sentence = tuple[str, dict[str, int]]

#: indication lines: history and question, naming findings that the report does not
INDICATIONS: list[str] = [
    "___-year-old man with CHF and prior CABG, now dyspnea. // ?effusion",
    "___F s/p fall, rib fx on CT // eval PTX",
    "___M with pneumonia on antibiotics, persistent fever. // interval change?",
    "History of lung cancer s/p right upper lobectomy. // eval for recurrence",
    "___-year-old woman with ET tube placement. // ETT position?",
    "___M with chest tube for pneumothorax, now clamped. // PTX?",
    "Evaluate for edema in patient with ESRD missing dialysis.",
    "___F with cough and known left lower lobe consolidation. // resolution?",
    "Trauma. Assess for fracture or pneumothorax.",
    "___-year-old man with atelectasis on prior study, now hypoxic. // worsening?",
    "Pacemaker check, new leads. // lead position",
    "Cardiomegaly and pleural effusions on prior, SOB. // change?",
]
INDICATION_HEADERS = ["INDICATION:", "HISTORY:", "REASON FOR EXAM:", "CLINICAL INFORMATION:"]

#: (sentence, states) by family; "plain" covers every finding in ordinary MIMIC phrasing
FAMILIES: dict[str, list[Sentence]] = {
    "plain": [
        ("The heart is mildly enlarged.", {"Cardiomegaly": 1}),
        ("Moderate cardiomegaly is stable.", {"Cardiomegaly": 1}),
        ("Heart size is normal.", {"Cardiomegaly": 0}),
        ("The mediastinal contours are widened.", {"Enlarged Cardiomediastinum": 1}),
        ("Mediastinal and hilar contours are unremarkable.", {"Enlarged Cardiomediastinum": 0}),
        ("Patchy opacity at the right base.", {"Lung Opacity": 1}),
        ("Left lower lobe consolidation has increased.", {"Consolidation": 1}),
        ("No focal consolidation is seen.", {"Consolidation": 0}),
        ("Findings are consistent with right lower lobe pneumonia.", {"Pneumonia": 1}),
        ("Mild pulmonary edema.", {"Edema": 1}),
        ("There is no pulmonary edema.", {"Edema": 0}),
        ("Mild pulmonary vascular congestion.", {"Edema": -1}),  # CheXpert: congestion is hedged
        ("Bibasilar atelectasis.", {"Atelectasis": 1}),
        ("Small left pleural effusion.", {"Pleural Effusion": 1}),
        ("No pleural effusion or pneumothorax.", {"Pleural Effusion": 0, "Pneumothorax": 0}),
        ("Small right apical pneumothorax.", {"Pneumothorax": 1}),
        ("Right pleural thickening is chronic.", {"Pleural Other": 1}),
        ("Acute fracture of the left seventh rib.", {"Fracture": 1}),
        ("No displaced rib fractures.", {"Fracture": 0}),
        ("Endotracheal tube terminates 4 cm above the carina.", {"Support Devices": 1}),
        ("Right IJ central venous catheter ends in the mid SVC.", {"Support Devices": 1}),
        ("A 1.5 cm nodule projects over the left mid lung.", {"Lung Lesion": 1}),
        ("The lungs are clear.", {}),
    ],
    "history is not a finding": [],  # the indication lines; the body is plain
    "if any": [
        ("Small left effusion, if any.", {"Pleural Effusion": -1}),
        ("Any residual pneumothorax is tiny.", {"Pneumothorax": -1}),
        ("Pleural fluid, if present, is minimal.", {"Pleural Effusion": -1}),
        ("Minimal atelectasis at the left base, if any.", {"Atelectasis": -1}),
    ],
    "caveat after a negation": [
        (
            "No pneumothorax, although evaluation is limited by supine positioning.",
            {"Pneumothorax": 0},
        ),
        (
            "No pneumothorax is seen; sensitivity for pneumothorax is reduced on a portable film.",
            {"Pneumothorax": 0},
        ),
        (
            "No large effusion, though a small effusion could be obscured by the overlying "
            "soft tissues.",
            {"Pleural Effusion": -1},
        ),
        ("Subtle pneumonia could be missed on this single view.", {"Pneumonia": -1}),
        (
            "No focal consolidation, although the retrocardiac region is not well assessed.",
            {"Consolidation": 0},
        ),
    ],
    "seen finding, hedged cause": [
        (
            "Patchy airspace opacity, possibly representing pneumonia.",
            {"Lung Opacity": 1, "Pneumonia": -1},
        ),
        (
            "Right basilar opacity likely representing pneumonia.",
            {"Lung Opacity": 1, "Pneumonia": -1},
        ),
        (
            "Left lower lobe consolidation possibly representing pneumonia.",
            {"Consolidation": 1, "Pneumonia": -1},
        ),
        ("Left basilar opacity possibly atelectasis.", {"Lung Opacity": 1, "Atelectasis": -1}),
        (
            "Left basilar opacity could reflect atelectasis or pneumonia.",
            {"Lung Opacity": 1, "Atelectasis": -1, "Pneumonia": -1},
        ),
        (
            "Retrocardiac consolidation, likely atelectasis.",
            {"Consolidation": 1, "Atelectasis": -1},
        ),
        ("Widened mediastinum, likely due to rotation.", {"Enlarged Cardiomediastinum": 1}),
        (
            "Bibasilar opacities, presumably atelectasis.",
            {"Lung Opacity": 1, "Atelectasis": -1},
        ),
    ],
    "normal-range size": [
        ("Heart size is top normal.", {"Cardiomegaly": 0}),
        ("The heart is top-normal in size.", {"Cardiomegaly": 0}),
        ("Cardiac size is at the upper limits of normal.", {"Cardiomegaly": 0}),
        ("Heart size is borderline normal.", {"Cardiomegaly": 0}),
        ("The heart is borderline enlarged.", {"Cardiomegaly": -1}),
    ],
    "lesions and collapse by other names": [
        ("Left hilar mass is again seen.", {"Lung Lesion": 1}),
        ("Multiple nodular opacities in both lungs.", {"Lung Lesion": 1, "Lung Opacity": 1}),
        ("Innumerable pulmonary metastases are unchanged.", {"Lung Lesion": 1}),
        ("Cavitary lesion in the right upper lobe.", {"Lung Lesion": 1}),
        ("Right upper lobe postobstructive collapse.", {"Atelectasis": 1}),
        ("Left lower lobe collapse.", {"Atelectasis": 1}),
        ("Volume loss in the right lower lobe.", {"Atelectasis": 1}),
        ("Anterior mediastinal mass is unchanged.", {}),
    ],
    "hardware is not a fracture": [
        ("Fractured sternal wire, unchanged.", {"Support Devices": 1}),
        ("The third sternal wire is fractured.", {"Support Devices": 1}),
        ("Median sternotomy wires are intact.", {"Support Devices": 1}),
    ],
    "no finding named": [
        ("Low lung volumes crowd the bronchovascular markings.", {}),
        ("The patient is rotated.", {}),
        ("Lung volumes are low.", {}),
    ],
}


def _state(sentences: list[Sentence]) -> dict[str, str]:
    """Every CheXpert cell of a report of ``sentences``: each finding's most positive mention
    (1, then -1, then 0), blank where none names it; No Finding by the labeler's rule."""
    rank = {1: 2, -1: 1, 0: 0}
    truth: dict[str, int] = {}
    for _, states in sentences:
        for label, state in states.items():
            if label not in truth or rank[state] > rank[truth[label]]:
                truth[label] = state
    cells = {n: str(truth[n]) if n in truth else "" for n in CHEXPERT_14 if n != "No Finding"}
    cells["No Finding"] = "" if any(truth.get(n) in (1, -1) for n in DISEASE) else "1"
    return cells


def _indication(rng: random.Random) -> str:
    line = rng.choice(INDICATIONS)
    header = rng.choice([*INDICATION_HEADERS, ""])  # MIMIC's line is often unlabelled
    return f"{header} {line}".strip()


def _report(rng: random.Random, findings: list[Sentence], impression: list[Sentence]) -> str:
    """One report in MIMIC-style dictation around ``findings`` and ``impression``."""
    parts = ["FINAL REPORT"]
    if rng.random() < 0.3:
        parts.insert(0, f"WET READ: ___ ___ {rng.randint(1, 11)}:{rng.randint(10, 59)} PM\n  "
                     + (impression or findings)[0][0])  # fmt: skip
    parts.append(
        rng.choice(["EXAMINATION:  CHEST (PORTABLE AP)", "EXAMINATION:  CHEST (PA AND LAT)"])
    )
    parts.append(_indication(rng))
    parts.append(rng.choice(["TECHNIQUE:  Chest PA and lateral", "TECHNIQUE:  Portable AP chest"]))
    parts.append(
        rng.choice(["COMPARISON:  ___", "COMPARISON:  Chest radiograph ___.", "COMPARISON:  None."])
    )
    body = " ".join(s for s, _ in findings)
    if rng.random() < 0.4:  # the dictation wrapped: a line cut mid-sentence
        cut = body.find(" ", len(body) // 2)
        body = body[:cut] + "\n" + body[cut + 1 :] if cut > 0 else body
    parts.append(f"FINDINGS:\n \n{body}")
    if impression:
        if len(impression) > 1 and rng.random() < 0.5:
            items = "\n".join(f"{i}. {s}" for i, (s, _) in enumerate(impression, 1))
        else:
            items = " ".join(s for s, _ in impression)
        parts.append(f"IMPRESSION:\n \n{items}")
    return "\n \n".join(parts)


def build(per_family: int = 24) -> list[dict[str, str]]:
    """Every report of the suite, in a fixed order: ``per_family`` reports for each family,
    each family's sentences among plain ones of other findings."""
    rng = random.Random(60)
    rows: list[dict[str, str]] = []
    plain = FAMILIES["plain"]
    for family, own in FAMILIES.items():
        for k in range(per_family):
            chosen = [own[k % len(own)]] if own else []
            named = {label for _, states in chosen for label in states}
            others = [s for s in plain if not named & set(s[1])]
            extra = rng.sample(others, rng.randint(1, 3))
            sentences = [*chosen, *extra]
            named_all: set[str] = set()
            kept = []
            for s in sentences:  # one sentence a finding, so each cell says one thing
                if named_all & set(s[1]):
                    continue
                kept.append(s)
                named_all |= set(s[1])
            split = rng.randint(0, len(kept))
            findings, impression = kept[:split] or kept, kept[split:] if split else []
            report = _report(rng, findings, impression)
            cells = _state(kept)
            rows.append(
                {
                    "id": f"m{len(rows) + 1:04d}",
                    "family": family,
                    "report": report,
                    "expected": ";".join(f"{n}={v}" for n, v in cells.items()),
                }
            )
    return rows


def main() -> None:
    path = Path(__file__).with_name("mimic_style.csv")
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["id", "family", "report", "expected"])
        writer.writeheader()
        writer.writerows(build())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
