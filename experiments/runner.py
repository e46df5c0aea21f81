"""Shared machinery of the experiments: resumable runs, statistics, tables and plots.

An experiment is a list of :class:`Setting` s (a scenario builder each: seed -> one repeat) and the
methods run on each. Runs go through the lockstep engine, a batch of seeds at a time, replaying the
per-node loop's dropout draws (:data:`COMPUTE`: the stored results were trained so, and a resumed
sweep adds runs of the same kind, each reproducible seed for seed); every finished batch is
appended to ``results/<experiment>.csv``, ``<experiment>-labels.csv.gz`` and
``<experiment>-rounds.csv.gz`` (rewritten atomically), so a crashed sweep restarts where it
stopped. Summaries give mean ± SD, a 95% bootstrap CI and a paired t-test of every method against
surgical aggregation on the same setting (same seeds = same partitions).
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import stats
from tqdm.auto import tqdm

from experiments.baselines import METHODS, SWEEP_NUMERICS, Method, Scenario, run_method
from experiments.lockstep import Compute
from reportfed.core.config import FederationConfig, Granularity
from reportfed.core.files import atomic_write
from reportfed.core.labels import CHEXPERT_13, LabelSpace
from reportfed.core.paths import embeddings_cache_dir
from reportfed.data.iu import load_iu
from reportfed.data.table import ReportTable
from reportfed.embed import make_embedder
from reportfed.embed.granularity import embed_reports
from reportfed.text.states import read_labels

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: where results go: relative to the working directory (the checkout's folder when run from its root)
RESULTS = Path("experiments") / "results"
METRICS = ("paper_accuracy", "leakfree_accuracy", "auroc", "leakfree_f1", "prevalence_accuracy")
REFERENCE = "surgical"
#: what every method is paired with: the paper's method at the method's granularity
REFERENCES: dict[Granularity, str] = {"report": REFERENCE, "sentence": "sentence"}
#: the central baseline at each granularity
CENTRALS: dict[Granularity, str] = {"report": "central", "sentence": "central-sentence"}
COMPUTE = Compute(replay=True)


def reference(method: Method) -> str:
    """The arm a method's paired tests compare with: surgical aggregation with the paper's
    settings, on the same granularity as the method."""
    return REFERENCES[method.granularity]


@dataclass(frozen=True)
class Setting:
    """One arm of an experiment: a name, an x-axis value, a scenario builder (seed -> repeat), its
    methods, the repeats of the baselines (``None``: the experiment's; the paper's method at
    either granularity and central always get the experiment's) and the embedder spec of its
    data."""

    name: str
    x: float
    scenario: Callable[[int], Scenario]
    methods: tuple[str, ...] = (REFERENCE,)
    baseline_repeats: int | None = None
    embedder: str = "minilm"

    def repeats(self, method: str, default: int) -> int:
        if method in (*REFERENCES.values(), *CENTRALS.values()):
            return default
        return self.baseline_repeats or default


@cache
def iu_data(
    embedder: str = "minilm",
    section: str = "text",
    granularity: Granularity = "report",
    rows: tuple[int, ...] | None = None,
) -> tuple[np.ndarray, np.ndarray, LabelSpace, str, list[str]]:
    """IU reports with all 13 findings annotated: embeddings (``granularity``: one per report, or
    sentence bags, computed as :data:`SWEEP_NUMERICS` says), labels, label space, the embedder's
    cache key (its fingerprint and how it computes) and report ids. ``section`` embeds
    ``findings`` or ``impression`` only; ``rows`` (indices into those reports) embeds only
    them."""
    table = iu_table(section)
    if rows is not None:
        table = table.subset(list(rows))
    emb = make_embedder(embedder, **SWEEP_NUMERICS)
    x = embed_reports(table.texts, emb, granularity=granularity, cache_dir=embeddings_cache_dir())
    return x, table.labels, table.label_space, emb.cache_key, list(table.ids)


@cache
def iu_table(section: str = "text") -> ReportTable:
    """IU's reports with all 13 findings annotated, the experiments' rows (``section`` as
    :func:`iu_data` takes it)."""
    return load_iu(section=section).select_labels(list(CHEXPERT_13)).fully_annotated()


@cache
def iu_read(section: str = "text") -> np.ndarray:
    """What the product's text rules read in each report of :func:`iu_data` (same rows, same
    labels; :func:`reportfed.text.states.read_labels`)."""
    table = iu_table(section)
    return read_labels(table.texts, list(table.label_space))


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    text = pd.DataFrame(rows).to_csv(index=False).encode()
    # gzip without a name or timestamp in its header: the same rows give the same bytes
    atomic_write(path, gzip.compress(text, mtime=0) if path.suffix == ".gz" else text)


#: the result files of an experiment: runs (plain CSV, read in review), and the bulk per-label and
#: per-round rows (gzip-compressed CSV: a sweep's per-label rows pass 2 MB)
_FILES = {"": ".csv", "-labels": ".csv.gz", "-rounds": ".csv.gz"}


def _paths(name: str, out_dir: Path) -> dict[str, Path]:
    return {kind: out_dir / f"{name}{kind}{suffix}" for kind, suffix in _FILES.items()}


def stored(name: str, out_dir: Path = RESULTS) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The runs, per-label rows and per-round rows stored for experiment ``name`` (empty frames
    where there are none)."""
    frames = [
        pd.read_csv(p) if p.exists() else pd.DataFrame() for p in _paths(name, out_dir).values()
    ]
    return frames[0], frames[1], frames[2]


def run(
    name: str,
    settings: Sequence[Setting],
    repeats: int,
    *,
    config: FederationConfig | None = None,
    out_dir: Path = RESULTS,
    batch: int = 4,
    methods: Mapping[str, Method] = METHODS,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Run every (setting, method, seed) not stored yet; return all runs, per-label rows and
    per-round rows (the global model's test AUROC after each round, methods with a server).

    Method names resolve in ``methods`` (the baselines by default). A run's ``seconds`` is its
    batch's wall time over the batch's runs (``batch`` seeds train at once, on every core)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = _paths(name, out_dir)
    rows, label_rows, round_rows = (frame.to_dict("records") for frame in stored(name, out_dir))
    done = {(r["setting"], r["method"], int(r["seed"])) for r in rows}
    todo = [
        (s, m, [seed for seed in range(s.repeats(m, repeats)) if (s.name, m, seed) not in done])
        for s in settings
        for m in s.methods
    ]
    todo = [(s, m, seeds) for s, m, seeds in todo if seeds]
    with tqdm(total=sum(len(t[2]) for t in todo), desc=name, unit="run") as bar:
        for setting, method, seeds in todo:
            bar.set_postfix_str(f"{setting.name} {method}")
            for start in range(0, len(seeds), batch):
                chunk = seeds[start : start + batch]
                scenarios = [setting.scenario(seed) for seed in chunk]
                began = time.perf_counter()
                outcomes = run_method(scenarios, methods[method], config, COMPUTE)
                seconds = (time.perf_counter() - began) / len(chunk)
                for o in outcomes:
                    key = {
                        "setting": setting.name,
                        "x": setting.x,
                        "method": method,
                        "seed": o.seed,
                    }
                    rows.append(
                        {
                            **key,
                            **o.metrics,
                            "embedder": iu_data(setting.embedder)[3],
                            "seconds": seconds,
                            "round_megabytes": o.round_megabytes,
                        }
                    )
                    label_rows += [{**key, "label": label, **m} for label, m in o.per_label.items()]
                    round_rows += [
                        {**key, "round": r, "auroc": a} for r, a in enumerate(o.curve, start=1)
                    ]
                for kind, records in (("", rows), ("-labels", label_rows), ("-rounds", round_rows)):
                    _write(paths[kind], records)
                bar.update(len(chunk))
    return pd.DataFrame(rows), pd.DataFrame(label_rows), pd.DataFrame(round_rows)


def _bootstrap_ci(
    values: np.ndarray, rng: np.random.Generator, n: int = 2000
) -> tuple[float, float]:
    means = rng.choice(values, size=(n, len(values)), replace=True).mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def paired_p(values: pd.Series, reference: pd.Series) -> float | None:
    """The paired t-test's p of ``values`` against ``reference`` (both indexed by seed) on the
    seeds they share: ``None`` with fewer than two, 1.0 where every pair is equal."""
    common = values.index.intersection(reference.index)
    if len(common) < 2:
        return None
    a, b = values.loc[common], reference.loc[common]
    return 1.0 if np.allclose(a - b, 0) else float(stats.ttest_rel(a, b).pvalue)


def summarize(
    runs: pd.DataFrame, settings: Sequence[Setting], methods: Mapping[str, Method] = METHODS
) -> pd.DataFrame:
    """Mean, SD and bootstrap CI per setting, method and metric; paired t-test p-value of each
    method against the paper's method at its granularity (:func:`reference`) on the same setting
    and seeds (``methods`` resolves the names). Each row's bootstrap draws from its own generator,
    seeded by its setting and method, so adding a row leaves every other row's CI as it was."""
    out = []
    for s in settings:
        here = runs[runs["setting"] == s.name]
        for method in s.methods:
            sub = here[here["method"] == method].set_index("seed").sort_index()
            if sub.empty:
                continue
            paired = reference(methods[method])
            ref = here[here["method"] == paired].set_index("seed")
            row: dict[str, object] = {"setting": s.name, "x": s.x, "method": method}
            row["repeats"], row["reference"] = len(sub), paired
            rng = np.random.default_rng(list(f"{s.name}/{method}".encode()))
            for m in METRICS:
                v = sub[m].to_numpy(float)
                lo, hi = _bootstrap_ci(v, rng)
                row[f"{m}_mean"], row[f"{m}_sd"] = v.mean(), v.std(ddof=1) if len(v) > 1 else 0.0
                row[f"{m}_ci"] = f"[{100 * lo:.2f}, {100 * hi:.2f}]"
                p = paired_p(sub[m], ref[m]) if method != paired else None
                if p is not None:
                    row[f"{m}_p"] = p
            out.append(row)
    return pd.DataFrame(out)


def markdown(summary: pd.DataFrame, title: str, notes: str = "") -> str:
    """A Markdown table: mean ± SD (%) of the main metrics, CI and paired p-value vs surgical."""
    lines = [
        f"# {title}",
        "",
        notes,
        "",
        "| setting | method | n | paper acc. | 95% CI | leak-free acc. | macro AUROC | leak-free F1 "
        "| prevalence acc. | p (paper acc. vs paper's method) | p (AUROC vs paper's method) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for _, r in summary.iterrows():

        def ms(m: str, r: pd.Series = r) -> str:
            return f"{100 * r[f'{m}_mean']:.2f} ± {100 * r[f'{m}_sd']:.2f}"

        def p(m: str, r: pd.Series = r) -> str:
            v = r.get(f"{m}_p")
            return "—" if v is None or pd.isna(v) else f"{v:.2g}"

        lines.append(
            f"| {r['setting']} | {r['method']} | {r['repeats']} | {ms('paper_accuracy')} "
            f"| {r['paper_accuracy_ci']} | {ms('leakfree_accuracy')} | {ms('auroc')} "
            f"| {ms('leakfree_f1')} | {ms('prevalence_accuracy')} | {p('paper_accuracy')} "
            f"| {p('auroc')} |"
        )
    return "\n".join(lines) + "\n"


def label_table(labels: pd.DataFrame, setting: str, methods: Sequence[str]) -> str:
    """Per-label mean AUROC and paper accuracy (%) of ``methods`` on one setting, as Markdown."""
    here = labels[(labels["setting"] == setting) & labels["method"].isin(methods)]
    table = here.groupby(["label", "method"])[["auroc", "paper_accuracy"]].mean().unstack("method")
    present = [m for m in methods if m in table["auroc"].columns]
    head = " | ".join(f"{m} AUROC | {m} acc." for m in present)
    lines = [
        f"Per label, setting `{setting}` (mean over repeats):",
        "",
        f"| label | {head} |",
        "| --- |" + " ---: | ---: |" * len(present),
    ]
    for label, r in table.iterrows():
        cells = " | ".join(
            f"{100 * r[('auroc', m)]:.1f} | {100 * r[('paper_accuracy', m)]:.1f}" for m in present
        )
        lines.append(f"| {label} | {cells} |")
    return "\n".join(lines) + "\n"


def plot(
    summary: pd.DataFrame,
    path: Path,
    xlabel: str,
    *,
    central: pd.Series | None = None,
    paper: dict[float, float] | None = None,
    paper_band: tuple[float, float] | None = None,
) -> None:
    """Paper accuracy and macro AUROC vs x, one line per method with SD bands; the central
    baseline as a dashed line; the paper's reported numbers (``{x: paper accuracy %}``) as stars
    or, where it gives a range over the sweep, as a grey band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (metric, title) in zip(
        axes,
        (("paper_accuracy", "paper accuracy (test-set Youden), %"), ("auroc", "macro AUROC, %")),
        strict=True,
    ):
        for method, sub in summary.groupby("method", sort=False):
            sub = sub.sort_values("x")
            mean, sd = 100 * sub[f"{metric}_mean"], 100 * sub[f"{metric}_sd"]
            style = {"lw": 2.2} if method == REFERENCE else {"lw": 1.2, "alpha": 0.9}
            line = ax.plot(sub["x"], mean, marker="o", ms=3, label=method, **style)[0]
            ax.fill_between(sub["x"], mean - sd, mean + sd, alpha=0.12, color=line.get_color())
        if central is not None:
            ax.axhline(100 * central[f"{metric}_mean"], ls="--", color="k", lw=1, label="central")
        if paper and metric == "paper_accuracy":
            ax.plot(list(paper), list(paper.values()), "k*", ms=10, label="paper (Shah et al.)")
        if paper_band and metric == "paper_accuracy":
            ax.axhspan(*paper_band, color="grey", alpha=0.25, label="paper's range (Shah et al.)")
        ax.set_xlabel(xlabel)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    handles = dict(zip(*reversed(axes[0].get_legend_handles_labels()), strict=True))
    handles.update(dict(zip(*reversed(axes[1].get_legend_handles_labels()), strict=True)))
    fig.legend(handles.values(), handles.keys(), fontsize=8, loc="center right")
    fig.tight_layout(rect=(0, 0, 0.84, 1))
    save_png(fig, path)


def save_png(fig: Figure, path: Path) -> None:
    """Write ``fig`` to ``path`` as a PNG, atomically, and close it."""
    import matplotlib.pyplot as plt

    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    plt.close(fig)


def label_plot(labels: pd.DataFrame, setting: str, methods: Sequence[str], path: Path) -> None:
    """Per-label AUROC bars of ``methods`` on one setting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    here = labels[(labels["setting"] == setting) & labels["method"].isin(methods)]
    table = here.groupby(["label", "method"])["auroc"].mean().unstack("method")
    present = [m for m in methods if m in table.columns]
    fig, ax = plt.subplots(figsize=(12, 4.5))
    width = 0.8 / max(len(present), 1)
    for i, m in enumerate(present):
        ax.bar(np.arange(len(table)) + i * width, 100 * table[m], width, label=m)
    ax.set_xticks(np.arange(len(table)) + 0.4 - width / 2, table.index, rotation=35, ha="right")
    ax.set_ylim(40, 100)
    ax.set_ylabel("AUROC, %")
    ax.set_title(f"per-label AUROC, {setting}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    save_png(fig, path)


def repeats_default(quick: bool, repeats: int | None) -> int:
    """Repeats: ``--repeats``, else 3 with ``--quick``, else 20 (the papers')."""
    if repeats is not None:
        return repeats
    return 3 if quick else 20
