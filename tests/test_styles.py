"""The styles experiment's rewrites keep what a report says: the product's text rules read the
same state of every finding in each style as in IU's own text."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.styles import STYLES, rewrite
from reportfed.core.labels import CHEXPERT_14
from reportfed.data.iu import load_iu_frame
from reportfed.text.states import report_mentions


def _states(texts: list[str]) -> list[dict[str, str | None]]:
    return [
        {label: m.assertion if m else None for label, m in found.items()}
        for found in report_mentions(texts, CHEXPERT_14)
    ]


@pytest.mark.parametrize("style", STYLES)
def test_each_style_keeps_every_state_of_iu_reports(style: str, iu_archive: Path) -> None:
    frame = load_iu_frame(iu_archive)
    frame = frame[frame["text"] != ""].iloc[::6]  # 655 reports with findings or impression
    reports = frame[["indication", "comparison", "findings", "impression"]].to_dict("records")
    written = [rewrite(r, style) for r in reports]
    assert len(set(written)) > 600
    changed = [
        uid
        for uid, got, want in zip(
            frame["uid"], _states(written), _states(list(frame["text"])), strict=True
        )
        if got != want
    ]
    assert changed == []


def test_the_styles_look_like_their_names() -> None:
    report = {
        "indication": "Chest pain XXXX",
        "comparison": "",
        "findings": "The lungs are clear. There is no pneumothorax.",
        "impression": "1. No acute disease. 2. Stable cardiomegaly.",
    }
    assert (
        rewrite(report, "telegraphic").splitlines()[1] == "FINDINGS: Lungs clear. No pneumothorax."
    )
    assert "INDICATION: Chest pain ___" in rewrite(report, "mimic")
    assert rewrite(report, "capitals") == rewrite(report, "mimic").upper()
    assert rewrite(report, "numbered").endswith(
        "IMPRESSION:\n1. No acute disease.\n2. Stable cardiomegaly."
    )
    with pytest.raises(ValueError, match="unknown style"):
        rewrite(report, "shorthand")
