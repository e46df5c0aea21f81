"""Findings a hospital defines in a file: read by the same cue rules as the built-in findings
(four states, evidence), and a file that cannot be used refused in one line naming its line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from reportfed.core.errors import InputFileError
from reportfed.text.assertion import find_mentions
from reportfed.text.findings import read_findings
from reportfed.text.states import read_labels, report_mentions

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
    mentions = report_mentions([report], [HERNIA, AORTA, "Atelectasis"], found)[0]
    got = tuple(None if mentions[n] is None else mentions[n].assertion for n in (HERNIA, AORTA))
    assert got == READINGS[report]
    # the built-in findings read as they do without the file
    assert [m for m in find_mentions(report, None, found) if m.label not in found] == [
        m for m in find_mentions(report) if m.label not in found
    ] or "versus" in report  # "hernia versus atelectasis": the alternative hedges both


def test_a_defined_finding_hedges_a_builtin_one_as_an_alternative(tmp_path: Path) -> None:
    path = tmp_path / "findings.toml"
    path.write_text('[[finding]]\nname = "Gastric distention"\nphrases = ["gastric distention"]\n')
    found = read_findings(path)
    text = ["Gastric distention or atelectasis."]
    assert read_labels(text, ["Atelectasis"])[0, 0] == 1.0  # without the file: affirmed
    read = read_labels(text, ["Atelectasis", "Gastric distention"], found)[0]
    assert read[0] != read[0] and read[1] != read[1]  # NaN: both hedged, alternatives


def test_evidence_names_the_sentence_and_cue() -> None:
    found = read_findings(EXAMPLE)
    mention = report_mentions(["Lungs clear. Possible hiatus hernia."], [HERNIA], found)[0][HERNIA]
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
    from reportfed.data.iu import load_iu
    from reportfed.reader import ReportReader

    monkeypatch.setenv("REPORTFED_EMBEDDINGS_CACHE", str(embeddings_cache))
    found = read_findings(EXAMPLE)
    iu = load_iu(iu_archive)
    read = read_labels(iu.texts, [HERNIA, AORTA], found)
    stated = np.flatnonzero((read == 1).any(axis=1))[:60]
    rest = [i for i in range(len(iu)) if i not in set(stated)][: 200 - len(stated)]
    rows = sorted([*stated.tolist(), *rest])
    site = pd.DataFrame({"Reports": [iu.texts[i] for i in rows]})
    for c, name in enumerate((HERNIA, AORTA)):
        site[name] = np.nan_to_num(read[rows, c], nan=-1.0)  # hedged: uncertain
    site.to_csv(tmp_path / "findings_site.csv", index=False)
    model = tmp_path / "model.safetensors"
    assert main(["train", "--node", str(tmp_path / "findings_site.csv"), "--node",
                 str(tables["a"]), "--findings", str(EXAMPLE), "--rounds", "3",
                 "--out", str(model)]) == 0  # fmt: skip
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
