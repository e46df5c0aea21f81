"""Write ``behaviour.csv``: short reports with the states a radiologist expects, by category.

Every sentence here was written for reportfed. Run ``python tests/data/make_behaviour_suite.py``
to regenerate the CSV (deterministic). Columns: ``id``, ``category``, ``report`` and
``expected`` (``Label=state`` pairs joined by ``;``; state 1 positive, 0 negated, -1 uncertain,
blank not mentioned). Only the labels in ``expected`` are judged.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

#: per finding: phrases that affirm it as a noun phrase, and bare names for cue templates
FINDINGS: dict[str, tuple[list[str], list[str]]] = {
    "Enlarged Cardiomediastinum": (
        [
            "a widened mediastinum",
            "mediastinal widening",
            "an enlarged cardiomediastinal silhouette",
        ],
        ["mediastinal widening", "widening of the mediastinum", "mediastinal enlargement"],
    ),
    "Cardiomegaly": (
        ["cardiomegaly", "cardiac enlargement", "an enlarged heart", "mild cardiomegaly"],
        ["cardiomegaly", "cardiac enlargement"],
    ),
    "Lung Lesion": (
        ["a pulmonary nodule", "a right upper lobe mass", "a spiculated nodule in the left apex"],
        ["a pulmonary nodule", "a lung mass", "a nodule"],
    ),
    "Lung Opacity": (
        [
            "a patchy opacity in the left lower lobe",
            "airspace disease at the right base",
            "hazy bilateral opacities",
        ],
        ["focal opacity", "airspace disease", "an opacity"],
    ),
    "Edema": (
        ["pulmonary edema", "interstitial edema", "moderate pulmonary edema"],
        ["pulmonary edema", "edema"],
    ),
    "Consolidation": (
        [
            "consolidation in the right lower lobe",
            "a dense consolidation of the lingula",
            "lobar consolidation",
        ],
        ["consolidation", "focal consolidation"],
    ),
    "Pneumonia": (
        ["pneumonia in the right lower lobe", "multifocal pneumonia", "a left basilar pneumonia"],
        ["pneumonia"],
    ),
    "Atelectasis": (
        [
            "bibasilar atelectasis",
            "subsegmental atelectasis at the left base",
            "plate-like atelectasis",
        ],
        ["atelectasis"],
    ),
    "Pneumothorax": (
        ["a small apical pneumothorax", "a right pneumothorax", "a tiny left pneumothorax"],
        ["pneumothorax"],
    ),
    "Pleural Effusion": (
        [
            "a small left pleural effusion",
            "bilateral pleural effusions",
            "a layering right effusion",
        ],
        ["pleural effusion", "effusion"],
    ),
    "Pleural Other": (
        [
            "pleural thickening at the right apex",
            "calcified pleural plaques",
            "pleural scarring on the left",
        ],
        ["pleural thickening", "pleural plaques"],
    ),
    "Fracture": (
        [
            "a fracture of the left seventh rib",
            "a displaced clavicle fracture",
            "a compression fracture of T8",
        ],
        ["fracture", "a rib fracture"],
    ),
    "Support Devices": (
        [
            "a right internal jugular central venous catheter",
            "an endotracheal tube above the carina",
            "a left chest wall pacemaker",
        ],
        ["a central venous catheter", "an endotracheal tube", "a nasogastric tube"],
    ),
}

AFFIRMED = [
    "There is {a}.",
    "Radiographs show {a}.",
    "{A} is again noted.",
    "Interval development of {a}.",
    "Findings consistent with {a}.",
    "The study demonstrates {a}.",
]
NEGATED = [
    "No {b}.",
    "There is no {b}.",
    "No evidence of {b}.",
    "Negative for {b}.",
    "The chest is free of {b}.",
    "Lungs are expanded without {b}.",
    "The previously seen {b} has resolved.",
]
UNCERTAIN = [
    "Possible {b}.",
    "{B} cannot be excluded.",
    "These findings may represent {b}.",
    "Questionable {b}.",
    "Likely {b}.",
    "Appearance suspicious for {b}.",
]
OPPOSITE = [
    "{A} without {b}.",
    "{A}. No {b}.",
    "There is {a}, but no {b}.",
    "No {b}. {A} is present.",
]
#: per family of phrasings, reports with the states they state (radiology usage and the CheXpert
#: labeler's phrase lists; "calcified nodules" and granulomas are not lung lesions there)
PHRASINGS: dict[str, list[tuple[str, dict[str, str]]]] = {
    "lesion phrasings": [
        ("A 6 mm nodule in the right upper lobe.", {"Lung Lesion": "1"}),
        ("There is a 2.3 cm spiculated mass in the left upper lobe.", {"Lung Lesion": "1"}),
        ("Right perihilar mass measuring 4 cm.", {"Lung Lesion": "1"}),
        ("Multiple pulmonary nodules consistent with metastatic disease.", {"Lung Lesion": "1"}),
        ("Cavitary lesion in the left lower lobe.", {"Lung Lesion": "1"}),
        ("A 1 cm nodular opacity projects over the left mid lung.", {"Lung Lesion": "1"}),
        ("Coin lesion in the right upper lobe.", {"Lung Lesion": "1"}),
        ("Left apical mass-like opacity.", {"Lung Lesion": "1"}),
        ("Masslike consolidation in the right upper lobe.", {"Lung Lesion": "1"}),
        ("Innumerable bilateral nodules.", {"Lung Lesion": "1"}),
        ("Pulmonary metastases are again seen.", {"Lung Lesion": "1"}),
        ("Right upper lobe pulmonary nodule is unchanged.", {"Lung Lesion": "1"}),
        ("No suspicious pulmonary nodules or masses.", {"Lung Lesion": "0"}),
        ("The previously seen nodule is no longer visualized.", {"Lung Lesion": "0"}),
        ("Possible nodule at the left base.", {"Lung Lesion": "-1"}),
        ("Rounded opacity in the right lower lobe may represent a nodule.", {"Lung Lesion": "-1"}),
        ("Nodular density at the right base may represent artifact.", {"Lung Lesion": "-1"}),
        ("The nodular density represents an artifact.", {"Lung Lesion": "0"}),
    ],
    "pneumothorax phrasings": [
        ("Bilateral pneumothoraces.", {"Pneumothorax": "1"}),
        ("Small left PTX.", {"Pneumothorax": "1"}),
        ("Tension pneumothorax on the left.", {"Pneumothorax": "1"}),
        ("Hydropneumothorax at the right base.", {"Pneumothorax": "1"}),
        ("Right pneumothorax has slightly increased in size.", {"Pneumothorax": "1"}),
        ("Persistent small left basilar pneumothorax.", {"Pneumothorax": "1"}),
        ("Pneumothorax is again seen at the right apex.", {"Pneumothorax": "1"}),
        ("Loculated pneumothorax at the left base.", {"Pneumothorax": "1"}),
        ("Right apical PTX is smaller.", {"Pneumothorax": "1"}),
        ("No pneumothoraces.", {"Pneumothorax": "0"}),
        ("Pneumothorax has resolved.", {"Pneumothorax": "0"}),
        ("No pneumothorax is seen after chest tube removal.", {"Pneumothorax": "0"}),
        ("Apical lucency may represent a small pneumothorax.", {"Pneumothorax": "-1"}),
        ("Questionable tiny left apical pneumothorax.", {"Pneumothorax": "-1"}),
        ("Small medial left upper lobe pleural air collection.", {"Pneumothorax": "1"}),
        ("Air in the right pleural space is unchanged.", {"Pneumothorax": "1"}),
        ("No pleural air collections.", {"Pneumothorax": "0"}),
    ],
    "pleural other phrasings": [
        ("Bilateral calcified pleural plaques.", {"Pleural Other": "1"}),
        ("Right apical pleural thickening is unchanged.", {"Pleural Other": "1"}),
        ("Thickening of the pleura at the right apex.", {"Pleural Other": "1"}),
        ("Biapical pleural-parenchymal scarring.", {"Pleural Other": "1"}),
        ("Pleural-based calcifications along the left hemithorax.", {"Pleural Other": "1"}),
        (
            "Calcified plaques along the diaphragm from prior asbestos exposure.",
            {"Pleural Other": "1"},
        ),
        ("Left pleural scar is stable.", {"Pleural Other": "1"}),
        ("No pleural thickening.", {"Pleural Other": "0"}),
        (
            "Small left effusion versus pleural thickening.",
            {"Pleural Other": "-1", "Pleural Effusion": "-1"},
        ),
    ],
    "hedges after the finding": [
        ("Left basilar opacity, likely atelectasis.", {"Atelectasis": "-1", "Lung Opacity": "1"}),
        ("Right lower lobe opacity, pneumonia not excluded.", {"Pneumonia": "-1"}),
        ("Right basilar opacity which may be pneumonia.", {"Pneumonia": "-1"}),
        ("Opacity in the right lower lobe, possibly pneumonia.", {"Pneumonia": "-1"}),
        ("Left lower lobe pneumonia is possible.", {"Pneumonia": "-1"}),
        ("Left lower lobe consolidation, concerning for pneumonia.", {"Pneumonia": "-1"}),
        ("Pneumonia is a consideration.", {"Pneumonia": "-1"}),
        ("Infection is not excluded.", {"Pneumonia": "-1"}),
        ("Mild edema is likely.", {"Edema": "-1"}),
        ("Superimposed pneumonia cannot be entirely excluded.", {"Pneumonia": "-1"}),
        ("Early pneumonia would be difficult to exclude.", {"Pneumonia": "-1"}),
        ("Right lower lobe opacity could reflect pneumonia.", {"Pneumonia": "-1"}),
        ("Underlying atelectasis suspected.", {"Atelectasis": "-1"}),
        ("Small bilateral pleural effusions suspected.", {"Pleural Effusion": "-1"}),
        ("Pneumonia is not suspected.", {"Pneumonia": "0"}),
        ("No pneumothorax is suspected.", {"Pneumothorax": "0"}),
    ],
    "alternatives": [
        (
            "Bibasilar opacities, atelectasis versus pneumonia.",
            {"Atelectasis": "-1", "Pneumonia": "-1", "Lung Opacity": "1"},
        ),
        ("Atelectasis or pneumonia at the left base.", {"Atelectasis": "-1", "Pneumonia": "-1"}),
        ("Streaky opacities may be atelectasis or scarring.", {"Atelectasis": "-1"}),
        ("Opacity which could represent aspiration or pneumonia.", {"Pneumonia": "-1"}),
        (
            "Left base opacity, atelectasis vs. consolidation.",
            {"Atelectasis": "-1", "Consolidation": "-1", "Lung Opacity": "1"},
        ),
        (
            "Pneumonia versus atelectasis, and a small left pleural effusion.",
            {"Pneumonia": "-1", "Atelectasis": "-1", "Pleural Effusion": "1"},
        ),
        (
            "Small right effusion, atelectasis vs pneumonia in the right base.",
            {"Pleural Effusion": "1", "Atelectasis": "-1", "Pneumonia": "-1"},
        ),
        (
            "Pleural effusion, right greater than left, versus pleural thickening.",
            {"Pleural Effusion": "-1", "Pleural Other": "-1"},
        ),
        ("Atelectasis versus scarring at the left base.", {"Atelectasis": "-1"}),
    ],
    "devices removed": [
        ("The endotracheal tube has been removed.", {"Support Devices": "0"}),
        ("Interval removal of the right chest tube.", {"Support Devices": "0"}),
        ("The nasogastric tube is no longer seen.", {"Support Devices": "0"}),
        ("Right IJ catheter has been removed.", {"Support Devices": "0"}),
        ("Status post removal of the PICC line.", {"Support Devices": "0"}),
        ("Endotracheal and nasogastric tubes have been removed.", {"Support Devices": "0"}),
        ("The patient has been extubated.", {"Support Devices": "0"}),
        ("Chest tube was pulled.", {"Support Devices": "0"}),
        ("Left chest tube remains in place.", {"Support Devices": "1"}),
        (
            "The endotracheal tube was pulled back 2 cm and terminates above the carina.",
            {"Support Devices": "1"},
        ),
        ("The endotracheal tube has not been removed.", {"Support Devices": "1"}),
        ("The left chest tube was not removed.", {"Support Devices": "1"}),
    ],
    # characters that show nothing, after a full stop: two sentences, as the report looks
    "invisible characters": [
        (
            f"No pneumothorax.{c} Small left pleural effusion.",
            {"Pneumothorax": "0", "Pleural Effusion": "1", "No Finding": ""},
        )
        for c in ("\u200b", "\ufeff", "\u202a", "\u202c", "\u202e", "\u2066", "\u2069")
    ]
    + [
        (
            "No pleural effusion.\u200b Mild cardiomegaly.",
            {"Pleural Effusion": "0", "Cardiomegaly": "1"},
        )
    ],
    # a size or abnormality word belongs to the finding of its own clause
    "coordinated clauses": [
        (
            "The heart is normal and there is a large left pleural effusion.",
            {"Cardiomegaly": "0", "Pleural Effusion": "1"},
        ),
        (
            "Heart size is normal and there is a large right pneumothorax.",
            {"Cardiomegaly": "0", "Pneumothorax": "1"},
        ),
        (
            "The mediastinum is normal and there is a large right pleural effusion.",
            {"Enlarged Cardiomediastinum": "0", "Pleural Effusion": "1"},
        ),
        (
            "The cardiac silhouette is normal but there is a large left effusion.",
            {"Cardiomegaly": "0", "Pleural Effusion": "1"},
        ),
        (
            "The heart is enlarged and there is a small left pleural effusion.",
            {"Cardiomegaly": "1", "Pleural Effusion": "1"},
        ),
    ],
    # reports in another language: no state at all, never a finding read from a shared word
    "other languages": [
        ("Kein Pneumothorax.", {"Pneumothorax": "", "No Finding": ""}),
        ("Pas de pneumothorax.", {"Pneumothorax": "", "No Finding": ""}),
        ("Sin derrame pleural. No hay neumotórax.", {"Pneumothorax": "", "No Finding": ""}),
        ("Kein Pleuraerguss. Herz normal groß.", {"Cardiomegaly": "", "No Finding": ""}),
    ],
    # MIMIC-style dictation (issue 60's families): the history is no finding of this study
    "history is not a finding": [
        (
            "INDICATION: ___M with CHF, now short of breath.\n\nFINDINGS: The lungs are clear.",
            {"Edema": "", "No Finding": "1"},
        ),
        (
            "___F s/p CABG, chest tube pulled this morning. // ?PTX\n\nIMPRESSION: No "
            "pneumothorax.",
            {"Pneumothorax": "0", "Support Devices": "", "No Finding": "1"},
        ),
        (
            "Reason for exam: rib fractures after a fall.\n\nIMPRESSION: No acute "
            "cardiopulmonary process.",
            {"Fracture": "", "No Finding": "1"},
        ),
        (
            "HISTORY\n___-year-old woman with pneumonia last month.\n\nFINDINGS\nHeart size is "
            "normal. The lungs are clear.",
            {"Pneumonia": "", "Cardiomegaly": "0", "No Finding": "1"},
        ),
        (
            "CLINICAL INFORMATION: pacemaker placement.\n\nFINDINGS: Left chest wall pacemaker "
            "with leads in the right atrium and ventricle.",
            {"Support Devices": "1"},
        ),
        (
            "___-year-old man with fever and cough, evaluate for pneumonia.\n\nNo focal "
            "consolidation. No pleural effusion.",
            {"Pneumonia": "", "Consolidation": "0", "Pleural Effusion": "0", "No Finding": "1"},
        ),
        (
            "Chest pain, r/o pneumothorax?\n\nThe lungs are clear without pneumothorax.",
            {"Pneumothorax": "0", "No Finding": "1"},
        ),
        (
            "___M with known cardiomegaly and ESRD. // fluid overload?\n\nFINDINGS: Mild "
            "pulmonary edema.",
            {"Cardiomegaly": "", "Edema": "1"},
        ),
    ],
    "if any": [
        ("Trace right pleural effusion, if any.", {"Pleural Effusion": "-1"}),
        ("Any pneumothorax is very small.", {"Pneumothorax": "-1"}),
        ("Atelectasis, if present, is mild.", {"Atelectasis": "-1"}),
        ("Minimal pulmonary edema, if any.", {"Edema": "-1"}),
        ("Any residual effusion is small.", {"Pleural Effusion": "-1"}),
    ],
    "caveat after a negation": [
        ("No pneumothorax, although the apices are not well seen.", {"Pneumothorax": "0"}),
        (
            "No pleural effusion; sensitivity for effusion is limited on a supine film.",
            {"Pleural Effusion": "0"},
        ),
        ("No consolidation, though evaluation is limited by motion.", {"Consolidation": "0"}),
        ("Early pneumonia could be obscured by the overlying soft tissues.", {"Pneumonia": "-1"}),
        (
            "No pneumothorax is identified, but evaluation for pneumothorax is limited by "
            "positioning.",
            {"Pneumothorax": "0"},
        ),
    ],
    "seen finding, hedged cause": [
        (
            "Streaky opacity at the left base, possibly representing atelectasis.",
            {"Lung Opacity": "1", "Atelectasis": "-1"},
        ),
        (
            "Right lower lobe consolidation likely representing pneumonia.",
            {"Consolidation": "1", "Pneumonia": "-1", "Lung Opacity": ""},
        ),
        ("Left basilar opacity, likely atelectasis.", {"Lung Opacity": "1", "Atelectasis": "-1"}),
        ("Mediastinal widening, probably due to rotation.", {"Enlarged Cardiomediastinum": "1"}),
        (
            "Right basilar opacity, presumed pneumonia.",
            {"Lung Opacity": "1", "Pneumonia": "-1"},
        ),
        (
            "Patchy opacities, favored to represent atelectasis.",
            {"Lung Opacity": "1", "Atelectasis": "-1"},
        ),
        (
            "Lingular opacity may reflect atelectasis or early pneumonia.",
            {"Lung Opacity": "1", "Atelectasis": "-1", "Pneumonia": "-1"},
        ),
    ],
    "normal-range size": [
        ("The heart size is at the upper limit of normal.", {"Cardiomegaly": "0"}),
        ("Top normal heart size.", {"Cardiomegaly": "0"}),
        ("Cardiac silhouette is borderline normal in size.", {"Cardiomegaly": "0"}),
        ("The heart is borderline enlarged.", {"Cardiomegaly": "-1"}),
        ("Borderline cardiomegaly.", {"Cardiomegaly": "-1"}),
    ],
    "lesions and collapse by other names": [
        ("Right hilar mass.", {"Lung Lesion": "1"}),
        ("Multiple pulmonary nodular opacities.", {"Lung Lesion": "1"}),
        ("Cavitary lesion in the left upper lobe.", {"Lung Lesion": "1"}),
        ("Complete collapse of the left lower lobe.", {"Atelectasis": "1"}),
        ("Right middle lobe volume loss.", {"Atelectasis": "1"}),
        ("Postobstructive collapse of the right upper lobe.", {"Atelectasis": "1"}),
        ("Stable anterior mediastinal mass.", {"Lung Lesion": ""}),
        ("Large thyroid goiter deviates the trachea.", {"Lung Lesion": ""}),
    ],
    "hardware is not a fracture": [
        ("Fractured sternotomy wire.", {"Support Devices": "1", "Fracture": ""}),
        ("Broken sternal wires are unchanged.", {"Support Devices": "1", "Fracture": ""}),
        ("Fracture of the pacemaker lead.", {"Support Devices": "1", "Fracture": ""}),
    ],
    "no finding named": [
        (
            "Low lung volumes with crowding of the bronchovascular markings.",
            {"Lung Opacity": "", "No Finding": "1"},
        ),
        (
            "Lung volumes are low, crowding the bronchovascular markings.",
            {"Lung Opacity": "", "No Finding": "1"},
        ),
        ("The patient is rotated to the left.", {"Lung Opacity": "", "No Finding": "1"}),
        (
            "HISTORY: cardiomegaly.\n\nFINDINGS: The lungs are clear.",
            {"Cardiomegaly": "", "No Finding": "1"},
        ),
        (
            "INDICATION: ___M with pacemaker.\n\nFINDINGS: The lungs are clear.",
            {"Support Devices": "", "No Finding": "1"},
        ),
    ],
    "structured fields": [
        ("Lines and tubes: None.", {"Support Devices": "0"}),
        ("Pneumothorax: None.", {"Pneumothorax": "0"}),
        ("Pleural effusion: absent.", {"Pleural Effusion": "0"}),
        ("Lines and tubes: The endotracheal tube has been removed.", {"Support Devices": "0"}),
        ("Tubes and lines: Right PICC tip in the SVC.", {"Support Devices": "1"}),
        ("Pleural effusion: Small right.", {"Pleural Effusion": "1"}),
        ("Pneumothorax: Small left apical.", {"Pneumothorax": "1"}),
        ("Pneumothorax: Questionable small left apical.", {"Pneumothorax": "-1"}),
    ],
    "addenda": [
        (
            "IMPRESSION: Right upper lobe nodule.\n\nADDENDUM: The previously reported nodule is "
            "artifact from an overlying nipple shadow.",
            {"Lung Lesion": "0"},
        ),
        (
            "IMPRESSION: Small left pleural effusion.\n\nADDENDUM: The effusion was not confirmed "
            "on the lateral view.",
            {"Pleural Effusion": "0"},
        ),
        (
            "FINDINGS: Right apical pneumothorax.\n\nADDENDUM: The apical lucency represents a skin "
            "fold; there is no pneumothorax.",
            {"Pneumothorax": "0"},
        ),
        (
            "IMPRESSION: No acute cardiopulmonary process.\n\nADDENDUM: On further review, there is "
            "a small left pneumothorax.",
            {"Pneumothorax": "1"},
        ),
        (
            "IMPRESSION: Left lower lobe opacity, likely atelectasis.\n\nADDENDUM: With the lateral "
            "view, this represents left lower lobe pneumonia.",
            {"Pneumonia": "1", "Atelectasis": "-1"},
        ),
    ],
    "vascular prominence": [
        # signs of congestion name Edema hedged; venous hypertension names it not at all (the
        # CheXpert labeler's lists: docs/labels.md, "Conventions")
        ("Prominence of the central pulmonary vasculature.", {"Edema": "-1"}),
        ("Prominent central vasculature, unchanged.", {"Edema": "-1"}),
        ("The pulmonary vascularity is prominent.", {"Edema": "-1"}),
        ("Cardiomegaly with pulmonary venous hypertension.", {"Edema": "", "Cardiomegaly": "1"}),
        ("Stable cardiomegaly and increased pulmonary vascularity.", {"Edema": "-1"}),
        ("Engorged pulmonary vessels.", {"Edema": "-1"}),
        ("The pulmonary vasculature is mildly engorged.", {"Edema": "-1"}),
        ("No increased pulmonary vascularity.", {"Edema": "0"}),
        ("Possible mild pulmonary vascular congestion.", {"Edema": "-1"}),
        ("Pulmonary vascularity is normal.", {"Edema": ""}),
    ],
    "mediastinal prominence": [
        ("Prominence of the superior mediastinum.", {"Enlarged Cardiomediastinum": "1"}),
        ("Mild nonspecific prominence of the mediastinum.", {"Enlarged Cardiomediastinum": "1"}),
        ("The superior mediastinum is widened.", {"Enlarged Cardiomediastinum": "1"}),
        ("The mediastinum is not widened.", {"Enlarged Cardiomediastinum": "0"}),
        ("No mediastinal prominence.", {"Enlarged Cardiomediastinum": "0"}),
    ],
    "densities": [
        ("Subtle airspace density at the right base.", {"Lung Opacity": "1"}),
        (
            "Increasing density in the superior segment of the left lower lobe.",
            {"Lung Opacity": "1"},
        ),
        ("Scattered interstitial densities.", {"Lung Opacity": "1"}),
        ("Left base density.", {"Lung Opacity": "1"}),
        (
            "Density in the left lung base may represent atelectasis.",
            {"Lung Opacity": "1", "Atelectasis": "-1"},
        ),
        ("No focal density in the lungs.", {"Lung Opacity": "0"}),
        ("Soft tissue density overlies the left chest wall.", {"Lung Opacity": ""}),
        (
            "The nodular density in the right upper lobe is not well seen on today's study.",
            {"Lung Lesion": "0"},
        ),
    ],
    "partial resolution": [
        ("The right pneumothorax has nearly resolved.", {"Pneumothorax": "1"}),
        ("Almost completely resolved left apical pneumothorax.", {"Pneumothorax": "1"}),
        ("Partial resolution of the left pleural effusion.", {"Pleural Effusion": "1"}),
        ("Near complete resolution of the right lower lobe consolidation.", {"Consolidation": "1"}),
        ("The left effusion has not completely resolved.", {"Pleural Effusion": "1"}),
        ("The right pleural effusion has not resolved.", {"Pleural Effusion": "1"}),
        ("The left pleural effusion has resolved.", {"Pleural Effusion": "0"}),
        ("Resolution of the right lower lobe pneumonia.", {"Pneumonia": "0"}),
    ],
    # characters that show nothing, other scripts' full stops, a missing space: round three's
    # red-team cases (issue 71), at the end so that the earlier reports keep their ids
    "invisible characters, round three": [
        (
            f"No pneumothorax.{c}Small left pleural effusion.",
            {"Pneumothorax": "0", "Pleural Effusion": "1", "No Finding": ""},
        )
        for c in ("\u034f ", "\ufe0f ", "\u2800", "\u2060", "\ufeff", "")
    ]
    + [
        ("Mild cardio\u200bmegaly.", {"Cardiomegaly": "1"}),
        ("N\u200bo pneumothorax.", {"Pneumothorax": "0"}),
    ],
    "ideographic stops": [
        (
            "No pneumothorax\u3002Small left pleural effusion\u3002",
            {"Pneumothorax": "0", "Pleural Effusion": "1", "No Finding": ""},
        ),
        (
            "No pleural effusion\uff61 Mild cardiomegaly.",
            {"Pleural Effusion": "0", "Cardiomegaly": "1"},
        ),
    ],
    "telegraphic English": [
        ("Non-displaced left 6th rib fracture. Non-specific bowel gas pattern.", {"Fracture": "1"}),
        ("Moderate cardiomegaly. Dr. Müller notified.", {"Cardiomegaly": "1"}),
        ("LA enlargement. Cardiomegaly.", {"Cardiomegaly": "1"}),
    ],
    # a report in two languages keeps its English sentences' states; another language's
    # template answers are refused, never affirmed
    "bilingual reports": [
        (
            "Heart size is normal. The lungs are clear. Pas de pneumothorax.",
            {"Cardiomegaly": "0", "Pneumothorax": "", "No Finding": "1"},
        ),
        (
            "Heart size is normal. The lungs are clear. Kein Pneumothorax.",
            {"Cardiomegaly": "0", "Pneumothorax": "", "No Finding": "1"},
        ),
        ("Pneumothorax: nein.", {"Pneumothorax": "", "No Finding": ""}),
        ("Pneumothorax: nej.", {"Pneumothorax": "", "No Finding": ""}),
    ],
}
#: neutral sentences and the findings each one touches (never used for those findings)
FILLERS: list[tuple[str, set[str]]] = [
    (
        "The lungs are clear.",
        {"Lung Opacity", "Consolidation", "Pneumonia", "Edema", "Atelectasis"},
    ),
    ("Heart size is normal.", {"Cardiomegaly", "Enlarged Cardiomediastinum"}),
    ("Mediastinal contours are unremarkable.", {"Enlarged Cardiomediastinum", "Cardiomegaly"}),
    ("No pleural effusion.", {"Pleural Effusion", "Pleural Other"}),
    ("No pneumothorax is seen.", {"Pneumothorax"}),
    ("The trachea is midline.", set()),
    ("Degenerative changes are present in the thoracic spine.", {"Fracture"}),
    ("The aorta is mildly tortuous.", {"Enlarged Cardiomediastinum"}),
    ("Visualized upper abdomen is unremarkable.", set()),
    ("Bony thorax is intact.", {"Fracture"}),
    ("Stable moderate cardiomegaly.", {"Cardiomegaly", "Enlarged Cardiomediastinum"}),
    ("Small left effusion.", {"Pleural Effusion", "Pleural Other"}),
    ("Mild bibasilar atelectasis.", {"Atelectasis", "Lung Opacity"}),
    ("Soft tissues are within normal limits.", set()),
    ("Both hemidiaphragms are well defined.", set()),
    ("No focal airspace consolidation.", {"Consolidation", "Lung Opacity", "Pneumonia"}),
]
#: sections of long reports: sentences about the study, not about any finding
LONG_INDICATION = (
    "___-year-old patient with a history of hypertension, type 2 diabetes and chronic kidney "
    "disease, presenting to the emergency department with three days of worsening shortness of "
    "breath, productive cough and low-grade fevers, now with an oxygen requirement of two liters "
    "by nasal cannula; evaluate the chest."
)
LONG_TECHNIQUE = (
    "Frontal and lateral radiographs of the chest were obtained with the patient upright. The "
    "exposure is adequate and the patient is mildly rotated to the right."
)
LONG_COMPARISON = "Prior chest radiographs from ___ and ___, and a chest CT from ___."
LONG_NEUTRAL = [
    "The trachea is midline and the main bronchi are patent.",
    "The thoracic inlet appears unremarkable on this single frontal view.",
    "The visualized upper abdomen shows a nonobstructive bowel gas pattern.",
    "Soft tissues of the chest wall and the axillae are within normal limits.",
    "Both hemidiaphragms are well defined and there is no free air below them.",
    "The thoracic spine shows mild multilevel degenerative endplate changes, similar to prior.",
    "Calcification of the aortic knob is again noted and is unchanged.",
    "The patient's chin partially obscures the lung apices on the frontal image.",
    "Overlying monitoring wires and snaps partially obscure the lower chest.",
    "The hila are symmetric in size and configuration.",
    "Surgical changes in the neck are unchanged from the prior examination.",
    "There is no subdiaphragmatic free gas on the upright view.",
]


def _cap(text: str) -> str:
    return text[0].upper() + text[1:]


def _expect(**states: str) -> str:
    return ";".join(f"{label}={state}" for label, state in states.items())


def _row(rows: list[dict[str, str]], category: str, report: str, expected: str) -> None:
    rows.append(
        {
            "id": f"b{len(rows) + 1:04d}",
            "category": category,
            "report": report,
            "expected": expected,
        }
    )


def build() -> list[dict[str, str]]:
    """Every report of the suite, in a fixed order."""
    rng = random.Random(13)
    rows: list[dict[str, str]] = []
    names = list(FINDINGS)
    for label, (phrases, bare) in FINDINGS.items():
        for k, template in enumerate(AFFIRMED):
            a = phrases[k % len(phrases)]
            _row(rows, "affirmed", template.format(a=a, A=_cap(a)), _expect(**{label: "1"}))
        for k, template in enumerate(NEGATED):
            b = bare[k % len(bare)].removeprefix("a ").removeprefix("an ")
            _row(rows, "negated", template.format(b=b, B=_cap(b)), _expect(**{label: "0"}))
        for k, template in enumerate(UNCERTAIN):
            b = bare[k % len(bare)].removeprefix("a ").removeprefix("an ")
            _row(rows, "uncertain", template.format(b=b, B=_cap(b)), _expect(**{label: "-1"}))
        free = [s for s, touches in FILLERS if label not in touches]
        for _ in range(5):
            report = " ".join(rng.sample(free, 3))
            _row(rows, "not mentioned", report, _expect(**{label: ""}))
        for k in range(3):
            findings = " ".join(rng.sample(LONG_NEUTRAL, 9))
            impression = AFFIRMED[k].format(
                a=phrases[k % len(phrases)], A=_cap(phrases[k % len(phrases)])
            )
            report = (
                f"EXAMINATION: CHEST PA AND LATERAL\n\nINDICATION: {LONG_INDICATION}\n\n"
                f"TECHNIQUE: {LONG_TECHNIQUE}\n\nCOMPARISON: {LONG_COMPARISON}\n\n"
                f"FINDINGS:\n{findings}\n\nIMPRESSION:\n{impression}"
            )
            _row(rows, "long, finding in impression", report, _expect(**{label: "1"}))
    related = {
        frozenset(p)
        for p in [
            ("Cardiomegaly", "Enlarged Cardiomediastinum"),
            ("Lung Opacity", "Consolidation"),
            ("Lung Opacity", "Pneumonia"),
            ("Consolidation", "Pneumonia"),
            ("Lung Opacity", "Atelectasis"),
            ("Lung Opacity", "Edema"),
            ("Pleural Effusion", "Pleural Other"),
            ("Lung Lesion", "Lung Opacity"),
        ]
    }
    pairs = [(a, b) for a in names for b in names if a != b and frozenset((a, b)) not in related]
    for k, (pos, neg) in enumerate(rng.sample(pairs, 52)):
        a = FINDINGS[pos][0][k % len(FINDINGS[pos][0])]
        b = FINDINGS[neg][1][k % len(FINDINGS[neg][1])].removeprefix("a ").removeprefix("an ")
        report = OPPOSITE[k % len(OPPOSITE)].format(a=a, A=_cap(a), b=b)
        _row(rows, "opposite polarity", report, _expect(**{pos: "1", neg: "0"}))
    for category, reports in PHRASINGS.items():
        for report, states in reports:
            _row(rows, category, report, _expect(**states))
    return rows


def main() -> None:
    path = Path(__file__).with_name("behaviour.csv")
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["id", "category", "report", "expected"])
        writer.writeheader()
        writer.writerows(build())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
