import numpy as np
import pandas as pd
import pytest
from scipy import stats

from experiments import runner
from experiments.runner import Setting, markdown, plot, run, summarize
from reportfed.federation.engine import FederationConfig
from reportfed.protocol import Protocol

from .synthetic import synthetic

FAST = FederationConfig(rounds=2, hidden=(16,))
SETTINGS = [
    Setting("central", 1, Protocol(n_nodes=1, federation=FAST)),
    Setting("K=2", 2, Protocol(n_nodes=2, federation=FAST)),
]


def test_sweeps_resume_and_summarise(tmp_path, monkeypatch) -> None:
    calls = []
    x, y, space = synthetic(n=300)

    def fake_iu():  # type: ignore[no-untyped-def]
        calls.append(1)
        return x, y, space, "synthetic"

    monkeypatch.setattr(runner, "iu_data", fake_iu)
    first = run("demo", SETTINGS, 2, out_dir=tmp_path)
    assert len(first) == 4 and calls == [1]
    again = run("demo", SETTINGS, 3, out_dir=tmp_path)  # only seed 2 of each setting is new
    assert len(again) == 6 and len(calls) == 2
    stored = pd.read_csv(tmp_path / "demo.csv")
    assert sorted(zip(stored["setting"], stored["seed"], strict=True)) == sorted(
        (s, i) for s in ("central", "K=2") for i in range(3)
    )
    run("demo", SETTINGS, 3, out_dir=tmp_path)
    assert len(calls) == 2  # nothing left to run: the data is not even loaded

    summary = summarize(again, SETTINGS, "central")
    k2, central = (again[again.setting == n].sort_values("seed") for n in ("K=2", "central"))
    expected_p = stats.ttest_rel(k2["auroc"], central["auroc"]).pvalue
    row = summary.set_index("setting").loc["K=2"]
    assert row["auroc_p_vs_central"] == pytest.approx(expected_p)
    assert row["auroc_mean"] == pytest.approx(k2["auroc"].mean())
    table = markdown(summary, "demo", "central")
    assert "| K=2 | 3 |" in table and "± " in table
    plot(
        summary[summary.setting != "central"],
        tmp_path / "demo.png",
        "K",
        central=summary.set_index("setting").loc["central"],
    )
    assert (tmp_path / "demo.png").read_bytes()[:4] == b"\x89PNG"
    assert np.isfinite(summary["paper_accuracy_mean"]).all()
