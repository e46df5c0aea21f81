"""Rules that map IU (Open-i) MeSH *major* index terms to the 14 CheXpert labels.

An IU MeSH major term is a slash-separated path: a heading and qualifiers, e.g.
``Pleural Effusion/right/small`` or ``Opacity/lung/base/left/patchy``. A rule is a pattern of the
same form; it matches a term when the headings are equal (case-insensitive) and every qualifier of
the pattern is among the term's qualifiers. A report is positive for a label when any of its
major terms matches any of the label's patterns, and negative otherwise: the IU indexers listed
every abnormality they saw, so absence of a term is a negative, not a missing annotation.

Choices worth knowing (tested in ``tests/test_mesh.py``):

* Calcified granulomas and granulomatous disease are *not* Lung Lesion (benign, healed findings in
  most IU reports); nodules and masses are. ``GRANULOMA_AS_LESION`` adds them.
* "Cardiac Shadow/enlarged" is Cardiomegaly (CheXpert's "enlarged cardiac silhouette");
  a prominent or widened mediastinum is Enlarged Cardiomediastinum.
* Crowded bronchovascular markings are no finding: IU indexes "low lung volumes crowd the
  bronchovascular markings" as ``Markings/bronchovascular`` (each of IU's 86 Markings terms
  with that qualifier is in a report that says "crowd"), which is not an opacity (:data:`CROWDED`);
  prominent or increased markings are Lung Opacity.
* The conventions of reportfed's text rules, which follow the CheXpert labeler's lists
  (docs/labels.md, "Conventions"): pulmonary congestion names Edema hedged (-1, where no term
  says edema), and a blunted costophrenic angle names no finding of the 14 (nor No Finding);
  scarring of the pleura and pleural thickening are Pleural Other.
* No Finding is positive exactly when the only major term is ``normal``.
* Reports indexed ``No Indexing`` were never annotated: every label is missing (NaN).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from reportfed.core.labels import CHEXPERT_14

RULES: Mapping[str, tuple[str, ...]] = {
    "Enlarged Cardiomediastinum": (
        "Mediastinum/prominent",
        "Mediastinum/enlarged",
        "Mediastinum/widened",
        "Aorta/enlarged",
    ),
    "Cardiomegaly": ("Cardiomegaly", "Cardiac Shadow/enlarged"),
    "Lung Lesion": ("Nodule", "Mass", "Cysts", "Cavitation", "Density/round"),
    "Lung Opacity": (
        "Opacity",
        "Airspace Disease",
        "Infiltrate",
        "Density/lung",
        "Markings/lung",
        "Markings/bronchovascular/prominent",
        "Markings/bronchovascular/increased",
        "Markings/interstitial",
        "Lung Diseases, Interstitial",
    ),
    "Edema": ("Pulmonary Edema",),
    "Consolidation": ("Consolidation",),
    "Pneumonia": ("Pneumonia",),
    "Atelectasis": ("Pulmonary Atelectasis",),
    "Pneumothorax": ("Pneumothorax", "Hydropneumothorax", "Hemopneumothorax"),
    "Pleural Effusion": (
        "Pleural Effusion",
        "Hydropneumothorax",
        "Hemothorax",
        "Hemopneumothorax",
    ),
    "Pleural Other": ("Thickening/pleura", "Cicatrix/pleura", "Pleura"),
    "Fracture": ("Fractures, Bone",),
    "Support Devices": (
        "Catheters, Indwelling",
        "Implanted Medical Device",
        "Surgical Instruments",
        "Tube, Inserted",
        "Medical Device",
        "Stents",
    ),
}

#: terms that name a label hedged: -1 where none of the label's :data:`RULES` matches
UNCERTAIN_RULES: Mapping[str, tuple[str, ...]] = {"Edema": ("Pulmonary Congestion",)}

#: Extra Lung Lesion patterns used when granulomas are counted as lesions.
GRANULOMA_AS_LESION: tuple[str, ...] = (
    "Calcified Granuloma",
    "Granuloma",
    "Granulomatous Disease",
)

#: the term IU gives crowded bronchovascular markings, and the qualifiers that make markings a
#: finding however they are indexed
CROWDED = "Markings/bronchovascular"
DENSER = frozenset({"prominent", "increased"})

NORMAL_TERM = "normal"
NOT_INDEXED_TERM = "no indexing"


def _split(term: str) -> tuple[str, frozenset[str]]:
    parts = [p.strip().lower() for p in term.split("/")]
    return parts[0], frozenset(p for p in parts[1:] if p)


def term_matches(term: str, pattern: str) -> bool:
    """Whether a MeSH major term matches a rule pattern (heading equal, qualifiers included)."""
    head, quals = _split(term)
    p_head, p_quals = _split(pattern)
    return head == p_head and p_quals <= quals


def _crowding(term: str) -> bool:
    """Whether ``term`` indexes crowded bronchovascular markings (:data:`CROWDED`, without
    a qualifier of :data:`DENSER`): no finding of the 14."""
    return term_matches(term, CROWDED) and not _split(term)[1] & DENSER


def mesh_to_labels(
    major_terms: Iterable[str], *, granuloma_as_lesion: bool = False
) -> dict[str, float]:
    """Map one report's MeSH major terms to CheXpert-14 labels (1.0, -1.0 for a label named
    hedged, 0.0, or NaN if not indexed)."""
    terms = [t for t in major_terms if t and t.strip()]
    lowered = {t.strip().lower() for t in terms}
    if not terms or NOT_INDEXED_TERM in lowered:
        return {name: math.nan for name in CHEXPERT_14}
    rules = dict(RULES)
    if granuloma_as_lesion:
        rules["Lung Lesion"] = rules["Lung Lesion"] + GRANULOMA_AS_LESION
    findings = [t for t in terms if not _crowding(t)]
    out = {
        label: float(any(term_matches(t, p) for t in findings for p in patterns))
        for label, patterns in rules.items()
    }
    for label, patterns in UNCERTAIN_RULES.items():
        if not out[label] and any(term_matches(t, p) for t in findings for p in patterns):
            out[label] = -1.0
    out["No Finding"] = float(lowered == {NORMAL_TERM})
    return {name: out[name] for name in CHEXPERT_14}
