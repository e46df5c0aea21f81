"""``python -m experiments <name> [--repeats N] [--quick]``: run, summarise, tabulate and plot.

IU reports, 13 CheXpert findings (MeSH-derived), 80/20 split, 20 rounds x 1 local epoch, 10% of
each site's training rows held out for leak-free thresholds, MLP 512-256, Adam 1e-3, batch 32:

* ``paper``: central vs surgical aggregation at K=2 and K=10 (0 shared labels), next to the paper;
* ``nodes``: K = 2..10 sites, 0 shared labels, with the baselines;
* ``shared``: K=2, 0..13 shared labels, IID sites, with the baselines;
* ``noniid``: K=2, shared labels, label-skewed sites (Dirichlet 0.5) and section shift (one site
  embeds findings, the other impressions; tested on whole reports);
* ``embeddings``: K=2, 0 shared: all-MiniLM-L6-v2 vs all-mpnet-base-v2 vs ``--embedder`` specs;
* ``vocab``: a CheXpert-named site (MeSH labels) and an NIH-named site (NegBio labels) on
  disjoint reports, with and without alias harmonisation;
* ``psi``: K=4, label heterogeneity psi = the share of the 13 labels each site does *not*
  annotate (0 = every site has every label; each label keeps at least one site);
* ``size``: K=2, 0 shared, each site keeps a fraction N of its training rows (test set fixed);
* ``beyond``: K=10 and K=2 with engine options beyond the paper (more local epochs, knowledge
  transfer for labels a site lacks, positive-class weighting, a linear skip term in the head,
  server momentum, FedProx)
  against the paper's method, central and site-alone models;
* ``sentence``: K=2 and K=10, the paper's method and central on whole-report embeddings vs the
  same on sentence-level embeddings (each sentence scored, max over a report's sentences);
* ``consortium``: the F1 a consortium reads, at K = 2..10, with leads and threshold rules;
* ``styles``: K=5, the same IU reports written in five hospital styles, at every site or one per
  site, each model judged on the test rows in every style (:mod:`experiments.styles`);
* ``gap``: K=10, the product's defaults against central and against a change to them, each
  model's F1 with every way of choosing thresholds, the text rules' reading of the labels a
  site lacks among them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from experiments import EXPERIMENTS
from experiments.baselines import METHODS, Scenario
from experiments.beyond import (
    CONSORTIUM,
    DEFAULTS,
    FEDPROX,
    GAP,
    SENTENCE_VARIANTS,
    SWEEP,
    TEMPLATED,
    VARIANTS,
    consortium_table,
    cost_table,
    curve_plot,
    defaults_table,
    f1_table,
    gap_table,
    sweep_plot,
    threshold_rules_table,
)
from experiments.iu_mimic import MIMIC_REPORTS, MimicSite, iu_mimic
from experiments.protocol import Protocol, scenario
from experiments.runner import (
    CENTRALS,
    REFERENCE,
    RESULTS,
    Setting,
    iu_data,
    iu_read,
    label_plot,
    label_table,
    markdown,
    plot,
    repeats_default,
    run,
    stored,
    summarize,
)
from experiments.sources import mpnet_path, negbio_csv
from experiments.styles import STYLE_SETTINGS, styled, styles_plot, styles_table
from reportfed.core.config import PAPER, FederationConfig
from reportfed.core.errors import ReportfedError
from reportfed.core.files import atomic_write
from reportfed.core.labels import CHEXPERT_13, LabelSpace, canonical
from reportfed.data.iu import load_negbio
from reportfed.data.mimic import stand_in

#: Shah et al. (MIDL 2025), private radiologist labels: paper accuracy (%).
PAPER_NODES = {1.0: 91.67, 2.0: 89.98, 10.0: 74.73}
PAPER_SHARED = (90.19, 90.89)  #: its range over the IID shared-label sweep
BASELINES = (
    "central-masked",
    "central-negatives",
    "fl-zero-fill",
    "fl-partial-loss",
    "split",
    "local",
)


def notes(config: FederationConfig, repeats: int) -> str:
    """The protocol shared by every table, with the rounds and seeds actually run."""
    epochs = config.rounds * config.local_epochs
    mlp = "-".join(map(str, config.hidden))
    return (
        "IU reports with all 13 findings annotated (3,832), MeSH-derived labels, all-MiniLM-L6-v2 "
        "(bf16) unless stated, 80/20 split, 10% of each site's training rows held out for "
        f"leak-free thresholds, MLP {mlp}, Adam {config.lr:g}, batch {config.batch_size}, "
        f"{config.rounds} rounds x {config.local_epochs} local epoch(s), unweighted surgical "
        f"aggregation; central and site-alone baselines train {epochs} epochs. Seeds "
        f"0..{repeats - 1}; a seed fixes the split, the partition and the training, so every "
        "method of a setting sees the same partitions (paired tests). p: paired t-test against "
        "the paper's method at the same granularity on the same setting: surgical aggregation "
        "of whole-report embeddings ('surgical') or of sentence embeddings ('sentence')."
    )


def _iid(
    embedder: str = "minilm", *, sentences: bool = False, read: bool = False, **protocol: object
) -> Callable[[int], Scenario]:
    """IU's repeats under ``protocol``; ``sentences``: with sentence bags; ``read``: with what the
    text rules read in each report (:func:`~experiments.runner.iu_read`)."""

    def build(seed: int) -> Scenario:
        x, y, labels, _, _ = iu_data(embedder)
        bags = iu_data(embedder, granularity="sentence")[0] if sentences else None
        found = scenario(
            x,
            y,
            labels,
            Protocol(**protocol),  # type: ignore[arg-type]
            seed,
            sentences=bags,
            embedder=embedder,
        )
        return replace(found, read=iu_read()) if read else found

    return build


@cache
def _sections() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, LabelSpace]:
    """Reports with both sections: whole-report, findings and impression embeddings, labels."""
    views = {s: iu_data("minilm", s) for s in ("text", "findings", "impression")}
    common = sorted(set.intersection(*(set(v[4]) for v in views.values())))
    pick = {s: [v[4].index(i) for i in common] for s, v in views.items()}
    x = {s: views[s][0][pick[s]] for s in views}
    y, labels = views["text"][1][pick["text"]], views["text"][2]
    return x["text"], x["findings"], x["impression"], y, labels


def _section_shift(n_shared: int) -> Callable[[int], Scenario]:
    def build(seed: int) -> Scenario:
        text, findings, impression, y, labels = _sections()
        base = scenario(text, y, labels, Protocol(n_nodes=2, n_shared=n_shared), seed)
        views = {"node0": findings, "node1": impression}
        return replace(base, sites=[replace(s, x=views[s.name]) for s in base.sites])

    return build


@cache
def _vocab_data(aliases: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, LabelSpace, LabelSpace]:
    """IU reports labelled both ways: embeddings, truth over the union, the NIH site's labels over
    the union, the CheXpert site's and the NIH site's label spaces. Without ``aliases`` the NIH
    names stay apart ("NIH Effusion" is not "Pleural Effusion")."""
    x, y_mesh, chexpert, _, ids = iu_data()
    raw = pd.read_csv(negbio_csv()).set_index("filename")
    negbio = load_negbio(negbio_csv())
    keep = [i for i, uid in enumerate(ids) if uid in negbio.index]
    uids = [ids[i] for i in keep]
    nih_names = [c for c in raw.columns if c != "normal"]
    if aliases:
        nih = LabelSpace.of(nih_names)
    else:
        nih = LabelSpace.of([f"NIH {c}" for c in nih_names], allow_unknown=True)
    union = LabelSpace.union([chexpert, nih])
    truth = np.full((len(keep), len(union)), np.nan, dtype=np.float32)
    nih_view = truth.copy()
    for j, name in enumerate(union):
        source = canonical(name.removeprefix("NIH "), allow_unknown=True)
        if name in chexpert:
            truth[:, j] = y_mesh[keep, chexpert.index(name)]
        elif source in negbio.columns:
            truth[:, j] = negbio.loc[uids, source].to_numpy()
        if name in nih:
            nih_view[:, j] = negbio.loc[uids, source].to_numpy()
    return x[keep], truth, nih_view, chexpert, nih


def _vocab(aliases: bool) -> Callable[[int], Scenario]:
    def build(seed: int) -> Scenario:
        x, truth, nih_view, chexpert, nih = _vocab_data(aliases)
        union = LabelSpace.union([chexpert, nih])
        base = scenario(x, truth, union, Protocol(n_nodes=2), seed)  # IID halves of the rows
        first, second = base.sites
        sites = [replace(first, labels=chexpert), replace(second, labels=nih, y=nih_view)]
        return replace(base, sites=sites)

    return build


def _psi(psi: float) -> Callable[[int], Scenario]:
    def build(seed: int) -> Scenario:
        x, y, labels, _, _ = iu_data()
        base = scenario(x, y, labels, Protocol(n_nodes=4, n_shared=len(labels)), seed)
        rng = np.random.default_rng(10_000 + seed)
        drop = round(psi * len(labels))
        kept = [set(rng.permutation(len(labels))[drop:].tolist()) for _ in base.sites]
        for c in range(len(labels)):  # a label nobody kept goes to a random site
            if not any(c in k for k in kept):
                kept[int(rng.integers(len(kept)))].add(c)
        sites = [
            replace(s, labels=LabelSpace(tuple(labels[c] for c in sorted(k))))
            for s, k in zip(base.sites, kept, strict=True)
        ]
        return replace(base, sites=sites)

    return build


def _size(fraction: float) -> Callable[[int], Scenario]:
    def build(seed: int) -> Scenario:
        x, y, labels, _, _ = iu_data()
        base = scenario(x, y, labels, Protocol(n_nodes=2), seed)
        rng = np.random.default_rng(20_000 + seed)
        sites = [
            replace(s, fit=np.sort(rng.permutation(s.fit)[: max(1, round(fraction * len(s.fit)))]))
            for s in base.sites
        ]
        return replace(base, sites=sites)

    return build


def vocab_merge_table(labels: pd.DataFrame) -> str:
    """Surgical aggregation's AUROC on the findings both vocabularies name: one merged class with
    aliases, two classes (each learned by one site) without."""
    surgical = labels[labels["method"] == REFERENCE]
    mean = surgical.groupby(["setting", "label"])["auroc"].mean()
    rows = [
        "Findings named by both sites (surgical aggregation, macro AUROC %): with aliases one class "
        "learned from both sites' reports; without, one class per vocabulary.",
        "",
        "| finding | aliases: merged | no aliases: CheXpert name | no aliases: NIH name |",
        "| --- | ---: | ---: | ---: |",
    ]
    for raw in pd.read_csv(negbio_csv(), nrows=0).columns:
        name = canonical(raw, allow_unknown=True)
        if raw == "normal" or name not in CHEXPERT_13 or ("aliases", name) not in mean:
            continue
        rows.append(
            f"| {name} | {100 * mean['aliases', name]:.1f} | {100 * mean['no aliases', name]:.1f} "
            f"| {100 * mean['no aliases', f'NIH {raw}']:.1f} |"
        )
    return "\n".join(rows) + "\n"


@dataclass(frozen=True)
class Asked:
    """What an experiment's settings depend on beyond its name: ``--embedder`` specs, and a
    MIMIC-CXR copy's root and how many of its reports to draw (``--mimic-root``)."""

    embedders: Sequence[str] = ()
    mimic: MimicSite | None = None


#: the settings of an experiment and its plot's x-axis label, from what was asked
SettingsFn = Callable[[Asked], tuple[list[Setting], str]]
#: every experiment's settings, by name (:func:`experiment` registers them)
_SETTINGS: dict[str, SettingsFn] = {}
#: the central model on every site's rows, which most experiments compare against
_CENTRAL = Setting("central", 1, _iid(n_nodes=1), ("central",))


def experiment(name: str) -> Callable[[SettingsFn], SettingsFn]:
    """Register the function giving experiment ``name``'s settings."""

    def register(settings: SettingsFn) -> SettingsFn:
        _SETTINGS[name] = settings
        return settings

    return register


def settings_for(
    name: str, embedders: Sequence[str], mimic: MimicSite | None = None
) -> tuple[list[Setting], str]:
    """The settings of an experiment and its plot x-axis label; ``mimic`` (a MIMIC-CXR copy's
    root and how many of its reports) makes ``noniid`` the paper's IU + MIMIC experiment."""
    if name not in _SETTINGS:
        raise SystemExit(f"unknown experiment {name!r}: choose one of {', '.join(EXPERIMENTS)}")
    return _SETTINGS[name](Asked(tuple(embedders), mimic))


@experiment("paper")
def _paper_settings(asked: Asked) -> tuple[list[Setting], str]:
    """Central vs surgical aggregation at K=2 and K=10 (0 shared labels)."""
    return [_CENTRAL] + [Setting(f"K={k}", k, _iid(n_nodes=k)) for k in (2, 10)], ""


@experiment("nodes")
def _nodes_settings(asked: Asked) -> tuple[list[Setting], str]:
    """K = 2..10 sites, 0 shared labels, with the baselines."""
    return (
        [_CENTRAL]
        + [
            Setting(
                f"K={k}",
                k,
                _iid(n_nodes=k),
                (REFERENCE, *BASELINES) if k % 2 == 0 else (REFERENCE,),
                baseline_repeats=10,
            )
            for k in range(2, 11)
        ],
        "sites (K), 0 shared labels",
    )


@experiment("shared")
def _shared_settings(asked: Asked) -> tuple[list[Setting], str]:
    """K=2, 0..13 shared labels, IID sites, with the baselines."""
    return (
        [_CENTRAL]
        + [
            Setting(
                f"shared={s}",
                s,
                _iid(n_nodes=2, n_shared=s),
                (REFERENCE, *BASELINES, "local-heads") if s in (0, 4, 8, 13) else (REFERENCE,),
                baseline_repeats=10,
            )
            for s in range(14)
        ],
        "labels shared by both sites (K=2, IID)",
    )


@experiment("noniid")
def _noniid_settings(asked: Asked) -> tuple[list[Setting], str]:
    """K=2, shared labels: label-skewed sites and section shift; with a MIMIC-CXR copy, one IU
    and one MIMIC-CXR site (the paper's third experiment)."""
    if asked.mimic is not None:
        return (
            [
                Setting(
                    f"iu+mimic shared={s}",
                    s,
                    iu_mimic(s, asked.mimic),
                    (REFERENCE, *BASELINES, "local-heads", DEFAULTS)
                    if s in (0, 13)
                    else (REFERENCE, DEFAULTS),
                    baseline_repeats=10,
                )
                for s in range(14)
            ],
            "labels shared by the IU and the MIMIC-CXR site",
        )
    grid = (0, 2, 4, 6, 8, 10, 12, 13)
    methods = (REFERENCE, *BASELINES, "local-heads")
    return (
        [
            Setting(
                f"dirichlet shared={s}",
                s,
                _iid(n_nodes=2, n_shared=s, rows="dirichlet", alpha=0.5),
                methods if s in (0, 13) else (REFERENCE,),
                baseline_repeats=10,
            )
            for s in grid
        ]
        + [
            Setting(
                f"section shared={s}",
                s,
                _section_shift(s),
                methods if s in (0, 13) else (REFERENCE,),
                baseline_repeats=10,
            )
            for s in grid
        ],
        "labels shared by both sites (K=2)",
    )


@experiment("embeddings")
def _embeddings_settings(asked: Asked) -> tuple[list[Setting], str]:
    """K=2, 0 shared, one setting per embedder."""
    specs = {"all-MiniLM-L6-v2": "minilm", "all-mpnet-base-v2": f"st:{mpnet_path()}"}
    specs.update({e: e for e in asked.embedders})
    return (
        [
            Setting(
                label,
                i,
                _iid(spec, n_nodes=2),
                (REFERENCE, "central", *BASELINES),
                baseline_repeats=10,
                embedder=spec,
            )
            for i, (label, spec) in enumerate(specs.items())
        ],
        "",
    )


@experiment("vocab")
def _vocab_settings(asked: Asked) -> tuple[list[Setting], str]:
    """A CheXpert-named and an NIH-named site, with and without alias harmonisation."""
    return (
        [
            Setting(
                label,
                i,
                _vocab(aliases),
                (REFERENCE, "central", "fl-zero-fill", "fl-partial-loss", "local"),
                baseline_repeats=10,
            )
            for i, (label, aliases) in enumerate((("aliases", True), ("no aliases", False)))
        ],
        "",
    )


@experiment("psi")
def _psi_settings(asked: Asked) -> tuple[list[Setting], str]:
    """K=4, label heterogeneity psi (the share of labels a site lacks)."""
    return (
        [
            Setting(
                f"psi={p}",
                p,
                _psi(p),
                (REFERENCE, "fl-zero-fill", "fl-partial-loss", "local"),
                baseline_repeats=10,
            )
            for p in (0.0, 0.25, 0.5, 0.75)
        ],
        "label heterogeneity psi (share of labels a site lacks, K=4)",
    )


@experiment("size")
def _size_settings(asked: Asked) -> tuple[list[Setting], str]:
    """K=2, 0 shared, a fraction N of each site's training rows."""
    return (
        [
            Setting(
                f"N={f}",
                f,
                _size(f),
                (REFERENCE, "central-masked", "local"),
                baseline_repeats=10,
            )
            for f in (0.1, 0.25, 0.5, 1.0)
        ],
        "fraction N of each site's training rows (K=2)",
    )


@experiment("beyond")
def _beyond_settings(asked: Asked) -> tuple[list[Setting], str]:
    """Engine options beyond the paper over the K sweep, both granularities."""
    every = (REFERENCE, *VARIANTS, "central", "local", "sentence", *SENTENCE_VARIANTS)
    every += ("central-sentence",)
    return (
        [
            Setting(f"K={k}", k, _iid(n_nodes=k, sentences=True), every if k in (2, 10) else SWEEP)
            for k in (10, 2, 4, 6, 8)  # the headline setting first
        ]
        + [
            Setting(f"K=10 shared={n}", 10, _iid(n_nodes=10, n_shared=n, sentences=True), SWEEP)
            for n in (2, 4)
        ],
        "",  # beyond plots its K sweep itself (both granularities)
    )


@experiment("sentence")
def _sentence_settings(asked: Asked) -> tuple[list[Setting], str]:
    """Whole-report vs sentence-level embeddings at K=2 and K=10."""
    arms = (REFERENCE, "sentence", "central", "central-sentence")
    return (
        [Setting(f"K={k}", k, _iid(n_nodes=k, sentences=True), arms) for k in (2, 10)],
        "",
    )


@experiment("consortium")
def _consortium_settings(asked: Asked) -> tuple[list[Setting], str]:
    """The F1 a consortium reads, K = 2..10 (issue 47)."""
    compared = (
        "sentence",
        f"sentence+{TEMPLATED}",
        f"sentence+{TEMPLATED}+prox=0.01",
        f"sentence+{TEMPLATED}+momentum=0.9",
        "central-sentence",
    )
    read = (DEFAULTS,)  # FedProx and the labels a site lacks, read by the text rules
    rule = compared[1:3] + read  # the combination, FedProx and reading, over the K sweep
    return (
        [
            Setting(f"K={k}", k, _iid(n_nodes=k, sentences=True, read=True), compared + read)
            for k in (10, 6)
        ]
        + [
            Setting(f"K={k}", k, _iid(n_nodes=k, sentences=True, read=True), rule)
            for k in (8, 4, 2)
        ],
        "",
    )


@experiment("styles")
def _styles_settings(asked: Asked) -> tuple[list[Setting], str]:
    """K=5, the same IU reports in five hospital styles (issue 47)."""
    return (
        [
            Setting(setting, i, styled(site_styles), (FEDPROX, DEFAULTS))
            for i, (setting, site_styles) in enumerate(STYLE_SETTINGS.items())
        ],
        "",
    )


@experiment("gap")
def _gap_settings(asked: Asked) -> tuple[list[Setting], str]:
    """K=10: the defaults, central, and a change to the defaults paired with them, each judged
    with every threshold rule (issue 73 §4)."""
    arms = (DEFAULTS, "central-sentence", *GAP)
    return [Setting("K=10", 10, _iid(n_nodes=10, sentences=True, read=True), arms)], ""


def beyond_tables(
    runs: pd.DataFrame,
    labels: pd.DataFrame,
    rounds: pd.DataFrame,
    summary: pd.DataFrame,
    out: Path,
    tag: str,
) -> str:
    """The beyond experiment's cost and F1 tables (K=10 and K=2), its K sweep plot and its
    AUROC-per-round plot at K=10."""
    text = "\n" + defaults_table(summary, rounds)
    for setting in ("K=10", "K=2"):
        text += "\n" + cost_table(runs, rounds, setting)
        text += "\n" + f1_table(labels, setting, [*SWEEP, *CENTRALS.values()])
    sweep_plot(summary, out / f"{tag}-sweep.png")
    curve_plot(rounds, "K=10", out / f"{tag}-rounds.png")
    return (
        text + f"\nPlots: `{tag}-sweep.png` (the K sweep), `{tag}-rounds.png` (AUROC per round).\n"
    )


def title(name: str, tag: str, mimic: MimicSite | None) -> str:
    """An experiment's table title; ``noniid``'s says which hospitals its two sites are."""
    if name != "noniid":
        return f"Experiment: {tag}"
    if mimic is not None:
        kind = "a stand-in, not MIMIC-CXR" if stand_in(mimic.root) else "MIMIC-CXR"
        return (
            f"Experiment: {tag} (one IU site and one MIMIC-CXR site, {mimic.reports} reports of "
            f"{mimic.root}: {kind})"
        )
    return (
        f"Experiment: {tag} (IU stand-in: both sites built from IU's reports; --mimic-root runs "
        "IU + MIMIC-CXR)"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m experiments",
        description=__doc__.replace("``", "").replace(" (:mod:`experiments.styles`)", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="python -m experiments simulate --help: one repeat of the papers' protocol, its "
        "own options",
    )
    parser.add_argument(
        "name",
        choices=(*EXPERIMENTS, "simulate"),
        help="an experiment (above), or simulate",
    )
    parser.add_argument(
        "--repeats", type=int, default=None, help="repeats (default 20; 3 with --quick)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="5 rounds, 3 repeats, separate result files"
    )
    parser.add_argument(
        "--out",
        default=str(RESULTS),
        help="folder of the result files (tables, runs, plots); a run resumes the runs stored "
        "there (default: experiments/results under the working directory)",
    )
    parser.add_argument(
        "--embedder",
        action="append",
        default=[],
        help="extra embedder spec for 'embeddings' (e.g. hf:/models/Bio_ClinicalBERT); repeatable",
    )
    parser.add_argument(
        "--mimic-root",
        type=Path,
        default=None,
        help="noniid: a local MIMIC-CXR copy (reportfed corpus mimic's --root): one IU site and "
        "one MIMIC site, the paper's third experiment (default: both sites from IU)",
    )
    parser.add_argument(
        "--mimic-reports",
        type=int,
        default=MIMIC_REPORTS,
        help=f"noniid: reports of the MIMIC site, drawn once from its train split (default "
        f"{MIMIC_REPORTS}, as many as IU's site)",
    )
    parser.add_argument(
        "--iu-reports",
        type=int,
        default=None,
        help="noniid with --mimic-root: reports of the IU site, drawn once (default: all of IU's "
        "fully annotated ones; fewer make a quick trial)",
    )
    parser.add_argument(
        "--tables-only",
        action="store_true",
        help="write the tables and plots from the runs stored in --out, training nothing "
        "(a long sweep's partial results)",
    )
    args = parser.parse_args(argv)
    if args.mimic_root is not None and args.name != "noniid":
        raise ReportfedError("--mimic-root is the noniid experiment's")
    mimic = (
        None
        if args.mimic_root is None
        else MimicSite(args.mimic_root, args.mimic_reports, args.iu_reports)
    )
    if mimic is not None and not args.mimic_root.is_dir():
        raise ReportfedError(f"--mimic-root {args.mimic_root}: no such folder")
    settings, xlabel = settings_for(args.name, args.embedder, mimic)
    if args.quick and mimic is not None:  # the ends of the grid: no label shared, every label
        settings = [s for s in settings if s.x in (0, 13)]
    repeats = repeats_default(args.quick, args.repeats)
    if args.quick or args.repeats is not None:
        settings = [
            replace(s, baseline_repeats=min(s.baseline_repeats or repeats, repeats))
            for s in settings
        ]
    config = replace(PAPER, rounds=5) if args.quick else PAPER
    name = f"{args.name}-mimic" if mimic is not None else args.name
    tag = f"{name}-quick" if args.quick else name
    out = Path(args.out)
    print(f"results: {out.resolve()}", file=sys.stderr, flush=True)
    methods = {**METHODS, **VARIANTS, **SENTENCE_VARIANTS, **CONSORTIUM, **GAP}
    if args.tables_only:
        runs, labels, rounds = stored(tag, out)
        if runs.empty:
            raise SystemExit(f"no runs of {tag!r} stored in {out}")
    else:
        runs, labels, rounds = run(
            tag, settings, repeats, config=config, methods=methods, out_dir=out
        )
    summary = summarize(runs, settings, methods)
    text_notes = notes(config, repeats)
    if mimic is not None:
        text_notes += (
            f"\n\nThe MIMIC-CXR site: {args.mimic_reports} reports drawn once (seed 0) from the "
            "official train split, the CheXpert labeler's labels (-1 and blank as 0, as in the "
            "papers), the text read through reportfed's sentence splitter and section scope; "
            "the IU site: "
            + ("IU's reports" if args.iu_reports is None else f"{args.iu_reports} of IU's reports")
            + ". Each site's test rows join one test set."
        )
    if args.name == "paper":
        text_notes += "\n\nPaper (Shah et al., MIDL 2025, private radiologist labels): central 91.67%, K=2 89.98%, K=10 74.73%."
    if args.name == "embeddings":
        text_notes += (
            "\n\nEmbedders (kind:model:sha256 of the weight files:precision): "
            + ", ".join(sorted(set(runs["embedder"])))
        )
    text = markdown(summary, title(args.name, tag, mimic), text_notes)
    focus = max(
        settings, key=lambda s: len(s.methods)
    ).name  # per-label detail where most methods ran
    arms = [m for m in dict.fromkeys(m for s in settings for m in s.methods)]
    if args.name == "consortium":
        text += "".join("\n" + consortium_table(runs, s.name) for s in settings)
        if reading := threshold_rules_table(runs, DEFAULTS):  # runs that store the rules
            text += "\n" + reading
    if args.name == "gap":
        text += "".join("\n" + gap_table(runs, s.name) for s in settings)
    if args.name == "styles":
        text += "\n" + styles_table(runs, DEFAULTS)
        styles_plot(runs, DEFAULTS, out / f"{tag}.png")
        text += f"\nPlot: `{tag}.png` (each setting on the test rows in each style).\n"
    if args.name == "beyond":
        text += beyond_tables(runs, labels, rounds, summary, out, tag)
        arms = [*SWEEP, *CENTRALS.values()]
    text += "\n" + label_table(labels, focus, arms)
    if args.name == "vocab":
        text += "\n" + vocab_merge_table(labels)
    atomic_write(out / f"{tag}.md", text.encode())
    label_plot(labels, focus, arms, out / f"{tag}-labels.png")
    central = summary[summary["method"] == "central"]
    if xlabel:
        for prefix in sorted({s.name.split(" ")[0] for s in settings if " " in s.name}) or [""]:
            part = summary[
                (summary["setting"] != "central") & summary["setting"].str.startswith(prefix)
            ]
            plot(
                part,
                out / (f"{tag}-{prefix}.png" if prefix else f"{tag}.png"),
                f"{xlabel}, {prefix}" if prefix else xlabel,
                central=central.iloc[0] if len(central) and args.name != "noniid" else None,
                paper=PAPER_NODES if args.name == "nodes" else None,
                paper_band=PAPER_SHARED if args.name == "shared" else None,
            )
    print(text)
    print(f"wrote {out.resolve() / f'{tag}.md'} and its tables and plots", file=sys.stderr)
