import numpy as np
import pytest

from reportfed.text.assertion import find_mentions, report_assertions
from reportfed.text.states import chexpert_states, report_mentions

NEGATIONS = [
    "No {x}.",
    "There is no {x}.",
    "The lungs are expanded without {x}.",
    "Free of {x}.",
    "Negative for {x}.",
    "No evidence of {x}.",
    "Resolved {x}.",
    "The {x} has resolved.",
    "The {x} is not seen.",
    "No focal consolidation, large {x}, or pneumothorax is identified.",
]
UNCERTAIN = [
    "Possible {x}.",
    "{x} cannot be excluded.",
    "Cannot exclude {x}.",
    "This may represent {x}.",
    "Questionable {x}.",
    "Likely {x}.",
    "Opacity concerning for {x}.",
    "Atelectasis versus {x}.",
]


@pytest.mark.parametrize(
    ("text", "finding"),
    [  # IU's dictation, where an adverb stood inside the hedge and the finding read as positive
        ("Malignancy cannot be confidently excluded on the available images.", "Lung Lesion"),
        ("The be difficult to completely exclude a superimposed pneumonia.", "Pneumonia"),
    ],
)
def test_an_adverb_inside_a_hedge_keeps_it_a_hedge(text: str, finding: str) -> None:
    assert report_assertions(text, [finding]) == {finding: "uncertain"}


@pytest.mark.parametrize(
    ("text", "finding", "likely"),
    [  # IU's dictation
        ("Minimal left basilar subsegmental atelectasis or scarring.", "Atelectasis", True),
        ("Borderline cardiomegaly.", "Cardiomegaly", True),
        (
            "There continues to be some left base opacities which may represent atelectasis.",
            "Atelectasis",
            False,
        ),
        # the weaker hedge governs the alternative it opens
        (
            "Mild blunting left costophrenic recess, possibly mild atelectasis or scarring.",
            "Atelectasis",
            False,
        ),
    ],
)
def test_a_hedge_that_leans_to_present_is_still_uncertain_and_flags_the_calibration(
    text: str, finding: str, likely: bool
) -> None:
    """Alternatives, "probable" and "borderline" lean to present (the OpenI gold calls most of
    them present, and few of the other hedges): still -1, and the calibration's ``likely``
    feature says which."""
    from reportfed.text.assertion import decisive_mentions
    from reportfed.text.calibration import FEATURES, calibration_features

    mention = decisive_mentions(text, [finding])[finding]
    assert mention is not None and mention.assertion == "uncertain"
    assert mention.likely is likely
    flags = calibration_features(np.array([[0.5]]), [{finding: mention}], [finding])[0, 0]
    assert dict(zip(FEATURES, flags, strict=True)) == {
        "logit": 0.0, "affirmed": 0.0, "negated": 0.0, "uncertain": 1.0, "likely": float(likely)
    }  # fmt: skip


def test_the_lean_is_fitted_after_the_other_coefficients_and_moves_nothing_else() -> None:
    """With the ``likely`` flags or without them, every other coefficient is the same, so only a
    leaning hedge's probability moves; the lean is found where leaning hedges are mostly true."""
    from reportfed.text.calibration import FEATURES, fit_calibration

    rng = np.random.default_rng(0)
    x = np.zeros((3000, 2, len(FEATURES)))
    x[..., 0] = rng.normal(size=(3000, 2))
    flag = rng.integers(0, 4, size=(3000, 2))  # none, affirmed, negated, uncertain
    for f in (1, 2, 3):
        x[..., f] = flag == f
    x[..., 4] = (flag == 3) & (rng.random((3000, 2)) < 0.5)
    z = x[..., 0] + 2 * x[..., 1] - 2 * x[..., 2] - x[..., 3] + 3 * x[..., 4]
    y = (rng.random((3000, 2)) < 1 / (1 + np.exp(-z))).astype(float)
    with_lean, _ = fit_calibration(x, y)
    without = x.copy()
    without[..., 4] = 0
    plain, _ = fit_calibration(without, y)
    np.testing.assert_array_equal(np.delete(with_lean, 4, axis=1), np.delete(plain, 4, axis=1))
    assert (plain[:, 4] == 0).all() and (with_lean[:, 4] > 1).all()


@pytest.mark.parametrize(
    "text",  # IU's dictation
    [
        "There is blunting of the bilateral costophrenic sulci.",
        "Mild blunting left costophrenic recess.",
        "The left costophrenic sulcus is blunted.",
        "Minimal right costophrenic XXXX blunting.",  # IU's de-identification took "angle"
        "Costophrenic XXXX are blunted.",
    ],
)
def test_a_blunted_costophrenic_angle_is_no_effusion_but_is_a_finding(text: str) -> None:
    """The conventions table's rule, by the CheXpert labeler's lists: its effusion phrases are
    "effusion" and "pleural fluid", and "blunt" rules out No Finding."""
    from reportfed.text.assertion import breaks_no_finding

    assert report_assertions(text, ["Pleural Effusion"]) == {"Pleural Effusion": None}
    assert breaks_no_finding(text)


def test_a_costophrenic_angle_said_not_blunted_is_no_finding() -> None:
    from reportfed.text.assertion import breaks_no_finding

    assert not breaks_no_finding(
        "There is no pleural line to suggest pneumothorax or costophrenic XXXX blunting to "
        "suggest large pleural effusion."  # IU's dictation
    )


@pytest.mark.parametrize("template", NEGATIONS)
def test_negation_cues(template: str) -> None:
    assert report_assertions(template.format(x="pleural effusion"), ["Pleural Effusion"]) == {
        "Pleural Effusion": "negated"
    }


@pytest.mark.parametrize("template", UNCERTAIN)
def test_uncertainty_cues(template: str) -> None:
    text = template.format(x="pneumonia")
    assert report_assertions(text, ["Pneumonia"])["Pneumonia"] == "uncertain"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Cardiomegaly without edema.", {"Cardiomegaly": "affirmed", "Edema": "negated"}),
        (
            "Small effusion, no pneumothorax.",
            {"Pleural Effusion": "affirmed", "Pneumothorax": "negated"},
        ),
        ("No change in the small right effusion.", {"Pleural Effusion": "affirmed"}),
        ("Heart size is normal.", {"Cardiomegaly": "negated"}),
        ("The heart is mildly enlarged.", {"Cardiomegaly": "affirmed"}),
        ("Heart size is top normal.", {"Cardiomegaly": "negated"}),
        ("The heart is borderline enlarged.", {"Cardiomegaly": "uncertain"}),
        (
            "Mediastinal and hilar contours are unremarkable.",
            {"Enlarged Cardiomediastinum": "negated"},
        ),
        ("The central venous catheter has been removed.", {"Support Devices": "negated"}),
        ("No pericardial effusion.", {"Pleural Effusion": None}),
        ("Stable, nonenlarged cardiomediastinal silhouette.", {"Enlarged Cardiomediastinum": None}),
        ("The lungs are clear.", {"Lung Opacity": None, "Pneumonia": None}),
    ],
)
def test_mentions_in_context(text: str, expected: dict[str, str | None]) -> None:
    assert report_assertions(text, list(expected)) == expected


def test_a_run_on_sentence_reads_each_clause_as_it_reads_alone() -> None:
    # a dictation that never ends a sentence: 400 clauses, 34,000 characters in one sentence;
    # every mention keeps the state it has in its own clause
    unit = "no pleural effusion but there is a small pneumothorax which may be due to pneumonia "
    labels = ["Pleural Effusion", "Pneumothorax", "Pneumonia"]
    (alone,) = report_mentions([unit], labels)
    assert [alone[label].assertion for label in labels] == ["negated", "affirmed", "uncertain"]
    states = [(m.label, m.assertion) for m in find_mentions("Findings: " + unit * 400, labels)]
    assert len(states) == 3 * 400
    assert set(states) == {(label, alone[label].assertion) for label in labels}


def test_a_negation_reaches_to_the_end_of_a_long_list() -> None:
    # one clause of 31 findings, the last about 500 characters after its "no"
    listed = ", ".join(["focal consolidation", "pleural effusion", "pneumothorax"] * 10)
    text = f"There is no {listed} or pulmonary edema."
    labels = ["Consolidation", "Pleural Effusion", "Pneumothorax", "Edema"]
    assert report_assertions(text, labels) == dict.fromkeys(labels, "negated")


def test_states_combine_text_and_model() -> None:
    labels = ["No Finding", "Pleural Effusion", "Pneumothorax", "Support Devices", "Custom"]
    texts = [
        "No pleural effusion. A central line is present.",  # negation beats a high probability
        "Possible small pneumothorax.",
        "Unremarkable study.",  # nothing mentioned: the model decides positive vs blank
    ]
    proba = np.array(
        [
            [0.1, 0.9, 0.1, 0.9, 0.2],
            [0.1, 0.1, 0.1, 0.1, 0.9],
            [0.1, 0.8, 0.1, 0.1, 0.1],
        ]
    )
    states = chexpert_states(texts, proba, labels, np.full(5, 0.5))
    expected = np.array(
        [
            [1.0, 0.0, np.nan, 1.0, 0.0],  # support devices do not rule out No Finding
            [np.nan, np.nan, -1.0, np.nan, 1.0],  # uncertain rules it out; custom: two states
            [np.nan, 1.0, np.nan, np.nan, 0.0],  # model-positive finding, unmentioned
        ]
    )
    np.testing.assert_array_equal(states, expected)
    with pytest.raises(ValueError, match="shape"):
        chexpert_states(texts[:1], proba, labels, np.full(5, 0.5))


def test_the_model_never_calls_a_finding_from_words_the_rules_read_as_no_mention() -> None:
    """ "Fractured sternal wire" names Fracture in words the rules read as the device's: models
    trained by 3 and 10 sites called Fracture from it on every such report of the MIMIC-style
    suite (16 cells, all wrong, benchmarks/decision_sources.py), the model trained by one site
    never. Where the report holds no mention, a sentence that names the finding is the text's
    decision, and the model's call from it is dropped; a sentence that does not name it ("volume
    loss" for Lung Opacity) is the model's to call."""
    from reportfed.text.assertion import names_finding

    assert names_finding("Fractured sternal wire, unchanged.", "Fracture")
    assert names_finding("The third sternal wire is fractured.", "Fracture")
    assert not names_finding("Volume loss in the right lower lobe.", "Lung Opacity")
    labels = ["Fracture", "Cardiomegaly"]
    texts = ["Fractured sternal wire, unchanged."] * 2
    found = report_mentions(texts, labels)
    assert found[0] == {"Fracture": None, "Cardiomegaly": None}
    proba = np.array([[0.99, 0.1]] * 2)
    set_aside = np.array([[True, False], [False, False]])
    states = chexpert_states(
        texts, proba, labels, np.full(2, 0.5), found, proba, None, set_aside=set_aside
    )
    np.testing.assert_array_equal(states[:, 0], [np.nan, 1.0])


def test_a_call_inferred_from_named_findings_needs_the_margin() -> None:
    """The model's call of a finding the text does not name needs even odds from a sentence
    that names nothing, and INFERRED_MARGIN from one that names other findings (Lung Opacity
    from "consolidation, possibly representing pneumonia")."""
    from reportfed.text.states import INFERRED_MARGIN, unmentioned_candidates

    labels = ["Lung Opacity", "Consolidation", "Custom"]
    texts = ["Right lower lobe consolidation, possibly representing pneumonia."] * 3
    proba = np.array([[0.9, 0.1, 0.1]] * 3)
    calibrated = np.array([[0.6, 0.1, 0.1], [INFERRED_MARGIN, 0.1, 0.1], [0.6, 0.1, 0.1]])
    inferred = np.array([[True, False, False], [True, False, False], [False, False, False]])
    found = report_mentions(texts, labels)
    states = chexpert_states(texts, proba, labels, np.full(3, 0.5), found, calibrated, inferred)
    np.testing.assert_array_equal(states[:, 0], [np.nan, 1.0, 1.0])
    # only an unnamed lexicon label with a score at the calling floor is a candidate
    candidates = unmentioned_candidates(proba, labels, np.full(3, 0.5), found)
    np.testing.assert_array_equal(candidates[0], [True, False, False])
