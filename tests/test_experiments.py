from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from experiments import runner
from experiments.protocol import Protocol, scenario
from experiments.runner import Setting, label_plot, label_table, markdown, plot, run, summarize
from reportfed.core.config import PAPER

from .synthetic import synthetic

FAST = replace(PAPER, rounds=2, hidden=(16,))  #: the experiments train with the paper's settings
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
    runs, labels, rounds = run("demo", SETTINGS, 2, config=FAST, out_dir=tmp_path)
    assert len(runs) == 2 + 2 * 3 and set(labels["label"]) == set(SPACE)
    BUILT.clear()
    runs, labels, rounds = run("demo", SETTINGS, 3, config=FAST, out_dir=tmp_path)
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
    assert (runs["seconds"] > 0).all()

    # methods with a server round: the global model's AUROC after every round, the last one the
    # run's macro AUROC, and the weights a round moves (methods without one have neither)
    served = runs[runs.method.isin(["surgical", "fl-zero-fill"])].set_index(["method", "seed"])
    curves = rounds.set_index(["method", "seed", "round"])["auroc"]
    assert len(rounds) == FAST.rounds * len(served)
    for (method, seed), row in served.iterrows():
        assert curves[method, seed, FAST.rounds] == pytest.approx(row["auroc"], abs=1e-9)
    shared = X.shape[1] * 16 + 16  # the one hidden layer's weights and biases
    # surgical: each of the two sites receives and sends the shared block and its own label rows
    assert served.loc["surgical", "round_megabytes"].to_numpy() == pytest.approx(
        4 * (2 * 2 * shared + 2 * len(SPACE) * 17) / 1e6
    )
    assert runs[runs.method.isin(["central", "local"])]["round_megabytes"].isna().all()

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


def test_every_experiment_has_its_settings_registered() -> None:
    from experiments import EXPERIMENTS
    from experiments.suite import _SETTINGS

    assert list(_SETTINGS) == list(EXPERIMENTS)


def test_the_experiment_runners_help_lists_every_experiment_and_simulate(processes: None) -> None:
    import subprocess
    import sys

    from experiments import EXPERIMENTS

    done = subprocess.run(
        [sys.executable, "-m", "experiments", "--help"], capture_output=True, text=True, check=True
    )
    for name in (*EXPERIMENTS, "simulate"):
        assert f"{name}:" in done.stdout or f"{name}}}" in done.stdout, name


def test_the_notes_state_the_rounds_and_seeds_that_ran() -> None:
    from experiments.suite import notes

    quick = notes(replace(PAPER, rounds=5), 3)  # what --quick trains with
    assert "5 rounds x 1 local epoch" in quick and "train 5 epochs" in quick
    assert "Seeds 0..2" in quick and "20 rounds" not in quick
    assert "20 rounds x 1 local epoch" in notes(PAPER, 20)


def test_each_method_is_paired_with_the_papers_method_at_its_granularity() -> None:
    from experiments.suite import SENTENCE_VARIANTS, VARIANTS

    rng = np.random.default_rng(0)
    arms = ("surgical", "epochs=5", "sentence", "sentence+epochs=5")
    runs = pd.DataFrame(
        [
            {"setting": "K=2", "x": 2, "method": m, "seed": seed}
            | {metric: rng.uniform(0.6, 0.9) for metric in runner.METRICS}
            for m in arms
            for seed in range(5)
        ]
    )
    methods = {**runner.METHODS, **VARIANTS, **SENTENCE_VARIANTS}
    summary = summarize(runs, [Setting("K=2", 2, build(2), arms)], methods).set_index("method")
    for method, paired in (("epochs=5", "surgical"), ("sentence+epochs=5", "sentence")):
        mine, theirs = (
            runs[runs.method == m].sort_values("seed")["auroc"] for m in (method, paired)
        )
        assert summary.loc[method, "reference"] == paired
        assert summary.loc[method, "auroc_p"] == pytest.approx(stats.ttest_rel(mine, theirs).pvalue)
    assert pd.isna(summary.loc["sentence", "auroc_p"])  # a reference is not tested against itself


def test_a_rows_confidence_interval_does_not_depend_on_the_other_rows() -> None:
    """Adding an arm to an experiment leaves every other arm's bootstrap CI as it was."""
    rng = np.random.default_rng(1)
    runs = pd.DataFrame(
        [
            {"setting": "K=2", "x": 2, "method": m, "seed": seed}
            | {metric: rng.uniform(0.6, 0.9) for metric in runner.METRICS}
            for m in ("surgical", "fl-zero-fill", "local")
            for seed in range(5)
        ]
    )

    def cis(arms: tuple[str, ...]) -> pd.Series:
        summary = summarize(runs, [Setting("K=2", 2, build(2), arms)]).set_index("method")
        return summary.loc["local", [f"{m}_ci" for m in runner.METRICS]]

    alone = cis(("surgical", "local"))
    assert alone.equals(cis(("surgical", "fl-zero-fill", "local")))
    assert len(set(alone)) == len(runner.METRICS)  # five metrics, five intervals


def test_rounds_to_a_target_and_the_cost_table() -> None:
    from experiments.beyond import cost_table, first_round

    curve = pd.Series([0.80, 0.91, 0.89, 0.96], index=[1, 2, 3, 4])
    assert first_round(curve, 0.90) == 2 and first_round(curve, 0.95) == 4
    assert np.isnan(first_round(curve, 0.97))
    runs = pd.DataFrame(
        [
            {
                "setting": "K=2",
                "method": "epochs=5",
                "seed": s,
                "seconds": 3.0,
                "round_megabytes": 2.0,
            }
            for s in (0, 1)
        ]
    )
    rounds = pd.DataFrame(
        [
            {"setting": "K=2", "method": "epochs=5", "seed": s, "round": r, "auroc": a}
            for s, values in ((0, (0.91, 0.96)), (1, (0.85, 0.92)))
            for r, a in enumerate(values, 1)
        ]
    )
    row = cost_table(runs, rounds, "K=2").splitlines()[-1]
    # 0.90 reached in rounds 1 and 2 (median 1.5, 3 MB); 0.95 by seed 0 only, in round 2
    assert row == "| epochs=5 | 2 | 3 | 5 | 2.00 | 1.5 (2/2) | 3 | 2 (1/2) | 4 |"


def test_the_committed_beyond_tables_are_what_its_committed_runs_give(tmp_path) -> None:
    """``python -m experiments beyond --tables-only`` rebuilds the committed tables and plots
    from the committed runs, training nothing."""
    import shutil

    from experiments.suite import main

    committed = Path(__file__).resolve().parents[1] / "experiments" / "results"
    for name in ("beyond.csv", "beyond-labels.csv.gz", "beyond-rounds.csv.gz"):
        shutil.copy(committed / name, tmp_path)
    main(["beyond", "--tables-only", "--out", str(tmp_path)])
    assert (tmp_path / "beyond.md").read_text() == (committed / "beyond.md").read_text()
    for png in ("beyond-sweep.png", "beyond-rounds.png", "beyond-labels.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"


def test_the_threshold_rules_over_k_are_the_gap_tables_numbers() -> None:
    """The consortium experiment's table of threshold rules per K gives, for the defaults at
    K=10, the F1 the gap experiment's table gives from the same runs; runs that stored no
    reading (as the consortium's did before the rules were added) give no table."""
    import pandas as pd

    from experiments.beyond import DEFAULTS, gap_table, threshold_rules_table

    committed = Path(__file__).resolve().parents[1] / "experiments" / "results"
    gap = pd.read_csv(committed / "gap.csv")
    row = threshold_rules_table(gap, DEFAULTS).splitlines()[-1].split(" | ")
    defaults = next(
        r for r in gap_table(gap, "K=10").splitlines() if r.startswith(f"| {DEFAULTS} |")
    )
    assert row[:6] == ["| K=10", *defaults.split(" | ")[1:6]]
    unread = gap.drop(columns=["read_rows_f1", "read_mean_f1"])
    assert threshold_rules_table(unread, DEFAULTS) == ""


def test_the_iu_mimic_experiment_runs_on_the_mimic_fixture(
    processes: None, tmp_path: Path, embeddings_cache: Path, iu_archive: Path
) -> None:
    """The paper's third experiment as a user types it, on a MIMIC-CXR stand-in in PhysioNet's
    layout (tests/data/make_mimic_fixture.py): one IU site, one MIMIC site, its tables and plot."""
    import os
    import subprocess
    import sys

    from tests.data.make_mimic_fixture import write_fixture

    from .conftest import ROOT

    write_fixture(tmp_path / "mimic", 60)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "REPORTFED_EMBEDDINGS_CACHE": str(embeddings_cache),
    }
    argv = ["noniid", "--mimic-root", "mimic", "--mimic-reports", "30", "--iu-reports", "60",
            "--quick", "--repeats", "1"]  # fmt: skip
    done = subprocess.run(  # the work is bounded (90 reports); the timeout only catches a hang
        [sys.executable, "-m", "experiments", *argv, "--out", "out"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    table = (tmp_path / "out" / "noniid-mimic-quick.md").read_text()
    assert table.startswith(
        "# Experiment: noniid-mimic-quick (one IU site and one MIMIC-CXR site, 30 reports of "
        "mimic: a stand-in, not MIMIC-CXR)"
    )
    runs = pd.read_csv(tmp_path / "out" / "noniid-mimic-quick.csv")
    assert set(runs["setting"]) == {"iu+mimic shared=0", "iu+mimic shared=13"}
    assert {"surgical", "central-masked", "local"} <= set(runs["method"])
    assert (tmp_path / "out" / "noniid-mimic-quick-iu+mimic.png").read_bytes()[:4] == b"\x89PNG"
    # docs/experiments.md's table of results gains its row once rendered, and its table has the
    # shape of every other experiment's
    from benchmarks.render_docs import experiment_index

    out = tmp_path / "out"
    rows = [r for r in experiment_index(out).splitlines() if "noniid-mimic" in r]
    assert rows == [
        f"| IU + MIMIC-CXR (`noniid --mimic-root`), `--quick` | [noniid-mimic-quick.md]"
        f"({out}/noniid-mimic-quick.md) | [noniid-mimic-quick-iu+mimic.png]"
        f"({out}/noniid-mimic-quick-iu+mimic.png), [noniid-mimic-quick-labels.png]"
        f"({out}/noniid-mimic-quick-labels.png) |"
    ]

    def header(path: Path) -> str:
        return next(r for r in path.read_text().splitlines() if r.startswith("| setting |"))

    assert header(out / "noniid-mimic-quick.md") == header(ROOT / "experiments/results/noniid.md")
    # --mimic-root belongs to noniid; without it noniid's title names its IU stand-in
    wrong = subprocess.run(
        [sys.executable, "-m", "experiments", "paper", "--mimic-root", "mimic", "--quick"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert wrong.returncode == 2
    assert wrong.stderr.strip().splitlines()[-1] == (
        "reportfed: error: --mimic-root is the noniid experiment's"
    )
    from experiments.suite import title

    assert "IU stand-in: both sites built from IU's reports" in title("noniid", "noniid", None)
