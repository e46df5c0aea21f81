import pytest

from reportfed.core.errors import LabelError
from reportfed.core.labels import CHEXPERT_13, CHEXPERT_14, NIH_14, LabelSpace, canonical, is_known


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Effusion", "Pleural Effusion"),
        ("pleural_effusion", "Pleural Effusion"),
        ("  PLEURAL   effusion ", "Pleural Effusion"),
        ("Enlarged Cardiom.", "Enlarged Cardiomediastinum"),
        ("Enlarged Cardiom", "Enlarged Cardiomediastinum"),
        ("Pleural_Thickening", "Pleural Thickening"),
        ("normal", "No Finding"),
        ("Airspace Opacity", "Lung Opacity"),
        ("support-devices", "Support Devices"),
    ],
)
def test_aliases_map_to_one_canonical_name(raw: str, expected: str) -> None:
    assert canonical(raw) == expected


def test_vocabularies() -> None:
    assert len(CHEXPERT_14) == 14 and len(CHEXPERT_13) == 13 and "No Finding" not in CHEXPERT_13
    assert len(NIH_14) == 14
    assert set(NIH_14) & set(CHEXPERT_13) == {
        "Atelectasis",
        "Cardiomegaly",
        "Pleural Effusion",
        "Pneumonia",
        "Pneumothorax",
        "Consolidation",
        "Edema",
    }


def test_unknown_label_is_an_error_unless_allowed() -> None:
    with pytest.raises(LabelError, match="unknown label 'Widget'"):
        canonical("Widget")
    assert canonical(" My  Label ", allow_unknown=True) == "My Label"
    assert not is_known("Widget") and is_known("effusion")
    with pytest.raises(LabelError):
        canonical("  ")


def test_labelspace_rejects_alias_duplicates_and_looks_up_any_spelling() -> None:
    with pytest.raises(LabelError, match="duplicate label"):
        LabelSpace.of(["Effusion", "Pleural Effusion"])
    space = LabelSpace.of(["Effusion", "Cardiomegaly"])
    assert list(space) == ["Pleural Effusion", "Cardiomegaly"]
    assert space.index("effusion") == 0 and "Effusion" in space and "Edema" not in space
    with pytest.raises(LabelError):
        space.index("Edema")


def test_union_is_deterministic_and_order_free() -> None:
    a = LabelSpace.of(["Hernia", "Edema", "Custom B"], allow_unknown=True)
    b = LabelSpace.of(["Effusion", "Custom A", "No Finding"], allow_unknown=True)
    u = LabelSpace.union([a, b])
    assert u == LabelSpace.union([b, a])
    assert list(u) == ["No Finding", "Edema", "Pleural Effusion", "Hernia", "Custom A", "Custom B"]
