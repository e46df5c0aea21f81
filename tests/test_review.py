"""``reportfed label --review``: the page a radiologist checks labels on, loaded in a real browser
(Debian's chromium, headless) for the example reports and for 10,000 IU reports; its filters are
driven through the page's address, as a bookmarked view would be."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest

from reportfed.cli import main

from .browser import driven, render
from .conftest import ROOT

EXAMPLES = ROOT / "examples" / "reports.csv"


@pytest.fixture
def labelling(iu_embedded, embeddings_cache, default_model, monkeypatch):  # type: ignore[no-untyped-def]
    """The session's default model and embedding cache."""
    monkeypatch.setenv("REPORTFED_EMBEDDINGS_CACHE", str(embeddings_cache))
    return iu_embedded


def _by_doubt(page: Path) -> list[str]:
    """The report ids of ``page`` in the order docs/labels.md gives "least confident first": a
    report with a state the model alone gave, then by the probability nearest 0.5, stable."""
    import json

    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>',
                                page.read_text(), re.S).group(1))  # fmt: skip

    def key(report: dict) -> tuple[int, float]:  # type: ignore[type-arg]
        labels = report["labels"]
        model = 0 if any(row[3] == "model" for row in labels) else 1
        return model, min([1.0, *(abs(row[2] - 0.5) for row in labels)])

    return [r["id"] for r in sorted(data["reports"], key=key)]


def _shown(dom: str) -> list[str]:
    """The ids of the reports the page shows, in order."""
    return re.findall(r'<article data-id="([^"]+)"', dom)


def test_the_review_page_of_the_example_reports_and_its_filters(
    processes: None, labelling, tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "examples").mkdir()
    shutil.copy(EXAMPLES, tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    # docs/labels.md's command, as written
    assert main(["label", "--reports", "examples/reports.csv", "--review", "review.html"]) == 0
    page = tmp_path / "review.html"

    dom, console = render(page, tmp_path / "review.png")
    assert console == []
    assert _shown(dom) == ["r1", "r2", "r3", "r4", "r5", "r6"]
    assert "page 1 of 1: 6 report(s) match" in dom
    # r4: the hedge is underlined inside the marked sentence, and the state reads without colour
    assert "<u>concerning for</u>" in dom and "? Pneumonia" in dom and "? -1 uncertain" in dom
    # the counts table: Pneumothorax negated in r1 and r3
    row = re.search(r"<tr><td>Pneumothorax</td>(.*?)</tr>", dom)
    assert row is not None and re.findall(r"<td>(\d+)</td>", row.group(1)) == ["0", "2", "0", "0"]

    dom, console = render(page, tmp_path / "uncertain.png", "label=Pneumonia&state=-1")
    assert console == [] and _shown(dom) == ["r4"]
    dom, _ = render(page, tmp_path / "rule.png", "source=rule")
    assert _shown(dom) == ["r1", "r3"]  # No Finding, by its rule
    dom, _ = render(page, tmp_path / "negated.png", "state=0&label=Cardiomegaly")
    assert _shown(dom) == ["r1"]  # "heart size is normal"
    # least confident first: a state the model alone gave, then the probability nearest even
    # odds (No Finding's 0.5 of r1 and r3), ties in the table's order
    dom, _ = render(page, tmp_path / "doubt.png", "order=doubt")
    assert _shown(dom) == _by_doubt(page)
    assert set(_by_doubt(page)[:2]) >= {"r1"} and sorted(_shown(dom)) == [
        f"r{i}" for i in range(1, 7)
    ]


def test_the_review_page_of_ten_thousand_reports_opens_a_page_at_a_time(
    processes: None, labelling, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    table, _ = labelling
    texts = (table.texts * (10_000 // len(table.texts) + 1))[:10_000]
    reports = tmp_path / "reports.csv"
    pd.DataFrame({"id": [f"iu{i}" for i in range(len(texts))], "Reports": texts}).to_csv(
        reports, index=False
    )
    page = tmp_path / "review.html"
    argv = ["label", "--reports", str(reports), "--out", str(tmp_path / "l.parquet")]
    assert main([*argv, "--review", str(page)]) == 0

    start = time.perf_counter()
    dom, console = render(page, tmp_path / "review.png")
    print(f"10,000 reports ({page.stat().st_size / 1e6:.1f} MB): loaded, rendered and "
          f"screenshotted twice in {time.perf_counter() - start:.1f} s")  # fmt: skip
    assert console == []
    assert _shown(dom) == [f"iu{i}" for i in range(50)]
    assert "page 1 of 200: 10000 report(s) match" in dom
    dom, _ = render(page, tmp_path / "page3.png", "page=3")
    assert _shown(dom) == [f"iu{i}" for i in range(100, 150)]
    dom, _ = render(page, tmp_path / "model.png", "source=model&order=doubt")
    shown = _shown(dom)
    assert len(shown) == 50 and "report(s) match" in dom
    # every report shown has a state the model alone decided
    for report_id in shown[:5]:
        card = dom.split(f'<article data-id="{report_id}"', 1)[1].split("</article>", 1)[0]
        assert "<td>model</td>" in card
    assert Path(page).stat().st_size < 60e6


def test_no_report_text_can_end_the_pages_data(processes: None, labelling, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Report texts that would close or re-open the page's data block (``</script>``, an HTML
    comment opening a script) are shown as text, and every report is on the page."""
    texts = [
        "Mild cardiomegaly. <!--<script> No effusion.",
        "No pneumothorax.</script><script>document.title='x'</script>",
        "Small effusion. <!-- comment --> & <b>bold</b>",
        "Clear lungs.",
    ]
    reports = tmp_path / "reports.csv"
    pd.DataFrame({"id": ["q1", "q2", "q3", "q4"], "Reports": texts}).to_csv(reports, index=False)
    page = tmp_path / "review.html"
    assert main(["label", "--reports", str(reports), "--out", str(tmp_path / "l.csv"),
                 "--review", str(page)]) == 0  # fmt: skip
    dom, console = render(page, tmp_path / "review.png")
    assert console == []
    assert _shown(dom) == ["q1", "q2", "q3", "q4"]
    assert "&lt;!--&lt;script&gt;" in dom and "&lt;b&gt;bold&lt;/b&gt;" in dom


def test_a_reader_corrects_states_keeps_them_and_trains_a_site_on_them(
    processes: None, labelling, tables, tmp_path, monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    """On the examples' page a reader corrects two states (one with the mouse, one with the
    keyboard), the page marks them and keeps them across a reload, and the download is a site
    table that ``reportfed train`` takes beside an IU site; labelled again with the model it
    trains, the corrected phrasing reads as corrected, in that report and in new ones."""
    monkeypatch.chdir(tmp_path)
    page = tmp_path / "review.html"
    labels = tmp_path / "labels.csv"
    assert main(["label", "--reports", str(EXAMPLES), "--out", str(labels),
                 "--review", str(page)]) == 0  # fmt: skip
    with driven(page) as tab:
        tab.screenshot(path=str(tmp_path / "before.png"))
        assert tab.inner_text("#corrected") == "no corrections"
        assert tab.is_disabled("#download")
        # r4's hedged pneumonia read as present, with the mouse
        tab.get_by_label("Pneumonia in report r4: your reading").select_option("1")
        # r1's edema, not mentioned, read as uncertain: Tab to it and an arrow key
        tab.get_by_label("Edema in report r1: your reading").focus()
        tab.keyboard.press("ArrowUp")
        assert tab.inner_text("#corrected") == "2 correction(s) in 2 report(s)"
        changed = tab.locator("tr.changed")
        assert changed.count() == 2 and changed.first.inner_text().endswith("corrected")
        tab.reload()  # the browser keeps them for this page
        assert tab.inner_text("#corrected") == "2 correction(s) in 2 report(s)"
        assert tab.get_by_label("Pneumonia in report r4: your reading").input_value() == "1"
        tab.screenshot(path=str(tmp_path / "after.png"))
        with tab.expect_download() as download:
            tab.click("#download")
        download.value.save_as(tmp_path / "corrections.csv")
    corrected = pd.read_csv(tmp_path / "corrections.csv", dtype=str, keep_default_na=False)
    labelled = pd.read_csv(labels, dtype=str, keep_default_na=False).set_index("id")
    assert list(corrected["id"]) == ["r1", "r4"]
    assert list(corrected.columns) == ["id", "Reports", *labelled.columns[1:], "Corrected"]
    assert list(corrected["Corrected"]) == ["Edema", "Pneumonia"]  # which cells are the reader's
    # the corrected cells as read, every other cell as labelled ("1.0" there, "1" here)
    expected = labelled.loc[["r1", "r4"]].reset_index()
    expected.loc[0, "Edema"], expected.loc[1, "Pneumonia"] = "-1", "1"
    for column in labelled.columns[1:]:
        assert [str(float(v)) if v else "" for v in corrected[column]] == [
            str(float(v)) if v else "" for v in expected[column]
        ], column
    assert (corrected["Reports"] == expected["Reports"]).all()
    # a site of the corrections trains beside an IU site
    model = tmp_path / "model.safetensors"
    capsys.readouterr()
    assert main(["train", "--node", "corrections.csv", "--node", str(tables["a"]),
                 "--rounds", "2", "--out", str(model), "--report", "report.html"]) == 0  # fmt: skip
    assert model.is_file()
    said = "'concerning for pneumonia' reads Pneumonia affirmed (the rules read uncertain)"
    assert f"corrections.csv: {said}" in capsys.readouterr().err
    assert said.replace("'", "&#39;") in (tmp_path / "report.html").read_text()
    # labelled again: r4's hedge now reads as the reader read it, and so does the same phrasing
    # in a new report; another finding word after the same cue is still read by the rules
    again = tmp_path / "again.csv"
    pd.DataFrame({
        "id": ["r4", "n1", "n2"],
        "Reports": [
            pd.read_csv(EXAMPLES).set_index("id").loc["r4", "Reports"],
            "Left basilar opacity, concerning for pneumonia.",
            "Right basilar opacity concerning for infection.",
        ],
    }).to_csv(again, index=False)  # fmt: skip
    assert main(["label", "--reports", str(again), "--model", str(model), "--out",
                 str(tmp_path / "l2.csv"), "--evidence", str(tmp_path / "e2.csv")]) == 0  # fmt: skip
    assert f"the model reads a corrected phrasing (1 report(s)): {said}" in capsys.readouterr().err
    states = pd.read_csv(tmp_path / "l2.csv").set_index("id")
    assert list(states["Pneumonia"]) == [1.0, 1.0, -1.0]
    evidence = pd.read_csv(tmp_path / "e2.csv", keep_default_na=False)
    pneumonia = evidence[evidence["label"] == "Pneumonia"].set_index("id")
    assert list(pneumonia["source"]) == ["correction", "correction", "text"]
    assert pneumonia.loc["n1", "cue"] == "concerning for"
    # the review page of the examples labelled with that model: r4's pneumonia by the correction
    assert main(["label", "--reports", str(EXAMPLES), "--model", str(model), "--out",
                 str(tmp_path / "l3.csv"), "--review", "relabelled.html"]) == 0  # fmt: skip
    dom, console = render(tmp_path / "relabelled.html", tmp_path / "relabelled.png",
                          "source=correction")  # fmt: skip
    assert console == [] and _shown(dom) == ["r4"]
    card = dom.split('<article data-id="r4"', 1)[1].split("</article>", 1)[0]
    assert re.search(
        r"<td>Pneumonia</td><td>\+ 1 positive</td><td>[\d.]+</td><td>correction</td>", card
    )
    # the model keeps the correction: the phrasing, never the report
    from reportfed.reader import ReportReader

    kept = ReportReader.load(model).provenance_["corrections"]
    assert kept == [{"label": "Pneumonia", "phrase": "pneumonia", "cue": "concerning for",
                     "read": "uncertain", "state": "affirmed", "reports": 1}]  # fmt: skip
