"""Write ``layouts.csv``: the same kind of findings in the report layouts of different hospitals.

Every statement here was written for reportfed, each with the states a radiologist reads in it;
a layout places a few of them in one hospital's report format (headers, paragraphs, capitals,
numbering, wet reads, addenda, anatomic sub-headers, de-identification blanks). Run ``python
tests/data/make_layout_suite.py`` to regenerate the CSV (deterministic). Columns: ``id``,
``layout``, ``report``, ``expected`` (``Label=state`` pairs joined by ``;``: 1 positive, 0
negated, -1 uncertain, blank not mentioned). Only the labels in ``expected`` are judged, and
**No Finding** is judged on every report (1 when no finding but Support Devices is 1 or -1).

Conventions (the CheXpert labeler's, as reportfed reads them; the README's Labels section has
them too): a statement that a region is normal ("the lungs are clear") names no finding, but a
named finding said to be absent ("no focal consolidation") is negated; the report's state is
its most positive mention (affirmed, then uncertain, then negated), so a sign stated as present
makes the finding present even where a hedged diagnosis follows ("blunting of the costophrenic
angle may reflect a small effusion": 1); two findings offered as alternatives ("atelectasis or
pneumonia") are both uncertain, but after a negation "or" joins a list ("no effusion or
pneumothorax": both 0); a cause offered with a hedge ("may be due to fluid overload") is
uncertain; an addendum that adds a finding makes it present.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Callable
from pathlib import Path

from reportfed.core.labels import CHEXPERT_14
from reportfed.text.states import NOT_DISEASE

#: (anatomy, statement, its states; None: the statement does not name the finding). Anatomy
#: groups statements under sub-headers.
Statement = tuple[str, str, dict[str, int | None]]
STATEMENTS: list[Statement] = [
    # heart and mediastinum
    ("heart", "The heart is enlarged.", {"Cardiomegaly": 1}),
    ("heart", "Moderate cardiomegaly is unchanged.", {"Cardiomegaly": 1}),
    ("heart", "Heart size is normal.", {"Cardiomegaly": 0}),
    ("heart", "The cardiac silhouette is within normal limits.", {"Cardiomegaly": 0}),
    ("heart", "Borderline enlargement of the cardiac silhouette.", {"Cardiomegaly": -1}),
    ("heart", "The heart is possibly mildly enlarged.", {"Cardiomegaly": -1}),
    ("heart", "The mediastinum is widened.", {"Enlarged Cardiomediastinum": 1}),
    ("heart", "No mediastinal widening.", {"Enlarged Cardiomediastinum": 0}),
    ("heart", "Mediastinal contours are normal.", {"Enlarged Cardiomediastinum": 0}),
    ("heart", "Prominence of the superior mediastinum.", {"Enlarged Cardiomediastinum": 1}),
    # lungs
    ("lungs", "There is a patchy opacity in the right lower lobe.", {"Lung Opacity": 1}),
    ("lungs", "Bibasilar airspace disease has progressed.", {"Lung Opacity": 1}),
    ("lungs", "The lungs are clear.", {}),  # names no finding (the CheXpert labeler's rule)
    ("lungs", "No focal consolidation.", {"Consolidation": 0}),
    ("lungs", "Dense consolidation of the left lower lobe.", {"Consolidation": 1}),
    ("lungs", "Right middle lobe pneumonia.", {"Pneumonia": 1}),
    ("lungs", "Findings are concerning for pneumonia.", {"Pneumonia": -1}),
    ("lungs", "Pneumonia cannot be excluded.", {"Pneumonia": -1}),
    ("lungs", "No evidence of pneumonia.", {"Pneumonia": 0}),
    ("lungs", "Mild pulmonary edema.", {"Edema": 1}),
    ("lungs", "Interstitial edema has improved but persists.", {"Edema": 1}),
    ("lungs", "No pulmonary edema.", {"Edema": 0}),
    ("lungs", "Possible mild interstitial edema.", {"Edema": -1}),
    ("lungs", "Linear atelectasis at the left base.", {"Atelectasis": 1}),
    ("lungs", "Bibasilar atelectasis.", {"Atelectasis": 1}),
    ("lungs", "Subsegmental atelectasis versus scarring in the lingula.", {"Atelectasis": -1}),
    (
        "lungs",
        "Left basilar opacity, atelectasis or pneumonia.",
        {"Lung Opacity": 1, "Atelectasis": -1, "Pneumonia": -1},
    ),
    ("lungs", "Right lower lobe collapse.", {"Atelectasis": 1}),
    ("lungs", "Volume loss in the left lower lobe.", {"Atelectasis": 1}),
    (
        "lungs",
        "Opacity at the right base could reflect aspiration.",
        {"Lung Opacity": 1, "Pneumonia": None},  # aspiration is no pneumonia (CheXpert's lists)
    ),
    ("lungs", "The possibility of early pneumonia is raised.", {"Pneumonia": -1}),
    (
        "lungs",
        "Multifocal infiltrates consistent with pneumonia.",
        {"Lung Opacity": 1, "Pneumonia": 1},
    ),
    ("lungs", "A 2 cm lung mass, suspicious for malignancy.", {"Lung Lesion": 1}),
    (
        "heart",
        "Widened mediastinum, possibly due to vascular engorgement.",
        {"Enlarged Cardiomediastinum": 1, "Edema": -1},
    ),
    # vascular congestion and prominence name Edema hedged (the CheXpert labeler's lists)
    ("lungs", "Pulmonary vascular congestion.", {"Edema": -1}),
    ("lungs", "Prominence of the central pulmonary vasculature.", {"Edema": -1}),
    ("lungs", "The pulmonary vascularity is prominent.", {"Edema": -1}),
    (
        "lungs",
        "Increased interstitial markings may be due to fluid overload.",
        {"Lung Opacity": 1, "Edema": -1},
    ),
    ("lungs", "Subtle airspace density at the right base.", {"Lung Opacity": 1}),
    ("lungs", "A 1.5 cm nodule in the right upper lobe.", {"Lung Lesion": 1}),
    ("lungs", "Left hilar mass.", {"Lung Lesion": 1}),
    ("lungs", "No suspicious pulmonary nodules.", {"Lung Lesion": 0}),
    ("lungs", "A possible nodule overlies the left fourth rib.", {"Lung Lesion": -1}),
    ("lungs", "Coin lesion in the right upper lobe.", {"Lung Lesion": 1}),
    ("lungs", "Left apical mass-like opacity.", {"Lung Lesion": 1}),
    # hedges after the finding, and alternatives
    ("lungs", "Left basilar opacity, likely atelectasis.", {"Lung Opacity": 1, "Atelectasis": -1}),
    ("lungs", "Right lower lobe opacity, pneumonia not excluded.", {"Pneumonia": -1}),
    (
        "lungs",
        "Bibasilar opacities, atelectasis versus pneumonia.",
        {"Atelectasis": -1, "Pneumonia": -1, "Lung Opacity": 1},
    ),
    ("lungs", "Mild edema is likely.", {"Edema": -1}),
    # pleura
    ("pleura", "Small left pleural effusion.", {"Pleural Effusion": 1}),
    ("pleura", "Moderate bilateral pleural effusions have increased.", {"Pleural Effusion": 1}),
    ("pleura", "No pleural effusion.", {"Pleural Effusion": 0}),
    ("pleura", "There is no effusion.", {"Pleural Effusion": 0}),
    ("pleura", "Possible small right pleural effusion.", {"Pleural Effusion": -1}),
    (
        "pleura",
        "Blunting of the right costophrenic angle may reflect a small effusion.",
        {"Pleural Effusion": -1},  # blunting names no effusion (the CheXpert labeler's lists)
    ),
    ("pleura", "Small right apical pneumothorax.", {"Pneumothorax": 1}),
    ("pleura", "A tiny left pneumothorax is again seen.", {"Pneumothorax": 1}),
    ("pleura", "No pneumothorax.", {"Pneumothorax": 0}),
    ("pleura", "There is no evidence of pneumothorax.", {"Pneumothorax": 0}),
    ("pleura", "Questionable small right pneumothorax.", {"Pneumothorax": -1}),
    ("pleura", "Left pleural thickening.", {"Pleural Other": 1}),
    ("pleura", "Calcified pleural plaques.", {"Pleural Other": 1}),
    ("pleura", "Bilateral pneumothoraces.", {"Pneumothorax": 1}),
    ("pleura", "Small left PTX.", {"Pneumothorax": 1}),
    ("pleura", "Pneumothorax has resolved.", {"Pneumothorax": 0}),
    ("pleura", "Small left apical pleural air collection.", {"Pneumothorax": 1}),
    ("pleura", "The right pneumothorax has nearly resolved.", {"Pneumothorax": 1}),
    ("pleura", "Partial resolution of the left pleural effusion.", {"Pleural Effusion": 1}),
    ("pleura", "Biapical pleural-parenchymal scarring.", {"Pleural Other": 1}),
    (
        "pleura",
        "Calcified plaques along the diaphragm from prior asbestos exposure.",
        {"Pleural Other": 1},
    ),
    ("pleura", "No pleural thickening.", {"Pleural Other": 0}),
    # bones
    ("bones", "Acute fracture of the right seventh rib.", {"Fracture": 1}),
    ("bones", "Old healed left clavicle fracture.", {"Fracture": 1}),
    ("bones", "No acute fracture.", {"Fracture": 0}),
    ("bones", "Osseous structures are intact.", {}),
    # lines and tubes
    ("lines", "Endotracheal tube terminates 4 cm above the carina.", {"Support Devices": 1}),
    ("lines", "Right internal jugular central line tip in the SVC.", {"Support Devices": 1}),
    (
        "lines",
        "A left-sided pacemaker with leads in the right atrium and ventricle.",
        {"Support Devices": 1},
    ),
    ("lines", "Nasogastric tube courses below the diaphragm.", {"Support Devices": 1}),
    ("lines", "Sternotomy wires are intact.", {"Support Devices": 1}),
    # devices removed
    ("lines", "The endotracheal tube has been removed.", {"Support Devices": 0}),
    ("lines", "Interval removal of the right chest tube.", {"Support Devices": 0}),
    ("lines", "The patient has been extubated.", {"Support Devices": 0}),
]
ANATOMY = {
    "lines": "Lines and tubes",
    "lungs": "Lungs",
    "pleura": "Pleura",
    "heart": "Heart",
    "bones": "Bones",
}
#: the findings that rule out No Finding
FINDING_LABELS = [name for name in CHEXPERT_14 if name not in NOT_DISEASE]
#: context sections a finding never comes from (their finding words are questions or history)
INDICATIONS = [
    "Shortness of breath, evaluate for pneumonia.",
    "Assess for pleural effusion.",
    "History of CHF, rule out edema.",
    "Chest pain. ? pneumothorax.",
    "Fever and cough.",
]
NORMAL = [
    ("The heart is normal in size.", {"Cardiomegaly": 0}),
    ("The mediastinal and hilar contours are unremarkable.", {}),
    ("The lungs are clear without focal consolidation.", {"Consolidation": 0}),
    ("No pleural effusion or pneumothorax is seen.", {"Pleural Effusion": 0, "Pneumothorax": 0}),
    ("No acute osseous abnormality.", {}),
]


#: MIMIC's indication line, unlabelled or not: history, "//", the question; the findings it names
#: are not findings of the study (they stay blank unless a statement of the report names them)
MIMIC_INDICATIONS: list[tuple[str, list[str]]] = [
    ("___M with COPD and a new PICC line. // position?", ["Support Devices"]),
    ("___F with metastatic breast cancer, dyspnea. // ?effusion", ["Pleural Effusion"]),
    ("___-year-old man s/p fall with left rib fractures. // PTX?", ["Fracture", "Pneumothorax"]),
    ("___-year-old woman with CHF exacerbation. // edema?", ["Edema"]),
    ("___M, intubated for pneumonia. // interval change", ["Pneumonia", "Support Devices"]),
    ("Cardiomegaly on prior, now chest pain. // acute process?", ["Cardiomegaly"]),
]
#: the idioms of MIMIC-style dictation, one family per statement (tests/data/make_mimic_suite.py
#: has the conventions): hedges with "if any", caveats after a negation, a seen finding with a
#: hedged cause, sizes at the edge of normal, lesions and collapse by other names, hardware, and
#: sentences that name no finding
MIMIC_STATEMENTS: list[Statement] = [
    ("pleura", "Tiny left pleural effusion, if any.", {"Pleural Effusion": -1}),
    ("pleura", "Any apical pneumothorax is minimal.", {"Pneumothorax": -1}),
    (
        "pleura",
        "No pneumothorax, although the left apex is partly obscured.",
        {"Pneumothorax": 0},
    ),
    (
        "lungs",
        "No consolidation; sensitivity for consolidation is limited on a portable film.",
        {"Consolidation": 0},
    ),
    ("lungs", "A small pneumonia could be missed at the bases.", {"Pneumonia": -1}),
    (
        "lungs",
        "Hazy right basilar opacity, possibly representing aspiration.",
        {"Lung Opacity": 1, "Pneumonia": None},  # aspiration is no pneumonia (CheXpert's lists)
    ),
    (
        "lungs",
        "Lingular opacity, most likely atelectasis.",
        {"Lung Opacity": 1, "Atelectasis": -1},
    ),
    (
        "heart",
        "The mediastinum is widened, likely due to AP technique.",
        {"Enlarged Cardiomediastinum": 1},
    ),
    ("heart", "Heart size is at the upper limits of normal.", {"Cardiomegaly": 0}),
    ("heart", "The cardiac silhouette is top-normal.", {"Cardiomegaly": 0}),
    ("lungs", "Multiple cavitary lesions in both upper lobes.", {"Lung Lesion": 1}),
    ("lungs", "Collapse of the left upper lobe.", {"Atelectasis": 1}),
    ("heart", "Known anterior mediastinal mass is unchanged.", {"Lung Lesion": None}),
    ("lines", "One sternal wire is fractured.", {"Support Devices": 1, "Fracture": None}),
    ("lungs", "Low lung volumes crowd the bronchovascular markings.", {"Lung Opacity": None}),
]


def _pick(rng: random.Random, k: int) -> list[Statement]:
    """``k`` statements about different labels (no two judge the same label)."""
    chosen: list[Statement] = []
    seen: set[str] = set()
    for s in rng.sample(STATEMENTS, len(STATEMENTS)):
        if not seen & set(s[2]):
            chosen.append(s)
            seen |= set(s[2])
        if len(chosen) == k:
            break
    return chosen


def _text(statements: list[Statement]) -> str:
    return " ".join(s[1] for s in statements)


def iu(rng: random.Random, st: list[Statement]) -> str:
    return f"FINDINGS: {_text(st[:-1])}\nIMPRESSION: {st[-1][1]}"


def mimic_paragraphs(rng: random.Random, st: list[Statement]) -> str:
    return (
        "FINAL REPORT\nEXAMINATION: CHEST (PORTABLE AP)\n\n"
        f"INDICATION: ___ year old man. {rng.choice(INDICATIONS)}\n\nCOMPARISON: ___\n\n"
        f"{_text(st)}"
    )


def reason_then_findings(rng: random.Random, st: list[Statement]) -> str:
    header = rng.choice(["REASON FOR EXAM", "HISTORY", "CLINICAL HISTORY", "TECHNIQUE"])
    return f"{header}: {rng.choice(INDICATIONS)}\n\n{_text(st)}"


def numbered_impression(rng: random.Random, st: list[Statement]) -> str:
    items = "\n".join(f"{i}. {s[1]}" for i, s in enumerate(st, 1))
    return f"FINDINGS: See impression.\n\nIMPRESSION:\n{items}"


def all_capitals(rng: random.Random, st: list[Statement]) -> str:
    return f"INDICATION: {rng.choice(INDICATIONS)}\n\nFINDINGS: {_text(st)}".upper()


def one_line(rng: random.Random, st: list[Statement]) -> str:
    return f"PA and lateral chest: {_text(st)}"


def wet_read(rng: random.Random, st: list[Statement]) -> str:
    return (
        f"WET READ: ___ ___ 2:14 AM\n  {st[0][1]}\n\nFINAL REPORT\n"
        f"INDICATION: {rng.choice(INDICATIONS)}\n\nFINDINGS: {_text(st)}"
    )


def mimic_dictation(rng: random.Random, st: list[Statement]) -> str:
    """MIMIC's dictation: banner, examination, the indication line (``st[0]``, often without a
    header), technique, comparison, findings and a numbered impression (the last statement)."""
    indication = rng.choice(["", "INDICATION:  ", "HISTORY:  "]) + st[0][1]
    return (
        "FINAL REPORT\nEXAMINATION:  CHEST (PORTABLE AP)\n \n"
        f"{indication}\n \nTECHNIQUE:  Portable AP chest\n \nCOMPARISON:  ___\n \n"
        f"FINDINGS:\n \n{_text(st[1:-1])}\n \nIMPRESSION:\n \n1. {st[-1][1]}"
    )


def addendum(rng: random.Random, st: list[Statement]) -> str:
    """A first read, then an addendum adding the finding it missed (the last statement)."""
    first = _text(st[:-1]) or "No acute cardiopulmonary process."
    last = st[-1][1]
    return f"IMPRESSION: {first}\n\nADDENDUM: On further review, {last[0].lower()}{last[1:]}"


def anatomic_subheaders(rng: random.Random, st: list[Statement]) -> str:
    lines = [
        f"{ANATOMY[a]}: {s}" for a, s, _ in sorted(st, key=lambda s: list(ANATOMY).index(s[0]))
    ]
    return "FINDINGS:\n" + "\n".join(lines) + "\n\nIMPRESSION: As above."


def deidentified(rng: random.Random, st: list[Statement]) -> str:
    return (
        f"HISTORY: ___ with ___. {rng.choice(INDICATIONS)}\n\nCOMPARISON: ___ at ___.\n\n"
        f"FINDINGS: Compared to ___, {st[0][1][0].lower()}{st[0][1][1:]} {_text(st[1:])}\n\n"
        "Dr. ___ was notified by Dr. ___ at ___ on ___."
    )


def templated_normal(rng: random.Random, st: list[Statement]) -> str:
    return (
        "FINDINGS: "
        + " ".join(s for s, _ in NORMAL)
        + "\n\nIMPRESSION: No acute cardiopulmonary process."
    )


LAYOUTS: dict[str, Callable[[random.Random, list[Statement]], str]] = {
    "iu": iu,
    "mimic paragraphs": mimic_paragraphs,
    "context then findings": reason_then_findings,
    "numbered impression": numbered_impression,
    "all capitals": all_capitals,
    "one line": one_line,
    "wet read and final": wet_read,
    "addendum": addendum,
    "anatomic sub-headers": anatomic_subheaders,
    "de-identified": deidentified,
    "templated normal": templated_normal,
    "mimic dictation": mimic_dictation,
}


def expected(statements: list[Statement], normal: bool) -> str:
    truth: dict[str, int | None] = {}  # None: not mentioned
    for _, _, states in statements:
        truth.update(states)
    if normal:
        truth = {k: v for _, states in NORMAL for k, v in states.items()}
    findings = [v for k, v in truth.items() if k in FINDING_LABELS]
    truth_text = {k: "" if v is None else str(v) for k, v in truth.items()}
    truth_text["No Finding"] = "" if any(v in (1, -1) for v in findings) else "1"
    return ";".join(f"{k}={v}" for k, v in truth_text.items())


def main(per_layout: int = 20) -> None:
    rng = random.Random(25)
    rows = []
    for layout, make in LAYOUTS.items():
        for i in range(2 * len(MIMIC_STATEMENTS) if layout == "mimic dictation" else per_layout):
            st = _pick(rng, rng.randint(2, 4))
            if layout == "mimic dictation":  # one idiom among plain statements, after the history
                line, named = MIMIC_INDICATIONS[i % len(MIMIC_INDICATIONS)]
                own = MIMIC_STATEMENTS[i % len(MIMIC_STATEMENTS)]
                # where the idiom names no finding, no other statement about the same anatomy
                # does ("mass-like opacity" beside "crowded markings")
                apart = None in own[2].values()
                others = [x for x in st if not set(x[2]) & set(own[2])]
                st = [own, *(x for x in others if not (apart and x[0] == own[0]))][:3]
                judged = {k for x in st for k in x[2]}
                st = [("context", line, {n: None for n in named if n not in judged}), *st]
            if layout == "addendum":  # a first read without a present finding, then one added
                st = [x for x in st if 1 not in x[2].values()]
                judged = {k for x in st for k in x[2]}
                present = [x for x in STATEMENTS if 1 in x[2].values() and not set(x[2]) & judged]
                st = [*st, rng.choice(present)]
            report = make(rng, st)
            rows.append(
                {
                    "id": f"{layout.replace(' ', '-')}-{i:02d}",
                    "layout": layout,
                    "report": report,
                    "expected": expected(st, layout == "templated normal"),
                }
            )
    out = Path(__file__).with_name("layouts.csv")
    with open(out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["id", "layout", "report", "expected"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} reports in {len(LAYOUTS)} layouts to {out}")


if __name__ == "__main__":
    main()
