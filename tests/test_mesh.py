import math

from reportfed.data.iu import parse_report, report_text
from reportfed.data.mesh import mesh_to_labels, term_matches

XML = b"""<?xml version="1.0" encoding="utf-8"?>
<eCitation><uId id="CXR42"/>
<MedlineCitation><Article><Abstract>
<AbstractText Label="COMPARISON">None.</AbstractText>
<AbstractText Label="INDICATION">Dyspnea</AbstractText>
<AbstractText Label="FINDINGS">Small right pleural effusion. Mild cardiomegaly.</AbstractText>
<AbstractText Label="IMPRESSION">Effusion.</AbstractText>
</Abstract></Article></MedlineCitation>
<MeSH><major>Pleural Effusion/right/small</major><major>Cardiomegaly/mild</major>
<automatic>effusion</automatic></MeSH></eCitation>"""


def labels_of(*terms: str, **kw: bool) -> dict[str, float]:
    return mesh_to_labels(list(terms), **kw)


def positives(*terms: str, **kw: bool) -> set[str]:
    return {k for k, v in labels_of(*terms, **kw).items() if v == 1.0}


def test_parse_report_sections_and_mesh() -> None:
    r = parse_report(XML)
    assert r["uid"] == "CXR42"
    assert r["findings"].startswith("Small right") and r["impression"] == "Effusion."
    assert r["comparison"] == "None." and r["indication"] == "Dyspnea"
    assert r["mesh_major"] == ["Pleural Effusion/right/small", "Cardiomegaly/mild"]
    assert r["mesh_automatic"] == ["effusion"]
    assert report_text(r["findings"], r["impression"]).endswith("cardiomegaly. Effusion.")
    assert positives(*r["mesh_major"]) == {"Pleural Effusion", "Cardiomegaly"}


def test_term_matching_needs_heading_and_pattern_qualifiers() -> None:
    assert term_matches("Thickening/pleura/apex/bilateral", "Thickening/pleura")
    assert not term_matches("Thickening/bronchovascular", "Thickening/pleura")
    assert term_matches("opacity/lung/base", "Opacity")
    assert not term_matches("Opacity", "Opacity/lung")


def test_normal_is_no_finding_and_only_then() -> None:
    assert positives("normal") == {"No Finding"}
    assert positives("normal", "Nodule/lung") == {"Lung Lesion"}


def test_not_indexed_reports_are_missing_not_negative() -> None:
    assert all(math.isnan(v) for v in labels_of("No Indexing").values())
    assert all(math.isnan(v) for v in labels_of().values())


def test_rules_for_each_label() -> None:
    assert positives("Cardiac Shadow/enlarged/mild") == {"Cardiomegaly"}
    assert positives("Mediastinum/prominent") == {"Enlarged Cardiomediastinum"}
    # the conventions of the text rules (the CheXpert labeler's lists): congestion names Edema
    # hedged, a blunted costophrenic angle names none of the 14
    assert positives("Pulmonary Congestion/mild") == set()
    assert labels_of("Pulmonary Congestion/mild")["Edema"] == -1.0
    assert labels_of("Pulmonary Congestion/mild", "Pulmonary Edema")["Edema"] == 1.0
    assert positives("Costophrenic Angle/left/blunted") == set()
    assert positives("Hydropneumothorax/right") == {"Pneumothorax", "Pleural Effusion"}
    assert positives("Catheters, Indwelling") == {"Support Devices"}
    assert positives("Fractures, Bone/ribs/left") == {"Fracture"}
    assert positives("Airspace Disease/lung/base") == {"Lung Opacity"}
    assert positives("Markings/bronchovascular/prominent") == {"Lung Opacity"}
    assert positives("Markings/lung/interstitial/chronic") == {"Lung Opacity"}
    assert positives("Thickening/pleura/apex") == {"Pleural Other"}
    assert positives("Pulmonary Atelectasis/base/left") == {"Atelectasis"}
    assert positives("Consolidation/lung") == {"Consolidation"}
    assert positives("Pneumonia") == {"Pneumonia"}
    # Not findings of the 13: spine, aorta tortuosity, hyperinflation.
    assert (
        positives("Thoracic Vertebrae/degenerative", "Aorta/tortuous", "Lung/hyperdistention")
        == set()
    )


def test_crowded_bronchovascular_markings_are_no_finding() -> None:
    # IU's index of "low lung volumes crowd the bronchovascular markings", however qualified
    assert positives("Markings/bronchovascular", "Lung/hypoinflation") == set()
    assert positives("Markings/bronchovascular/mild") == set()
    assert positives("Markings/lung/base/bilateral/bronchovascular") == set()
    assert positives("Markings/lung/base/bronchovascular/increased") == {"Lung Opacity"}


def test_granulomas_are_lesions_only_when_asked() -> None:
    assert positives("Calcified Granuloma/lung/upper lobe/right") == set()
    assert positives("Calcified Granuloma/lung", granuloma_as_lesion=True) == {"Lung Lesion"}
