import pytest

from reportfed.text.sentences import MAX_WORDS, OVERLAP, report_units, split_sentences, windows


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


def test_context_sections_are_not_read() -> None:
    from reportfed.text.assertion import report_assertions
    from reportfed.text.sentences import findings_sentences, split_sections

    text = (
        "EXAMINATION: CHEST (PA AND LAT)\n\nINDICATION: Fever, evaluate for pneumonia.\n\n"
        "COMPARISON: ___\n\nFINDINGS: Lungs are clear.\n\nIMPRESSION: No pneumonia. A 3 cm nodule."
    )
    assert split_sections(text)[1] == ("INDICATION", "Fever, evaluate for pneumonia.")
    assert findings_sentences(text) == ["Lungs are clear.", "No pneumonia.", "A 3 cm nodule."]
    assert report_units(text) == findings_sentences(text)
    said = report_assertions(text, ["Pneumonia", "Lung Lesion"])
    assert said == {"Pneumonia": "negated", "Lung Lesion": "affirmed"}
    assert findings_sentences("INDICATION: Cough.") == ["Cough."]  # nothing else to read


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a context paragraph ends at the blank line: the findings after it have no header
        (
            "FINAL REPORT\nPORTABLE CHEST\n\nREASON FOR EXAM: Shortness of breath.\n\n"
            "Moderate left pleural effusion has increased. No pneumothorax. The heart is enlarged.",
            [
                "Moderate left pleural effusion has increased.",
                "No pneumothorax.",
                "The heart is enlarged.",
            ],
        ),
        (
            "REASON FOR EXAMINATION: Assess for effusion.\n\nNo evidence of pleural effusion. "
            "Heart size top normal.",
            ["No evidence of pleural effusion.", "Heart size top normal."],
        ),
        # a context header's own paragraph stays context, across a wrapped line
        ("HISTORY: Cough,\nfever.\n\nLungs are clear.", ["Lungs are clear."]),
        # anatomic sub-headers start findings and keep their word; banners are no sentence
        (
            "COMPARISON: None.\nLungs: clear\nHEART: Normal size.\nLines and tubes: ET tube 4 cm.",
            ["Lungs: clear", "HEART: Normal size.", "Lines and tubes: ET tube 4 cm."],
        ),
        (
            "WET READ: No pneumothorax.\n\nFINAL REPORT\n\nFINDINGS: Clear.",
            ["No pneumothorax.", "Clear."],
        ),
        # a context section's name without its colon: alone on its line, or in capitals
        ("HISTORY\nPneumonia last month.\n\nFINDINGS\nLungs are clear.", ["Lungs are clear."]),
        ("Indication\nChest pain.\n\nLungs are clear.", ["Lungs are clear."]),
        ("HISTORY ___M with CHF.\n\nNo effusion.", ["No effusion."]),
        ("IMPRESSION:\nCOMPARISON ___. NO NODULES.", ["COMPARISON ___.", "NO NODULES."]),
        ("History of CHF is noted.\n\nNo effusion.", ["History of CHF is noted.", "No effusion."]),
        # a first paragraph without a header that reads as the clinical question, where findings
        # follow it
        (
            "___-year-old man with fever, evaluate for pneumonia.\n\nNo consolidation.",
            ["No consolidation."],
        ),
        ("72M s/p fall.\n\nNo fracture.", ["No fracture."]),
        ("Chest pain, r/o pneumothorax?\n\nNo pneumothorax.", ["No pneumothorax."]),
        ("No pneumothorax.\n\nIMPRESSION: Normal chest.", ["No pneumothorax.", "Normal chest."]),
        ("Cardiomegaly.\n\nNo effusion.", ["Cardiomegaly.", "No effusion."]),
        # the fallback reads everything but a request or a question
        ("INDICATION: Assess for effusion.", []),
        ("HISTORY: Evaluate for pneumonia. ?pneumothorax?", []),
        ("Evaluation for pneumonia. Lungs are clear.", ["Lungs are clear."]),
    ],
)
def test_sections_follow_the_layout(text: str, expected: list[str]) -> None:
    from reportfed.text.sentences import findings_sentences

    assert findings_sentences(text) == expected


def test_a_100000_sentence_report_splits_whole() -> None:
    """Scale: every sentence of a 100,000-sentence report comes back, abbreviations kept inside
    their sentence (the splitter re-read the whole text before each full stop and never ended)."""
    sentences = ["Heart size is normal.", "Dr. Smith noted approx. 3.5 cm nodule.", "No effusion;"]
    text = " ".join(sentences[i % 3] for i in range(100_000))
    got = split_sentences(text)
    assert len(got) == 100_000 and got[1] == sentences[1] and got[-1] == "Heart size is normal."
