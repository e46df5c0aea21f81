import gzip

import numpy as np
import pandas as pd
import pytest

from reportfed.core.errors import InputFileError
from reportfed.data.table import read_table

from .conftest import shared_file


def write(tmp_path, name: str, text: str | bytes):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def test_headerless_chexpert_input() -> None:
    table = read_table(shared_file("chexpert-labeler-format", "sample_reports.csv"))
    assert len(table) == 4 and len(table.label_space) == 0
    assert (
        table.texts[1].startswith("1. Left pleural effusion") and "Cardiomegaly" in table.texts[1]
    )


def test_chexpert_labeled_output_reads_back_with_blanks_as_not_mentioned() -> None:
    table = read_table(shared_file("chexpert-labeler-format", "labeled_reports.csv"))
    assert len(table.label_space) == 14
    row = table.labels[0]
    assert row[table.label_space.index("No Finding")] == 1.0
    assert row[table.label_space.index("Edema")] == 0.0
    assert row[table.label_space.index("Cardiomegaly")] == 0.0  # negated
    assert table.labels[1, table.label_space.index("No Finding")] == 0.0  # blank: not mentioned
    # no row annotates Lung Lesion: a column this table does not annotate
    assert np.isnan(table.labels[:, table.label_space.index("Lung Lesion")]).all()
    assert "Lung Lesion" in table.blank_columns and "Edema" not in table.blank_columns
    ignored = read_table(
        shared_file("chexpert-labeler-format", "labeled_reports.csv"), blank="ignore"
    )
    assert np.isnan(ignored.labels[1, ignored.label_space.index("No Finding")])


@pytest.mark.parametrize("column", ["Reports", "Report Impression", "REPORT", "report", "text"])
def test_text_column_detection(tmp_path, column: str) -> None:
    path = write(tmp_path, "r.csv", f"{column},Effusion\nsmall effusion,1\n")
    table = read_table(path)
    assert table.texts == ["small effusion"] and list(table.label_space) == ["Pleural Effusion"]


@pytest.mark.parametrize(("policy", "expected"), [("zeros", 0.0), ("ones", 1.0), ("ignore", None)])
def test_uncertain_policies_and_blanks(tmp_path, policy: str, expected: float | None) -> None:
    path = write(tmp_path, "r.csv", "text,Edema,Cardiomegaly\na,-1,\nb,1.0,0\n")
    table = read_table(path, uncertain=policy)
    assert table.labels[0, 1] == 0.0  # blank: not mentioned, a negative
    assert np.isnan(read_table(path, uncertain=policy, blank="ignore").labels[0, 1])
    assert table.labels[1].tolist() == [1.0, 0.0]
    if expected is None:
        assert np.isnan(table.labels[0, 0])
    else:
        assert table.labels[0, 0] == expected


def test_parquet_and_custom_label_columns(tmp_path) -> None:
    path = tmp_path / "r.parquet"
    pd.DataFrame({"report": ["x", "y"], "My Finding": ["1", "0"], "Hernia": ["0", ""]}).to_parquet(
        path
    )
    table = read_table(path, label_columns=["My Finding", "Hernia"])
    assert list(table.label_space) == ["My Finding", "Hernia"]
    assert table.labels[0, 0] == 1.0 and table.labels[1, 1] == 0.0  # blank: not mentioned


def test_empty_reports_are_skipped_with_a_count(tmp_path) -> None:
    table = read_table(write(tmp_path, "r.csv", 'text\nfirst\n""\n   \nlast\n'))
    assert table.texts == ["first", "last"] and table.skipped_empty == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "the file is empty"),
        (b"id,notes,other\n1,a,b\n", "no text column"),
        (b"text\ncaf\xe9 report\n", r"not UTF-8 text \(byte 0xe9 at line 2\)"),
        (b"text,Edema\nfine,1\nbad,yes\n", "row 3, column 'Edema': value 'yes'"),
        (b"text,Edema\nfine,2\n", "value '2' is not 1, 0, -1 or blank"),
        (b'text\n""\n" "\n', "no usable report text"),
    ],
)
def test_bad_files_name_the_problem(tmp_path, content: bytes, message: str) -> None:
    with pytest.raises(InputFileError, match=message):
        read_table(write(tmp_path, "r.csv", content))


def test_training_tables_need_a_known_label(tmp_path) -> None:
    path = write(tmp_path, "r.csv", "text,Foo,Bar\nx,1,0\n")
    with pytest.raises(InputFileError, match="no label column matches"):
        read_table(path, require_labels=True)


def test_missing_report_cells_are_skipped_and_ids_kept(tmp_path) -> None:
    path = write(tmp_path, "r.csv", "id,Reports\nr1,NaN\nr2,Small effusion.\nr3,null\nr4,NA\n")
    table = read_table(path)
    assert table.texts == ["Small effusion."] and table.ids == ["r2"]
    assert table.skipped_empty == 3 and table.id_column == "id"
    frame = pd.DataFrame({"Reports": [None, float("nan"), "Cardiomegaly."]})
    frame.to_parquet(tmp_path / "r.parquet")
    table = read_table(tmp_path / "r.parquet")
    assert table.texts == ["Cardiomegaly."] and table.skipped_empty == 2
    assert table.id_column is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"id,Reports\nr1,Heart normal.,extra,fields\nr2,Effusion.\n", "row 2 has 4 fields"),
        (b"Reports,Cardiomegaly,Cardiomegaly\nx,1,0\n", "'Cardiomegaly' appears more than once"),
    ],
)
def test_ragged_rows_and_duplicate_columns_are_refused(
    tmp_path, content: bytes, message: str
) -> None:
    with pytest.raises(InputFileError, match=message):
        read_table(write(tmp_path, "r.csv", content))


def test_other_delimiters_gzip_and_header_case(tmp_path) -> None:
    semi = read_table(
        write(tmp_path, "s.csv", "id;Reports;Edema\nr1;Small effusion, no edema.;0\n")
    )
    assert semi.texts == ["Small effusion, no edema."] and list(semi.label_space) == ["Edema"]
    tab = read_table(write(tmp_path, "t.csv", "REPORT\tEdema\tCardiomegally\nEdema.\t1\t1\n"))
    assert tab.texts == ["Edema."] and tab.ignored_columns == ("Cardiomegally",)
    corpus = read_table(
        write(tmp_path, "c.csv", "id,Reports,findings,impression,mesh_major,Edema,Cardiomegally\n"
              "r1,Edema.,Edema.,,Edema,1,1\n")
    )  # fmt: skip
    assert corpus.ignored_columns == ("Cardiomegally",)  # reportfed corpus's columns are context
    header = read_table(write(tmp_path, "h.csv", "Report\nNo effusion.\nCardiomegaly.\n"))
    assert header.texts == ["No effusion.", "Cardiomegaly."]  # the header is not a report
    (tmp_path / "g.csv.gz").write_bytes(gzip.compress(b"Reports,Edema\nNo edema.,0\n"))
    assert read_table(tmp_path / "g.csv.gz").texts == ["No edema."]


def test_reports_without_a_word_are_skipped_and_a_numeric_parquet_column_refused(
    tmp_path,
) -> None:
    """A number is no report: labelled, it came out No Finding = 1."""
    path = write(tmp_path, "r.csv", "id,Reports\nr1,12345\nr2,3.14\nr3,-1\nr4,Small effusion.\n")
    table = read_table(path)
    assert table.texts == ["Small effusion."] and table.ids == ["r4"] and table.skipped_empty == 3
    with pytest.raises(InputFileError, match=r"no usable report text.*without a word"):
        read_table(write(tmp_path, "n.csv", "text\n12345\n-1\n"))
    for values in ([1.5, 2.5], [1, 2], [True, False]):
        pd.DataFrame({"Reports": values}).to_parquet(tmp_path / "r.parquet")
        with pytest.raises(InputFileError, match=r"column 'Reports' holds .* not report text"):
            read_table(tmp_path / "r.parquet")


def test_a_five_megabyte_report_is_read_and_an_open_quote_names_its_line(tmp_path) -> None:
    long = "No pleural effusion. " * 250_000  # 5.25 MB, over the csv module's 131,072 default
    table = read_table(write(tmp_path, "r.csv", f'Reports\n"{long}"\nCardiomegaly.\n'))
    assert [len(t) for t in table.texts] == [len(long.strip()), 13]
    broken = 'id,Reports\nr1,"Heart normal."\nr2,"Small\neffusion.\nr3,Clear.\n'
    with pytest.raises(InputFileError, match=r"quote opened on line 3 \(row 3\) is never closed"):
        read_table(write(tmp_path, "q.csv", broken))
