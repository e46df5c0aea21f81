import pytest

from reportfed.sentences import MAX_WORDS, OVERLAP, report_units, split_sentences, windows


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # missing final period
        (
            "Heart size normal and lungs are clear. No edema or pneumonia. No effusion",
            ["Heart size normal and lungs are clear.", "No edema or pneumonia.", "No effusion"],
        ),
        # numbered list, blank line, no period before "2."
        (
            "1. Left effusion. Right effusion too.\n\n2. Cardiomegaly",
            ["Left effusion.", "Right effusion too.", "Cardiomegaly"],
        ),
        ("1. Stable cardiomegaly. 2) Clear lungs.", ["Stable cardiomegaly.", "Clear lungs."]),
        # section headers, upper case and known words, dropped; a wrapped line is not a break
        (
            "FINDINGS: The heart is normal in\nsize. IMPRESSION: No acute process.",
            ["The heart is normal in size.", "No acute process."],
        ),
        ("Impression: no acute disease", ["no acute disease"]),
        # de-identification blanks, abbreviations, decimals, times
        (
            "Dr. ___ was paged at 10:30 on ___. A 3.5 cm nodule, e.g. neoplasm. XXXX are normal.",
            [
                "Dr. ___ was paged at 10:30 on ___.",
                "A 3.5 cm nodule, e.g. neoplasm.",
                "XXXX are normal.",
            ],
        ),
        # semicolons end a clause; stray punctuation and blanks alone are dropped
        (
            "No pneumothorax; small left effusion. . ___.",
            ["No pneumothorax", "small left effusion."],
        ),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_long_sentences_are_windowed_not_truncated() -> None:
    words = [f"w{i}" for i in range(250)]
    parts = windows(" ".join(words))
    assert all(len(p.split()) <= MAX_WORDS for p in parts)
    covered = [w for p in parts for w in p.split()]
    assert set(covered) == set(words)  # every word is read
    assert parts[1].split()[:OVERLAP] == parts[0].split()[-OVERLAP:]
    assert windows("short sentence") == ["short sentence"]


def test_report_units_never_empty() -> None:
    assert report_units("___") == ["___"]
    assert report_units("Effusion") == ["Effusion"]
