"""Phrasings a hospital's readers corrected (:mod:`reportfed.text.corrections`): read from a
review page's download, learnt as rules, kept in a model's provenance and read as corrected."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from reportfed.cli import main
from reportfed.core.errors import InputFileError
from reportfed.data.table import read_table
from reportfed.text.corrections import Correction, Corrections, learn
from reportfed.text.lexicon import Lexicon
from reportfed.text.states import read_labels, report_mentions

#: a review page's download: r4's hedged pneumonia read as present, r1's unmentioned edema as
#: uncertain, r7's "infection" (of the precautions) as no pneumonia at all (blank), and a row
#: the reader left alone
DOWNLOAD = """id,Reports,Pneumonia,Lung Opacity,Edema,Corrected
r4,Patchy airspace opacity in the right lower lobe concerning for pneumonia.,1,1,,Pneumonia
r1,Heart size is normal. The lungs are clear.,,,-1,Edema
r7,Infection precautions. Right basilar opacity.,,1,,pneumonia
r8,Small opacity concerning for pneumonia.,-1,1,,
"""


def _download(tmp_path: Path, text: str = DOWNLOAD) -> Path:
    path = tmp_path / "corrections.csv"
    path.write_text(text)
    return path


def _learnt(path: Path) -> Corrections:
    table = read_table(path)
    return learn(table.texts, table.ids, table.corrected, source=table.source)


def test_a_download_names_its_corrected_cells_with_their_four_states(tmp_path) -> None:  # type: ignore[no-untyped-def]
    table = read_table(_download(tmp_path))
    assert table.ignored_columns == ()  # "Corrected" is read, not ignored
    assert table.corrected.keys() == {(0, "Pneumonia"), (1, "Edema"), (2, "Pneumonia")}
    assert table.corrected[0, "Pneumonia"] == 1.0 and table.corrected[1, "Edema"] == -1.0
    assert np.isnan(table.corrected[2, "Pneumonia"])
    # rows are renumbered with the rows kept
    assert table.subset([2, 0]).corrected.keys() == {(0, "Pneumonia"), (1, "Pneumonia")}
    assert table.select_labels(["Edema"]).corrected == {(1, "Edema"): -1.0}


def test_corrections_of_mentions_are_learnt_as_phrasings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    learnt = _learnt(_download(tmp_path))
    # r1's edema is not mentioned: a label for the model, no phrasing
    assert [c.describe() for c in learnt.corrections] == [
        "'concerning for pneumonia' reads Pneumonia affirmed (the rules read uncertain)",
        "'infection' is no mention of Pneumonia (the rules read affirmed)",
    ]
    texts = [
        "Left basilar opacity, concerning for pneumonia.",  # the phrasing, in another report
        "Opacity concerning for infection.",  # another finding word after the cue
        "Infection precautions.",
        "No pneumonia.",
    ]
    read = read_labels(texts, ["Pneumonia"], Lexicon(corrections=learnt))
    assert read[:, 0].tolist()[:1] == [1.0] and np.isnan(read[1, 0])
    assert read[2:, 0].tolist() == [0.0, 0.0]  # not mentioned; negated
    found = report_mentions(texts, ["Pneumonia"], Lexicon(corrections=learnt))
    assert found[0]["Pneumonia"] is not None and found[0]["Pneumonia"].corrected
    assert found[1]["Pneumonia"] is not None and not found[1]["Pneumonia"].corrected
    # the same phrasing without the corrections: the rules' reading
    assert np.isnan(read_labels(texts[:1], ["Pneumonia"])[0, 0])


def test_corrections_are_kept_and_merged_by_phrasing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    learnt = _learnt(_download(tmp_path))
    assert Corrections.from_record(learnt.record()) == learnt
    twice = learnt.merged(learnt)
    assert [c.reports for c in twice.corrections] == [2, 2]
    other = Corrections(
        (Correction("Pneumonia", "pneumonia", "concerning for", "uncertain", "negated"),)
    )
    with pytest.raises(
        InputFileError, match="corrected to negated of Pneumonia here and to affirmed"
    ):
        learnt.merged(other, where="b.csv: ")


def test_a_phrasing_corrected_two_ways_or_an_unknown_label_is_one_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    two_ways = DOWNLOAD.replace(
        "r8,Small opacity concerning for pneumonia.,-1,1,,",
        "r8,Small opacity concerning for pneumonia.,0,1,,Pneumonia",
    )
    with pytest.raises(InputFileError, match="reports r4 and r8 correct 'pneumonia'"):
        _learnt(_download(tmp_path, two_ways))
    unknown = DOWNLOAD.replace(",Edema\n", ",Edema; Fracture\n", 1)
    path = _download(tmp_path, unknown)
    with pytest.raises(InputFileError, match=r"row 3, column 'Corrected': 'Fracture' is not"):
        read_table(path)
    assert main(["train", "--node", str(path), "--out", str(tmp_path / "m.safetensors")]) == 2
    assert not (tmp_path / "m.safetensors").exists()
    # a defined finding's column, corrected, read without its file: the error says what to do
    defined = (
        "id,Reports,Edema,Hiatal hernia,Corrected\n"
        "r1,Small hiatal hernia. No edema.,0,1,Hiatal hernia\n"
    )
    with pytest.raises(InputFileError, match=r"'Hiatal hernia' is not .* \(a finding your hosp"):
        read_table(_download(tmp_path, defined))


def test_a_corrected_phrasing_is_read_under_the_sentences_scope() -> None:
    """A correction is an entry of the lexicon read like the others: once "concerning for
    pneumonia" reads affirmed, a differential or an alternative beside it still hedges it, as
    docs/labels.md says "versus" and "or" do."""
    corrected = Lexicon(corrections=Corrections(
        (Correction("Pneumonia", "pneumonia", "concerning for", "uncertain", "affirmed"),)
    ))  # fmt: skip
    texts = [
        "Opacity concerning for pneumonia.",
        "Findings concerning for pneumonia versus atelectasis.",
        "Opacity concerning for pneumonia or atelectasis.",
    ]
    read = read_labels(texts, ["Pneumonia"], corrected)[:, 0]
    assert read[0] == 1.0 and np.isnan(read[1:]).all()  # hedged: not annotated
    found = report_mentions(texts, ["Pneumonia"], corrected)
    assert found[0]["Pneumonia"].corrected and not found[1]["Pneumonia"].corrected
    assert found[1]["Pneumonia"].cue == "versus"
