"""Shared machinery of the experiments: data, resumable repeats, statistics, tables and plots.

An experiment is a list of named settings (a :class:`~reportfed.protocol.Protocol` each) run for
seeds ``0..repeats-1`` on the IU corpus with cached MiniLM embeddings. Every finished run is
appended to ``results/<experiment>.csv`` (rewritten atomically), so a crashed sweep restarts where
it stopped. The summary ``results/<experiment>.md`` gives mean ± SD, a 95% bootstrap CI and a
paired t-test against the reference setting (same seeds = same partitions).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from tqdm.auto import tqdm

from reportfed.data.iu import load_iu
from reportfed.embed import embed_texts, make_embedder
from reportfed.io import atomic_write
from reportfed.labels import CHEXPERT_13, LabelSpace
from reportfed.paths import embeddings_cache_dir
from reportfed.protocol import Protocol, simulate

RESULTS = Path(__file__).resolve().parent / "results"
METRICS = ("paper_accuracy", "leakfree_accuracy", "auroc", "leakfree_f1", "prevalence_accuracy")


@dataclass(frozen=True)
class Setting:
    """One arm of an experiment: a name, an x-axis value for plots, and its protocol."""

    name: str
    x: float
    protocol: Protocol


def iu_data(embedder: str = "minilm") -> tuple[np.ndarray, np.ndarray, LabelSpace, str]:
    """IU reports with all 13 findings annotated: embeddings, labels, label space, fingerprint."""
    table = load_iu().select_labels(list(CHEXPERT_13))
    table = table.fully_annotated()
    emb = make_embedder(embedder)
    x = embed_texts(table.texts, emb, cache_dir=embeddings_cache_dir())
    return x, table.labels, table.label_space, emb.fingerprint


def run(
    name: str, settings: Sequence[Setting], repeats: int, *, out_dir: Path = RESULTS
) -> pd.DataFrame:
    """Run every setting for seeds ``0..repeats-1`` (skipping runs already stored); return all runs."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.csv"
    done = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=["setting", "seed"])
    finished = set(zip(done["setting"], done["seed"].astype(int), strict=True))
    todo = [
        (s, seed) for s in settings for seed in range(repeats) if (s.name, seed) not in finished
    ]
    rows = done.to_dict("records")
    if todo:
        x, y, labels, fingerprint = iu_data()
        for setting, seed in tqdm(todo, desc=name, unit="run"):
            result = simulate(x, y, labels, setting.protocol, seed, fingerprint=fingerprint)
            rows.append(
                {
                    "setting": setting.name,
                    "x": setting.x,
                    "seed": seed,
                    **result.metrics,
                    "nodes": setting.protocol.n_nodes,
                    "shared": setting.protocol.n_shared,
                    "embedder": fingerprint,
                }
            )
            frame = pd.DataFrame(rows)
            atomic_write(path, lambda tmp, f=frame: f.to_csv(tmp, index=False))
    return pd.DataFrame(rows)


def _bootstrap_ci(
    values: np.ndarray, rng: np.random.Generator, n: int = 2000
) -> tuple[float, float]:
    means = rng.choice(values, size=(n, len(values)), replace=True).mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def summarize(runs: pd.DataFrame, settings: Sequence[Setting], reference: str) -> pd.DataFrame:
    """Mean, SD, bootstrap CI per setting and metric; paired t-test p-value against ``reference``."""
    rng = np.random.default_rng(0)
    ref = runs[runs["setting"] == reference].set_index("seed")
    rows = []
    for s in settings:
        sub = runs[runs["setting"] == s.name].set_index("seed").sort_index()
        row: dict[str, object] = {"setting": s.name, "x": s.x, "repeats": len(sub)}
        for m in METRICS:
            v = sub[m].to_numpy(float)
            lo, hi = _bootstrap_ci(v, rng)
            row[f"{m}_mean"], row[f"{m}_sd"] = v.mean(), v.std(ddof=1) if len(v) > 1 else 0.0
            row[f"{m}_ci"] = f"[{lo:.4f}, {hi:.4f}]"
            common = sub.index.intersection(ref.index)
            if s.name != reference and len(common) > 1:
                row[f"{m}_p_vs_{reference}"] = float(
                    stats.ttest_rel(sub.loc[common, m], ref.loc[common, m]).pvalue
                )
        rows.append(row)
    return pd.DataFrame(rows)


def markdown(summary: pd.DataFrame, title: str, reference: str, notes: str = "") -> str:
    """A Markdown table: mean ± SD (%) of the main metrics, p-values vs the reference."""
    lines = [
        f"# {title}",
        "",
        notes,
        "",
        "| setting | n | paper acc. | leak-free acc. | macro AUROC | leak-free F1 | prevalence acc. | p (paper acc., paired t vs "
        f"{reference}) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for _, r in summary.iterrows():

        def ms(m: str, r=r) -> str:
            return f"{100 * r[f'{m}_mean']:.2f} ± {100 * r[f'{m}_sd']:.2f}"

        p = r.get(f"paper_accuracy_p_vs_{reference}")
        p_text = "—" if p is None or pd.isna(p) else f"{p:.2g}"
        lines.append(
            f"| {r['setting']} | {r['repeats']} | {ms('paper_accuracy')} | {ms('leakfree_accuracy')} | "
            f"{ms('auroc')} | {ms('leakfree_f1')} | {ms('prevalence_accuracy')} | {p_text} |"
        )
    return "\n".join(lines) + "\n"


def plot(summary: pd.DataFrame, path: Path, xlabel: str, central: pd.Series | None = None) -> None:
    """Metric vs x with SD bands; the central baseline as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for m, label in (
        ("paper_accuracy", "paper accuracy (test-set Youden)"),
        ("leakfree_accuracy", "leak-free accuracy"),
        ("auroc", "macro AUROC"),
    ):
        mean, sd = 100 * summary[f"{m}_mean"], 100 * summary[f"{m}_sd"]
        line = ax.plot(summary["x"], mean, marker="o", label=label)[0]
        ax.fill_between(summary["x"], mean - sd, mean + sd, alpha=0.15, color=line.get_color())
        if central is not None:
            ax.axhline(100 * central[f"{m}_mean"], ls="--", color=line.get_color(), lw=1)
    ax.plot([], [], ls="--", color="grey", label="central baseline")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("%")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    plt.close(fig)


def repeats_default(quick: bool, repeats: int | None) -> int:
    """Repeats: ``--repeats``, else 3 with ``--quick``, else 20 (the papers')."""
    if repeats is not None:
        return repeats
    return 3 if quick or os.environ.get("REPORTFED_QUICK") else 20
