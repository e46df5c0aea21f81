"""The pages show hostile text as text: a report, a label or a node name holding ``<script>``,
quotes and ``&`` is escaped on both pages (Jinja2's autoescaping), in a real browser, and no
script of it runs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reportfed.pages.review import ReviewPage
from reportfed.pages.run_report import write_report

from .browser import render

HOSTILE = "Tom & \"Jerry\" 'x' <script>document.title='owned'</script>"
ESCAPED = "Tom &amp; \"Jerry\" 'x' &lt;script&gt;document.title='owned'&lt;/script&gt;"


def test_the_review_page_shows_a_hostile_label_and_report_as_text(
    processes: None, tmp_path: Path
) -> None:
    page = ReviewPage(["Edema", HOSTILE])
    text = f"No edema. {HOSTILE} is seen."
    evidence = pd.DataFrame(
        {
            "row": [0, 0],
            "label": ["Edema", HOSTILE],
            "state": [0.0, 1.0],
            "probability": [0.02, 0.91],
            "source": ["text", "model"],
            "sentence": ["No edema.", f"{HOSTILE} is seen."],
            "cue": ["No", ""],
        }
    )
    page.add(["<b>id</b>"], [text], evidence, first_row=0)
    path = page.write(tmp_path / "review.html")
    dom, console = render(path, tmp_path / "review.png")
    assert console == [] and "<title>reportfed labels: 1 report(s)</title>" in dom
    assert "owned" not in dom.split("</title>")[0]
    # the label in the filter, the counts table and the report's table; the report's text; its id
    assert dom.count(f"<option>{ESCAPED}</option>") == 1
    assert dom.count(f"<td>{ESCAPED}</td>") == 2
    assert f"{ESCAPED} is seen." in dom and "<h3>&lt;b&gt;id&lt;/b&gt;</h3>" in dom
    assert "<script>document.title" not in dom


def test_the_run_report_shows_hostile_names_as_text_and_who_annotates_and_reads(
    processes: None,
    tmp_path: Path,
) -> None:
    history = [
        {
            "round": r,
            "seconds": 1.0,
            "bytes": {},
            "evaluation": {
                "auroc/Edema": 0.7 + r / 100,
                f"auroc/{HOSTILE}": 0.8,
                "positives/Edema": 4,
                f"positives/{HOSTILE}": 40,
            },
        }
        for r in (1, 2)
    ]
    provenance = {
        "federation": {
            "nodes": {"a": ["Edema"], HOSTILE: [HOSTILE]},
            "read": {HOSTILE: ["Edema"]},
            "round": 2,
        },
        "config": {"note": HOSTILE},
    }
    path = write_report(tmp_path / "run.html", history, provenance)
    dom, console = render(path, tmp_path / "run.png")
    assert console == [] and "<title>reportfed federation run</title>" in dom
    assert "<script>document.title" not in dom and dom.count(ESCAPED) >= 4
    # Edema: annotated by a, read by the hostile node; the hostile label annotated by it alone
    assert f"<td>Edema</td><td>a</td><td>{ESCAPED}</td>" in dom
    assert f"<td>{ESCAPED}</td><td>{ESCAPED}</td><td></td>" in dom
    # each label's AUROC with the positives it rests on, and a caveat under ten
    assert '<td>A: Edema</td><td class="number">' not in dom  # counts are text cells
    assert "<td>A: Edema</td><td>4</td>" in dom
    assert "Too few held-out positives to measure (under 10): Edema (4)." in dom
