"""Findings a hospital defines in a file: read by the same cue rules as the built-in findings
(four states, evidence), and a file that cannot be used refused in one line naming its line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from reportfed.core.errors import InputFileError
from reportfed.core.labels import LabelSpace
from reportfed.text.assertion import find_mentions
from reportfed.text.findings import read_findings
from reportfed.text.lexicon import Lexicon
from reportfed.text.states import read_labels, report_mentions
from reportfed.text.templates import template_rows

from .conftest import ROOT

EXAMPLE = ROOT / "examples" / "findings.toml"
HERNIA, AORTA = "Hiatal hernia", "Aortic calcification"

#: report -> (hernia, aortic calcification), written by hand under CheXpert's conventions
READINGS = {
    "Small hiatal hernia. Lungs are clear.": ("affirmed", None),
    "No hiatal hernia.": ("negated", None),
    "Possible hiatus hernia.": ("uncertain", None),
    "Retrocardiac opacity, hiatal hernia versus atelectasis.": ("uncertain", None),
    "Large paraesophageal hernia.": ("affirmed", None),
    "Hiatal hernias are not seen. Calcified aorta.": ("negated", "affirmed"),
    "Aortic calcification may be present.": (None, "uncertain"),
    "There is no calcification of the aorta.": (None, "negated"),
    "The heart is normal in size.": (None, None),
}


def test_the_example_file_reads_with_its_checksum() -> None:
    found = read_findings(EXAMPLE)
    assert found.names == (HERNIA, AORTA)
    assert found.checksum == hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    hernia = found.findings[0]
    assert hernia.parent == "Hernia" and hernia.aliases == ("Hiatus Hernia",)


@pytest.mark.parametrize("report", list(READINGS))
def test_defined_findings_are_read_in_four_states_by_the_cue_rules(report: str) -> None:
    found = read_findings(EXAMPLE)
    mentions = report_mentions([report], [HERNIA, AORTA, "Atelectasis"], Lexicon(found))[0]
    got = tuple(None if mentions[n] is None else mentions[n].assertion for n in (HERNIA, AORTA))
    assert got == READINGS[report]
    # the built-in findings read as they do without the file
    assert [m for m in find_mentions(report, None, Lexicon(found)) if m.label not in found] == [
        m for m in find_mentions(report) if m.label not in found
    ] or "versus" in report  # "hernia versus atelectasis": the alternative hedges both


def test_a_defined_finding_hedges_a_builtin_one_as_an_alternative(tmp_path: Path) -> None:
    path = tmp_path / "findings.toml"
    path.write_text('[[finding]]\nname = "Gastric distention"\nphrases = ["gastric distention"]\n')
    found = read_findings(path)
    text = ["Gastric distention or atelectasis."]
    assert read_labels(text, ["Atelectasis"])[0, 0] == 1.0  # without the file: affirmed
    read = read_labels(text, ["Atelectasis", "Gastric distention"], Lexicon(found))[0]
    assert read[0] != read[0] and read[1] != read[1]  # NaN: both hedged, alternatives


def test_a_finding_with_a_parent_is_a_mention_of_its_parent_when_present_or_hedged(
    tmp_path: Path,
) -> None:
    path = tmp_path / "findings.toml"
    path.write_text(
        '[[finding]]\nname = "Morgagni defect"\nphrases = ["morgagni defect"]\nparent = "hernia"\n'
    )
    found = read_findings(path)
    texts = ["Small Morgagni defect.", "Possible Morgagni defect.", "No Morgagni defect."]
    read = read_labels(texts, ["Hernia", "Morgagni defect"], Lexicon(found))
    assert read[:, 1].tolist()[::2] == [1.0, 0.0] and read[1, 1] != read[1, 1]
    # a Morgagni defect is a hernia; its absence says nothing of other hernias
    assert read[0, 0] == 1.0 and read[1, 0] != read[1, 0] and read[2, 0] == 0.0
    assert report_mentions(texts[2:], ["Hernia"], Lexicon(found))[0]["Hernia"] is None
    assert read_labels(texts[:1], ["Hernia"])[0, 0] == 0.0  # without the file: not mentioned


def test_template_sentences_of_a_defined_finding_use_its_phrases() -> None:
    texts, y = template_rows(
        LabelSpace.of([HERNIA], allow_unknown=True), lexicon=Lexicon(read_findings(EXAMPLE))
    )
    assert texts[:6] == ["Hiatal hernia.", "There is hiatal hernia.", "Findings consistent with "
                         "hiatal hernia.", "Hiatus hernia.", "There is hiatus hernia.",
                         "Findings consistent with hiatus hernia."]  # fmt: skip
    assert "No evidence of hiatus hernia." in texts and y[:, 0].tolist().count(1.0) == 6


def test_evidence_names_the_sentence_and_cue() -> None:
    found = read_findings(EXAMPLE)
    mention = report_mentions(["Lungs clear. Possible hiatus hernia."], [HERNIA], Lexicon(found))[
        0
    ][HERNIA]
    assert mention is not None and mention.sentence == 1
    assert mention.text == "Possible hiatus hernia." and mention.cue.lower() == "possible"


BAD = {
    "unknown key": ('[[finding]]\nname = "A"\nphrases = ["a thing"]\ncolour = "red"\n', 4,
                    "unknown key 'colour'"),
    "everything": ('[[finding]]\nname = "A"\nphrases = ["a thing"]\npatterns = [".*"]\n', 4,
                   "matches everything"),
    "ordinary words": ('[[finding]]\nname = "A"\nphrases = ["the"]\n', 3, "matches everything"),
    "built-in name": ('[[finding]]\nname = "Effusion"\nphrases = ["wet lung"]\n', 2,
                      "built-in label 'Pleural Effusion'"),
    "same phrase": ('[[finding]]\nname = "A"\nphrases = ["hiatal hernia"]\n\n'
                    '[[finding]]\nname = "B"\nphrases = ["Hiatal  hernia"]\n', 7,
                    "also names 'A' (line 3)"),
    "bad expression": ('[[finding]]\nname = "A"\npatterns = ["(hernia"]\n', 3,
                       "not a regular expression"),
    "no phrase": ('[[finding]]\nname = "A"\n', 1, "has no phrases"),
    "unknown parent": ('[[finding]]\nname = "A"\nphrases = ["a thing"]\nparent = "Zzz"\n', 4,
                       "parent 'Zzz' is no known label"),
    "not toml": ('[[finding]\nname = "A"\n', None, "not TOML"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
def test_a_file_that_cannot_be_used_is_one_error_naming_its_line(case: str, tmp_path: Path) -> None:
    text, line, message = BAD[case]
    path = tmp_path / "findings.toml"
    path.write_text(text)
    with pytest.raises(InputFileError) as error:
        read_findings(path)
    said = str(error.value)
    assert message in said and "\n" not in said
    if line is not None:
        assert said.startswith(f"{path}:{line}: ")


@pytest.mark.slow
def test_a_site_trains_defined_findings_and_the_model_labels_them_in_four_states(
    tables: dict[str, Path], iu_archive: Path, embeddings_cache: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A site labels 200 IU reports with the example's rules and trains its two findings beside
    an IU site of CheXpert labels; the model keeps the file's definitions and checksum, and
    labels both findings in four states with evidence."""
    import numpy as np
    import pandas as pd

    from reportfed.cli import main
    from reportfed.reader import ReportReader

    from .flower_nodes import write_findings_site

    monkeypatch.setenv("REPORTFED_EMBEDDINGS_CACHE", str(embeddings_cache))
    found = read_findings(EXAMPLE)
    site = write_findings_site(tmp_path / "findings_site.csv", EXAMPLE, iu_archive)
    model = tmp_path / "model.safetensors"
    assert main(["train", "--node", str(site), "--node", str(tables["a"]), "--findings",
                 str(EXAMPLE), "--rounds", "3", "--out", str(model)]) == 0  # fmt: skip
    reader = ReportReader.load(model)
    assert reader.findings_ == found  # the definitions and the file's checksum, kept
    assert reader.provenance_["findings"]["checksum"] == found.checksum
    assert {HERNIA, AORTA, "Cardiomegaly"} <= set(reader.classes_)
    reports = [
        "Small hiatal hernia. Heart size is normal.",
        "No hiatal hernia. The thoracic aorta is tortuous and calcified.",
        "Possible hiatus hernia. No aortic calcification.",
        "The lungs are clear.",
    ]
    states = pd.DataFrame(reader.predict_states(reports), columns=list(reader.classes_))
    assert states[HERNIA].tolist()[:3] == [1.0, 0.0, -1.0]
    assert states[AORTA].tolist()[1:3] == [1.0, 0.0]
    assert np.isnan(states[HERNIA][3]) and np.isnan(states[AORTA][3])
    evidence = reader.predict_evidence(reports)
    hernia = evidence[(evidence["label"] == HERNIA) & (evidence["row"] == 3)].iloc[0]
    assert hernia["sentence"] == "Possible hiatus hernia." and hernia["source"] == "text"
    # label --findings checks that the model was trained with the file's definitions
    table = tmp_path / "reports.csv"
    pd.DataFrame({"Reports": reports}).to_csv(table, index=False)
    label = ["label", "--model", str(model), "--reports", str(table), "--out"]
    assert main([*label, str(tmp_path / "a.csv"), "--findings", str(EXAMPLE)]) == 0
    other = tmp_path / "other.toml"
    other.write_text('[[finding]]\nname = "Hiatal hernia"\nphrases = ["hiatal hernia"]\n')
    assert main([*label, str(tmp_path / "b.csv"), "--findings", str(other)]) == 2
    assert not (tmp_path / "b.csv").exists()


def test_corpus_iu_labels_the_defined_findings_with_the_rules(
    iu_archive: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``reportfed corpus iu --findings``: one more column per finding, its four states as the
    rules read them, counted; the table trains as a site (``read_table`` with the aliases)."""
    import numpy as np
    import pandas as pd

    from reportfed.cli import main
    from reportfed.data.table import read_table
    from reportfed.text.states import rule_states

    out = tmp_path / "site.csv"
    assert main(["corpus", "iu", "--archive", str(iu_archive), "--labels", "Cardiomegaly",
                 "--findings", str(EXAMPLE), "--out", str(out)]) == 0  # fmt: skip
    said = capsys.readouterr().err
    assert "Hiatal hernia                    46 positive       1 negated       6 uncertain" in said
    frame = pd.read_csv(out)
    found = read_findings(EXAMPLE)
    states = frame[[HERNIA, AORTA]].to_numpy(np.float32)
    np.testing.assert_array_equal(
        states, rule_states(frame["Reports"].tolist(), [HERNIA, AORTA], Lexicon(found))
    )
    table = read_table(out, aliases=found.columns())
    assert table.label_space.names == ("Cardiomegaly", HERNIA, AORTA)


def test_a_table_names_a_finding_by_its_name_or_an_alias(tmp_path: Path) -> None:
    """Another site's column name for a finding (its ``aliases``) reads as the finding."""
    from reportfed.data.table import read_table

    found = read_findings(EXAMPLE)
    path = tmp_path / "site.csv"
    path.write_text(
        "Reports,Hiatus Hernia,aortic calcification,Edema,Notes\n"
        "Small hiatal hernia.,1,0,0,x\nNo hernia. Calcified aorta.,0,1,0,y\n"
    )
    table = read_table(path, aliases=found.columns())
    assert table.label_space.names == (HERNIA, AORTA, "Edema")  # the table's column order
    assert table.labels[:, 0].tolist() == [1.0, 0.0] and table.ignored_columns == ("Notes",)
    assert read_table(path).label_space.names == ("Edema",)  # without the file: not labels


def test_a_hospitals_change_to_one_built_in_phrase_changes_that_phrase_and_nothing_else(
    tmp_path: Path, iu_archive: Path
) -> None:
    """A [[change]] table takes "vascular congestion" away from Edema at one hospital: on every
    IU report and the three suites, every CheXpert cell reads as before but Edema's in the
    reports whose Edema mention was that phrase; and a phrase it adds names the finding."""
    import numpy as np
    import pandas as pd

    from reportfed.core.labels import CHEXPERT_14
    from reportfed.data.iu import load_iu
    from reportfed.text.states import rule_states

    path = tmp_path / "findings.toml"
    path.write_text(
        '[[change]]\nname = "Edema"\nunmention = ["vascular congestion"]\n'
        'phrases = ["alveolar flooding"]\n'
    )
    changed = Lexicon(read_findings(path))
    assert changed.findings is not None and changed.findings.names == ()  # it defines nothing
    texts = load_iu(iu_archive).texts + [
        report
        for suite in ("behaviour", "layouts", "mimic_style")
        for report in pd.read_csv(ROOT / "tests" / "data" / f"{suite}.csv")["report"]
    ]
    labels = [name for name in CHEXPERT_14 if name != "No Finding"]  # the rules' findings
    before, after = rule_states(texts, labels), rule_states(texts, labels, changed)
    differ = ~((before == after) | (np.isnan(before) & np.isnan(after)))
    edema = labels.index("Edema")
    assert not np.delete(differ, edema, axis=1).any()  # no other finding's cell moved
    rows = np.flatnonzero(differ[:, edema])
    decided = report_mentions([texts[i] for i in rows], ["Edema"])
    assert len(rows) >= 20
    for mention in (found["Edema"] for found in decided):  # each was that phrase's doing
        assert mention is not None
        assert "vascular congestion" in mention.text[mention.span[0] : mention.span[1]].lower()
    assert rule_states(["Alveolar flooding."], ["Edema"], changed)[0, 0] == 1.0
    assert np.isnan(rule_states(["Alveolar flooding."], ["Edema"])[0, 0])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[change]]\nname = "Hiatal hernia"\nunmention = ["x y"]\n', "is no built-in finding"),
        (
            '[[change]]\nname = "Edema"\naliases = ["Wet lung"]\n',
            "a [[change]] has name, phrases, patterns, unmention alone, not 'aliases'",
        ),
        ('[[change]]\nname = "Edema"\n', "a change has phrases, patterns or unmention"),
    ],
)
def test_a_change_that_cannot_be_used_is_one_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "findings.toml"
    path.write_text(text)
    with pytest.raises(InputFileError) as error:
        read_findings(path)
    assert message in str(error.value)


#: round three's red-team cases of a findings file (issue 71), each refused in one line
REFUSED = {
    "an output column": ('[[finding]]\nname = "Reports"\nphrases = ["gastric bubble"]\n',
                         "'Reports' is a column of reportfed's outputs"),
    "the id column": ('[[finding]]\nname = "id"\nphrases = ["gastric bubble"]\n',
                      "'id' is a column of reportfed's outputs"),
    "file_row": ('[[finding]]\nname = "file_row"\nphrases = ["gastric bubble"]\n',
                 "'file_row' is a column of reportfed's outputs"),
    "the separator": ('[[finding]]\nname = "Hernia; hiatal"\nphrases = ["gastric bubble"]\n',
                      "holds ';'"),
    "a formula": ('[[finding]]\nname = "=1+1"\nphrases = ["gastric bubble"]\n',
                  "starts like a spreadsheet formula"),
    "a Cyrillic a": ('[[finding]]\nname = "C\u0430rdiomegaly"\nphrases = ["gastric bubble"]\n',
                     "mixes scripts (CYRILLIC, LATIN)"),
    "an accented twin": ('[[finding]]\nname = "Cardiomégaly"\nphrases = ["gastric bubble"]\n',
                         "prints like the built-in label 'Cardiomegaly'"),
    "a plural twin": ('[[finding]]\nname = "A"\nphrases = ["hiatal hernia"]\n\n[[finding]]\n'
                      'name = "B"\nphrases = ["hiatal hernias"]\n', "also names 'A'"),
    "a hyphenated twin": ('[[finding]]\nname = "A"\nphrases = ["hiatal hernia"]\n\n[[finding]]\n'
                          'name = "B"\nphrases = ["Hiatal-hernia"]\n', "also names 'A'"),
    "a long any": ('[[finding]]\nname = "A"\npatterns = [".{25,}"]\n',
                   "matches the normal sentence"),
    "lungs": ('[[finding]]\nname = "A"\nphrases = ["lungs"]\n',
              "'lungs' matches the normal sentence 'The lungs are clear.'"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_definition_a_table_or_a_reader_would_misread_is_refused(
    case: str, tmp_path: Path
) -> None:
    text, message = REFUSED[case]
    path = tmp_path / "findings.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputFileError) as error:
        read_findings(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_findings_file_is_utf_8_with_or_without_a_byte_order_mark(tmp_path: Path) -> None:
    text = '[[finding]]\nname = "Bochdalek hernia"\nphrases = ["Bochdalek\u2019s hernia"]\n'
    path = tmp_path / "findings.toml"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    found = Lexicon(read_findings(path))
    assert rule_states_of("A Bochdalek\u2019s hernia.", "Bochdalek hernia", found) == 1.0
    path.write_bytes(text.encode("cp1252"))
    with pytest.raises(InputFileError) as error:
        read_findings(path)
    assert str(error.value) == (
        f"{path}: not UTF-8 (byte 60, 0x92): save it as UTF-8, as TOML files are"
    )


@pytest.mark.parametrize(
    ("phrase", "report"),
    [("(free air)", "Small amount of (free air) under the diaphragm."),
     ("S/p Nissen fundoplication.", "S/p Nissen fundoplication. No pneumothorax.")],
)  # fmt: skip
def test_a_phrase_ending_in_a_mark_matches_where_the_report_holds_it(
    phrase: str, report: str, tmp_path: Path
) -> None:
    path = tmp_path / "findings.toml"
    path.write_text(f'[[finding]]\nname = "Surgery"\nphrases = ["{phrase}"]\n')
    assert rule_states_of(report, "Surgery", Lexicon(read_findings(path))) == 1.0


def rule_states_of(report: str, name: str, lexicon: Lexicon) -> float:
    from reportfed.text.states import rule_states

    return float(rule_states([report], [name], lexicon)[0, 0])


def test_twenty_thousand_phrases_load_and_read(tmp_path: Path) -> None:
    """A file of 20,001 phrases loads (the lines of its phrases found in one pass) and its
    compiled phrases fit RE2's memory (its 8 MiB default holds about 4,000)."""
    phrases = [f"zq{k:05d} syndrome" for k in range(20_001)]
    path = tmp_path / "findings.toml"
    path.write_text('[[finding]]\nname = "Rare thing"\nphrases = [\n'
                    + "".join(f'  "{p}",\n' for p in phrases) + "]\n")  # fmt: skip
    found = read_findings(path)
    assert len(found.findings[0].phrases) == 20_001
    assert rule_states_of("There is zq12345 syndrome.", "Rare thing", Lexicon(found)) == 1.0
