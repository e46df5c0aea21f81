import numpy as np
import pandas as pd
import pytest
from scipy import stats

from experiments import runner
from experiments.protocol import Protocol, scenario
from experiments.runner import Setting, label_plot, label_table, markdown, plot, run, summarize
from reportfed.config import FederationConfig

from .synthetic import synthetic

FAST = FederationConfig(rounds=2, hidden=(16,))
X, Y, SPACE = synthetic(n=300)
BUILT: list[int] = []


def build(k: int):  # type: ignore[no-untyped-def]
    def make(seed: int):  # type: ignore[no-untyped-def]
        BUILT.append(seed)
        return scenario(X, Y, SPACE, Protocol(n_nodes=k), seed)

    return make


SETTINGS = [
    Setting("central", 1, build(1), ("central",)),
    Setting("K=2", 2, build(2), ("surgical", "fl-zero-fill", "local"), baseline_repeats=2),
]


def test_sweeps_resume_and_summarise(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(runner, "iu_data", lambda embedder: (None, None, None, "synthetic", None))
    runs, labels = run("demo", SETTINGS, 2, config=FAST, out_dir=tmp_path)
    assert len(runs) == 2 + 2 * 3 and set(labels["label"]) == set(SPACE)
    BUILT.clear()
    runs, labels = run("demo", SETTINGS, 3, config=FAST, out_dir=tmp_path)
    assert sorted(BUILT) == [2, 2]  # only seed 2 of central and of surgical are new
    stored = pd.read_csv(tmp_path / "demo.csv")
    assert sorted(zip(stored["setting"], stored["method"], stored["seed"], strict=True)) == sorted(
        [("central", "central", i) for i in range(3)]
        + [("K=2", "surgical", i) for i in range(3)]
        + [("K=2", m, i) for m in ("fl-zero-fill", "local") for i in range(2)]
    )
    BUILT.clear()
    run("demo", SETTINGS, 3, config=FAST, out_dir=tmp_path)
    assert BUILT == []  # nothing left to run

    summary = summarize(runs, SETTINGS)
    here = runs[runs.setting == "K=2"]
    surgical, local = (
        here[here.method == m].set_index("seed").sort_index() for m in ("surgical", "local")
    )
    expected = stats.ttest_rel(local["auroc"], surgical.loc[local.index, "auroc"]).pvalue
    row = summary.set_index(["setting", "method"]).loc[("K=2", "local")]
    assert row["auroc_p"] == pytest.approx(expected)
    assert row["auroc_mean"] == pytest.approx(local["auroc"].mean())
    table = markdown(summary, "demo")
    assert "| K=2 | local | 2 |" in table and "± " in table
    assert "Fracture" in label_table(labels, "K=2", ["surgical", "local"])
    plot(
        summary[summary.setting != "central"],
        tmp_path / "demo.png",
        "K",
        central=summary.set_index("setting").loc["central"],
        paper={2.0: 90.0},
    )
    label_plot(labels, "K=2", ["surgical", "local"], tmp_path / "labels.png")
    for png in ("demo.png", "labels.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
    assert np.isfinite(summary["paper_accuracy_mean"]).all()


def test_the_experiment_runner_refuses_an_unknown_experiment(capsys) -> None:  # type: ignore[no-untyped-def]
    from experiments.suite import main

    with pytest.raises(SystemExit) as exc:
        main(["bogus", "--quick"])
    assert exc.value.code == 2 and "invalid choice: 'bogus'" in capsys.readouterr().err


def test_the_notes_state_the_rounds_and_seeds_that_ran() -> None:
    from experiments.suite import notes

    quick = notes(FederationConfig(rounds=5), 3)
    assert "5 rounds x 1 local epoch" in quick and "train 5 epochs" in quick
    assert "Seeds 0..2" in quick and "20 rounds" not in quick
    assert "20 rounds x 1 local epoch" in notes(FederationConfig(), 20)
