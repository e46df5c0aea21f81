"""Sites that write differently (``python -m experiments styles``): the same IU reports rewritten,
deterministically and with their labels kept, the way other hospitals write them.

* ``iu``: IU's headed sections (indication, comparison, findings, impression);
* ``mimic``: a MIMIC-style dictation: a banner, the examination, indication and comparison, with
  ``___`` where IU writes ``XXXX``;
* ``capitals``: the MIMIC style in capitals;
* ``numbered``: IU's sections with the impression as a numbered list;
* ``telegraphic``: IU's sections in telegraphic phrasing ("Lungs clear.", "No pneumothorax.").

Each setting trains the product's defaults on K=5 sites that share no label, each site reading
the labels it lacks in its own style's reports, and the same without reading (the combination
with FedProx, the defaults before reading); it judges each model on the same test rows written in
every style (:attr:`~experiments.baselines.Scenario.views`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.baselines import SWEEP_NUMERICS, Scenario
from experiments.protocol import Protocol, scenario
from experiments.runner import iu_data, paired_p
from reportfed.core.paths import embeddings_cache_dir
from reportfed.data.iu import load_iu_frame
from reportfed.embed import make_embedder
from reportfed.embed.granularity import embed_reports
from reportfed.text.sentences import split_sentences
from reportfed.text.states import read_labels

STYLES = ("iu", "mimic", "capitals", "numbered", "telegraphic")
SITES = 5  #: one site per style in the mixed setting

#: telegraphic phrasing: (pattern, replacement) applied to each sentence in order
_TELEGRAPHIC = [
    (re.compile(r"^There (?:is|are) no (?:evidence of )?", re.I), "No "),
    (re.compile(r"^No evidence of ", re.I), "No "),
    (re.compile(r"^There (?:is|are) ", re.I), ""),
    (re.compile(r"^The (\w+(?: \w+)?) (?:is|are) (?!not\b)", re.I), r"\1 "),
    (
        re.compile(r"^(\w+(?: \w+)?) (?:is|are) (?=(?:clear|normal|unremarkable|stable)\b)", re.I),
        r"\1 ",
    ),
]


def _telegraphic(text: str) -> str:
    out = []
    for sentence in split_sentences(text):
        for pattern, replacement in _TELEGRAPHIC:
            sentence = pattern.sub(replacement, sentence)
        out.append(sentence[:1].upper() + sentence[1:])
    return " ".join(out)


def _numbered(text: str) -> str:
    sentences = [re.sub(r"^\d+\.\s*", "", s) for s in split_sentences(text)]
    return "\n".join(f"{i}. {s}" for i, s in enumerate(sentences, start=1))


def _headed(sections: Mapping[str, str]) -> str:
    return "\n".join(f"{name.upper()}: {text}" for name, text in sections.items() if text)


def rewrite(report: Mapping[str, str], style: str) -> str:
    """``report`` (its ``indication``, ``comparison``, ``findings`` and ``impression``) written in
    ``style``, one of :data:`STYLES`."""
    parts = {k: report[k].strip() for k in ("indication", "comparison", "findings", "impression")}
    if style == "iu":
        return _headed(parts)
    if style == "numbered":
        return _headed({**parts, "impression": ""}) + (
            f"\nIMPRESSION:\n{_numbered(parts['impression'])}" if parts["impression"] else ""
        )
    if style == "telegraphic":
        spoken = ("findings", "impression")
        return _headed({k: _telegraphic(v) if k in spoken else v for k, v in parts.items()})
    if style in ("mimic", "capitals"):
        blanked = {k: v.replace("XXXX", "___") for k, v in parts.items()}
        text = "\n\n".join(
            [
                "FINAL REPORT",
                "EXAMINATION: CHEST (PA AND LAT)",
                f"INDICATION: {blanked['indication'] or '___'}",
                f"COMPARISON: {blanked['comparison'] or 'None.'}",
                f"FINDINGS:\n\n{blanked['findings']}" if blanked["findings"] else "",
                f"IMPRESSION:\n\n{blanked['impression']}" if blanked["impression"] else "",
            ]
        ).strip()
        return text.upper() if style == "capitals" else text
    raise ValueError(f"unknown style {style!r}: choose one of {', '.join(STYLES)}")


@cache
def styled_texts(embedder: str = "minilm") -> pd.DataFrame:
    """The experiments' IU reports (:func:`~experiments.runner.iu_data`'s rows, in its order),
    one column per style."""
    ids = iu_data(embedder)[4]
    frame = load_iu_frame().set_index("uid").loc[ids]
    records = frame[["indication", "comparison", "findings", "impression"]].to_dict("records")
    return pd.DataFrame({s: [rewrite(r, s) for r in records] for s in STYLES}, index=ids)


@cache
def styled_bags(embedder: str = "minilm") -> dict[str, np.ndarray]:
    """Sentence bags of every style's texts, computed as the sweeps compute them and padded with
    all-zero rows to one bag length, so a federation's rows stack whatever their style."""
    texts = styled_texts(embedder)
    emb = make_embedder(embedder, **SWEEP_NUMERICS)
    bags = {
        s: embed_reports(
            list(texts[s]), emb, granularity="sentence", cache_dir=embeddings_cache_dir()
        )
        for s in STYLES
    }
    longest = max(b.shape[1] for b in bags.values())
    return {s: np.pad(b, ((0, 0), (0, longest - b.shape[1]), (0, 0))) for s, b in bags.items()}


@cache
def styled_read() -> dict[str, np.ndarray]:
    """What the product's text rules read in each style's reports (the rows and labels of
    :func:`~experiments.runner.iu_read`)."""
    texts, labels = styled_texts(), list(iu_data()[2])
    return {s: read_labels(list(texts[s]), labels) for s in STYLES}


def styled(site_styles: tuple[str, ...]) -> Callable[[int], Scenario]:
    """Scenarios of :data:`SITES` IID sites sharing no label, site ``k`` writing in
    ``site_styles[k % len(site_styles)]`` and reading its reports in that style, judged on the
    test rows in every style."""

    def build(seed: int) -> Scenario:
        bags, reads = styled_bags(), styled_read()
        _, y, labels, _, _ = iu_data()
        base = scenario(bags["iu"], y, labels, Protocol(n_nodes=SITES), seed)
        style = [site_styles[k % len(site_styles)] for k in range(len(base.sites))]
        read = reads["iu"].copy()
        for site, own in zip(base.sites, style, strict=True):
            read[site.fit] = reads[own][site.fit]
        sites = [replace(site, x=bags[own]) for site, own in zip(base.sites, style, strict=True)]
        return replace(base, sites=sites, views=bags, read=read)

    return build


#: the styles experiment's settings: name -> the style of each site
STYLE_SETTINGS = {
    "IU style at every site": ("iu",),
    "a style per site": STYLES,
    "telegraphic at every site": ("telegraphic",),
}


def styles_table(runs: pd.DataFrame, method: str) -> str:
    """Macro AUROC / leak-free F1 of ``method`` per setting (rows) on the test rows written in
    each style (columns), percent, mean over the seeds, with each setting's mean over styles
    and its paired p against the first setting."""
    here = runs[runs["method"] == method]
    first = next(iter(STYLE_SETTINGS))
    lines = [
        f"`{method}` on the same test rows written in each style (macro AUROC / leak-free F1, "
        "percent, mean over the seeds; mean: over the five styles, with the paired p against "
        f"'{first}' on the seeds both ran):",
        "",
        "| sites | n | " + " | ".join(STYLES) + " | mean | p (AUROC) | p (F1) |",
        "| --- | ---: | " + " | ".join("---:" for _ in STYLES) + " | ---: | ---: | ---: |",
    ]
    means = {
        setting: pd.DataFrame(
            {m: sub[[f"{m}@{s}" for s in STYLES]].mean(axis=1) for m in ("auroc", "leakfree_f1")}
        ).set_index(sub["seed"])
        for setting, sub in here.groupby("setting", sort=False)
    }
    for setting, sub in here.groupby("setting", sort=False):
        cells = [
            f"{100 * sub[f'auroc@{s}'].mean():.2f} / {100 * sub[f'leakfree_f1@{s}'].mean():.2f}"
            for s in STYLES
        ]
        mean = means[setting]
        tests = [
            None if setting == first else paired_p(mean[m], means[first][m])
            for m in ("auroc", "leakfree_f1")
        ]
        ps = ["" if p is None else f"{p:.2g}" for p in tests]
        lines.append(
            f"| {setting} | {len(sub)} | {' | '.join(cells)} | {100 * mean['auroc'].mean():.2f} / "
            f"{100 * mean['leakfree_f1'].mean():.2f} | {' | '.join(ps)} |"
        )
    return "\n".join(lines) + "\n"


def styles_plot(runs: pd.DataFrame, method: str, path: Path) -> None:
    """Macro AUROC and leak-free F1 per test style, a line per setting (mean ± SD over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    here = runs[runs["method"] == method]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (metric, title) in zip(
        axes, (("auroc", "macro AUROC (%)"), ("leakfree_f1", "leak-free F1 (%)")), strict=True
    ):
        for setting, sub in here.groupby("setting", sort=False):
            values = 100 * sub[[f"{metric}@{s}" for s in STYLES]]
            mean, sd = values.mean(), values.std()
            ax.errorbar(STYLES, mean, yerr=sd, marker="o", capsize=3, label=setting)
        ax.set_xlabel("style of the test rows")
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("The same IU test reports written in five styles (K=5, no shared label)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
