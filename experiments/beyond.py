"""The ``beyond`` experiment's arms and its extra tables and plots: engine options beyond the
paper at both granularities, what they cost (wall time, bytes, rounds to a target AUROC), the
K sweep, and per-label F1 beside published IU results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.baselines import Method
from experiments.runner import CENTRALS, REFERENCE, REFERENCES, paired_p, save_png

#: Beyond the paper: engine options on top of surgical aggregation (same splits, paired tests).
VARIANTS = {
    m.name: m
    for m in (
        Method(
            "epochs=5",
            "surgical, 5 local epochs per round",
            "surgical",
            options={"local_epochs": 5},
        ),
        Method("distill=1", "surgical + knowledge transfer", "surgical", options={"distill": 1.0}),
        Method(
            "epochs=5+distill=1",
            "surgical, 5 local epochs + knowledge transfer",
            "surgical",
            options={"local_epochs": 5, "distill": 1.0},
        ),
        Method(
            "balance",
            "surgical, positives weighted by negatives/positives",
            "surgical",
            options={"balance": True},
        ),
        Method(
            "epochs=5+balance",
            "surgical, 5 local epochs, positive-class weighting",
            "surgical",
            options={"local_epochs": 5, "balance": True},
        ),
        Method(
            "epochs=5+skip",
            "surgical, 5 local epochs, linear input term in the head",
            "surgical",
            options={"local_epochs": 5, "skip": True},
        ),
        Method(
            "epochs=5+balance+momentum=0.9",
            "surgical, 5 local epochs, positive-class weighting, server momentum 0.9",
            "surgical",
            options={"local_epochs": 5, "balance": True, "server_momentum": 0.9},
        ),
        Method(
            "epochs=20",
            "surgical, 20 local epochs per round",
            "surgical",
            options={"local_epochs": 20},
        ),
        Method(
            "epochs=5+distill=1+balance",
            "surgical, 5 local epochs, knowledge transfer, positive-class weighting",
            "surgical",
            options={"local_epochs": 5, "distill": 1.0, "balance": True},
        ),
        Method(
            "epochs=20+distill=1+balance",
            "surgical, 20 local epochs, knowledge transfer, positive-class weighting",
            "surgical",
            options={"local_epochs": 20, "distill": 1.0, "balance": True},
        ),
        Method(
            "templates",
            "surgical + template sentences stating and negating each site's labels",
            "surgical",
            options={"templates": True},
        ),
        Method(
            "epochs=5+distill=1+balance+templates",
            "surgical, 5 local epochs, knowledge transfer, positive-class weighting, templates",
            "surgical",
            options={"local_epochs": 5, "distill": 1.0, "balance": True, "templates": True},
        ),
        Method(
            "epochs=20+distill=1+balance+prox=0.01",
            "surgical, 20 local epochs, knowledge transfer, positive-class weighting, FedProx 0.01",
            "surgical",
            options={"local_epochs": 20, "distill": 1.0, "balance": True, "prox": 0.01},
        ),
    )
}


def at_sentence_level(method: Method) -> Method:
    """``method`` on sentence bags, named ``sentence+<name>`` (paired with "sentence")."""
    return replace(
        method,
        name=f"sentence+{method.name}",
        description=f"{method.description}, sentence-level",
        granularity="sentence",
    )


#: The same variants at sentence level.
SENTENCE_VARIANTS = {f"sentence+{name}": at_sentence_level(m) for name, m in VARIANTS.items()}
BEST = "epochs=20+distill=1+balance"  #: the combination measured best on whole reports
LIGHT = "epochs=5+distill=1+balance"  #: the same with a quarter of the local epochs
TEMPLATED = f"{LIGHT}+templates"  #: the lighter combination with template sentences
#: ``TEMPLATED``'s options: the product's defaults but FedProx and reading
DEFAULT_OPTIONS = VARIANTS[TEMPLATED].options
#: Leads for a consortium of many sites (issue 47), on top of ``TEMPLATED``, at sentence level;
#: FedProx 0.01 and then reading passed the rule of docs/experiments.md: with both, the product's
#: defaults.
CONSORTIUM = {
    f"sentence+{m.name}": at_sentence_level(m)
    for m in (
        Method(
            "epochs=5+distill=1+balance+templates+prox=0.01",
            "the defaults (5 local epochs, knowledge transfer, positive-class weighting, "
            "templates) + FedProx 0.01",
            "surgical",
            options={**DEFAULT_OPTIONS, "prox": 0.01},
        ),
        Method(
            "epochs=5+distill=1+balance+templates+momentum=0.9",
            "the defaults + server momentum 0.9",
            "surgical",
            options={**DEFAULT_OPTIONS, "server_momentum": 0.9},
        ),
        Method(
            "epochs=5+distill=1+balance+templates+prox=0.01+read",
            "the defaults + FedProx 0.01 + reading: every site also trains the labels it does "
            "not annotate, as the text rules read its own reports (the product's read)",
            "surgical",
            options={**DEFAULT_OPTIONS, "prox": 0.01, "read": True},
        ),
    )
}
#: What might bring ten sites' F1 within two points of central's (issue 73 §4): the product's
#: defaults with more local epochs on the small sites, more rounds, or a larger learning rate,
#: paired with them. A stronger knowledge transfer is no arm: with reading, a site trains every
#: label the rules read as its own, so no label is left for soft targets; a weight of 2 gave runs
#: identical to 1's on 8 seeds.
GAP = {
    f"sentence+{m.name}": at_sentence_level(m)
    for m in (
        Method(
            f"{TEMPLATED}+prox=0.01+read+epochs=10",
            "the product's defaults with 10 local epochs a round instead of 5",
            "surgical",
            options={**DEFAULT_OPTIONS, "prox": 0.01, "read": True, "local_epochs": 10},
        ),
        Method(
            f"{TEMPLATED}+prox=0.01+read+rounds=40",
            "the product's defaults with 40 rounds instead of 20",
            "surgical",
            options={**DEFAULT_OPTIONS, "prox": 0.01, "read": True, "rounds": 40},
        ),
        Method(
            f"{TEMPLATED}+prox=0.01+read+lr=0.002",
            "the product's defaults with the nodes' Adam learning rate doubled (2e-3): more "
            "progress a round, where 40 rounds gained",
            "surgical",
            options={**DEFAULT_OPTIONS, "prox": 0.01, "read": True, "lr": 0.002},
        ),
    )
}
#: the arms of the K sweep: the paper's method and the best combination at both granularities,
#: and the lighter combination, with and without templates, at sentence level
SWEEP = (
    REFERENCE,
    BEST,
    "sentence",
    f"sentence+{LIGHT}",
    f"sentence+{TEMPLATED}",
    f"sentence+{BEST}",
)
#: macro AUROC targets of the cost table (rounds to reach them)
TARGETS = (0.90, 0.95)
#: Published IU results with radiologist labels (a label set different from IU's MeSH-derived
#: one these experiments use): macro F1.
PUBLISHED_F1 = {"fine-tuned OPT-350M": 0.894, "GPT-4o": 0.728}


def _epochs(method: str) -> int:
    """Local epochs per round of a method of this experiment (1: the paper's)."""
    variant = {**VARIANTS, **SENTENCE_VARIANTS, **CONSORTIUM, **GAP}.get(method)
    return int(variant.options.get("local_epochs", 1)) if variant else 1


def first_round(curve: pd.Series, target: float) -> float:
    """The first round whose AUROC reaches ``target`` (NaN if none does)."""
    reached = curve.index[curve.to_numpy() >= target]
    return float(reached[0]) if len(reached) else np.nan


def cost_table(runs: pd.DataFrame, rounds: pd.DataFrame, setting: str) -> str:
    """Per method of ``setting``: wall time of a whole run, site epochs, bytes per round and the
    rounds, site epochs and bytes until the global model's test macro AUROC first reaches each
    of :data:`TARGETS` (median over the seeds that reach it; how many do)."""
    here = runs[(runs["setting"] == setting) & runs["round_megabytes"].notna()]
    curves = rounds[rounds["setting"] == setting]
    head = " | ".join(f"rounds to {t:.2f} (reached) | MB to {t:.2f}" for t in TARGETS)
    lines = [
        f"Cost, setting `{setting}` (wall time: one whole run with 4 seeds training at "
        "once on this machine's 2 cores, divided by 4; MB: float32 weights sent and received by "
        "all sites, before Flower's framing; rounds to a target: the first round the global "
        "model's test macro AUROC reaches it, median over the seeds that reach it):",
        "",
        f"| method | n | seconds per run | site epochs per round | MB per round | {head} |",
        "| --- | ---: | ---: | ---: | ---: |" + " ---: | ---: |" * len(TARGETS),
    ]
    for method, sub in here.groupby("method", sort=False):
        mb = float(sub["round_megabytes"].mean())
        cells = []
        for target in TARGETS:
            reached = [
                first_round(c.set_index("round")["auroc"], target)
                for _, c in curves[curves["method"] == method].groupby("seed")
            ]
            hits = [r for r in reached if not np.isnan(r)]
            if hits:
                median = float(np.median(hits))
                cells.append(f"{median:g} ({len(hits)}/{len(reached)}) | {median * mb:.0f}")
            else:
                cells.append(f"— (0/{len(reached)}) | —")
        lines.append(
            f"| {method} | {len(sub)} | {sub['seconds'].mean():.0f} | {_epochs(str(method))} "
            f"| {mb:.2f} | {' | '.join(cells)} |"
        )
    return "\n".join(lines) + "\n"


def f1_table(labels: pd.DataFrame, setting: str, methods: Sequence[str]) -> str:
    """Per-label leak-free F1 (thresholds from the sites' validation rows) of ``methods`` on
    ``setting``, with the published IU macro F1 beside the macro row."""
    here = labels[(labels["setting"] == setting) & labels["method"].isin(methods)]
    table = here.groupby(["label", "method"])["leakfree_f1"].mean().unstack("method")
    present = [m for m in methods if m in table.columns]
    published = ", ".join(f"{name} {f1:.3f}" for name, f1 in PUBLISHED_F1.items())
    lines = [
        f"Per-label leak-free F1, setting `{setting}` (mean over repeats). Published on IU, macro "
        f"F1: {published}; those use radiologist labels, a different label set from the "
        "MeSH-derived one here, so they are a scale, not a comparison.",
        "",
        f"| label | {' | '.join(present)} |",
        "| --- |" + " ---: |" * len(present),
    ]
    for label, r in table.iterrows():
        lines.append(f"| {label} | " + " | ".join(f"{r[m]:.3f}" for m in present) + " |")
    macro = table[present].mean()
    lines.append("| **macro** | " + " | ".join(f"**{macro[m]:.3f}**" for m in present) + " |")
    return "\n".join(lines) + "\n"


def sweep_plot(summary: pd.DataFrame, path: Path) -> None:
    """Macro AUROC and paper accuracy against K (0 shared labels) of the sweep's arms, one panel
    row per granularity, with central at that granularity as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweep = summary[summary["setting"].str.fullmatch(r"K=\d+")]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True, sharey="col")
    for row, granularity in enumerate(REFERENCES):
        arms = [m for m in SWEEP if m.startswith("sentence") == (granularity == "sentence")]
        central = sweep[sweep["method"] == CENTRALS[granularity]]
        for ax, (metric, title) in zip(
            axes[row],
            (("auroc", "macro AUROC, %"), ("paper_accuracy", "paper accuracy, %")),
            strict=True,
        ):
            for method in arms:
                sub = sweep[sweep["method"] == method].sort_values("x")
                mean, sd = 100 * sub[f"{metric}_mean"], 100 * sub[f"{metric}_sd"]
                line = ax.plot(sub["x"], mean, marker="o", ms=3, label=method)[0]
                ax.fill_between(sub["x"], mean - sd, mean + sd, alpha=0.15, color=line.get_color())
            if len(central):
                level = 100 * central[f"{metric}_mean"].mean()
                ax.axhline(level, ls="--", color="k", lw=1, label=CENTRALS[granularity])
            ax.set_title(f"{granularity} level: {title}", fontsize=10)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="lower left")
    for ax in axes[1]:
        ax.set_xlabel("sites (K), 0 shared labels")
    fig.tight_layout()
    save_png(fig, path)


def curve_plot(rounds: pd.DataFrame, setting: str, path: Path) -> None:
    """The global model's test macro AUROC after each round on ``setting``, mean and SD over
    seeds per method, with the :data:`TARGETS`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    here = rounds[rounds["setting"] == setting]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for method, sub in here.groupby("method", sort=False):
        stats = sub.groupby("round")["auroc"].agg(["mean", "std"])
        line = ax.plot(stats.index, 100 * stats["mean"], label=f"{method} (n={sub.seed.nunique()})")
        ax.fill_between(
            stats.index,
            100 * (stats["mean"] - stats["std"].fillna(0)),
            100 * (stats["mean"] + stats["std"].fillna(0)),
            alpha=0.12,
            color=line[0].get_color(),
        )
    for target in TARGETS:
        ax.axhline(100 * target, ls=":", color="grey", lw=1)
    ax.set_xlabel("round")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("test macro AUROC, %")
    ax.set_title(f"AUROC after each round, {setting}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    save_png(fig, path)


#: the candidates for the product's training defaults: the paper's settings and the
#: combinations, all at sentence level (the product's granularity)
CANDIDATES = ("sentence", f"sentence+{LIGHT}", f"sentence+{TEMPLATED}", f"sentence+{BEST}")
PLATEAU = 0.005  #: a curve has plateaued once it stays within this of its last round's AUROC


def plateau_round(curve: pd.Series) -> int:
    """The first round after which the AUROC stays within :data:`PLATEAU` of the last round's."""
    off = np.flatnonzero(np.abs(curve.to_numpy() - curve.iloc[-1]) > PLATEAU)
    return int(curve.index[off[-1] + 1]) if len(off) else int(curve.index[0])


def defaults_table(summary: pd.DataFrame, rounds: pd.DataFrame) -> str:
    """The candidates for the product's defaults at every K (0 shared labels): macro AUROC and
    paper accuracy (mean over seeds, paired p against the paper's settings), and the round by
    which the mean AUROC curve has plateaued."""
    sweep = summary[summary["setting"].str.fullmatch(r"K=\d+")].sort_values("x")
    ks = list(dict.fromkeys(sweep["setting"]))
    lines = [
        "Candidates for the product's defaults, sentence level, 0 shared labels: macro AUROC % / "
        "paper accuracy % (n seeds; paired p of the AUROC against the paper's settings), and the "
        f"round after which the mean AUROC stays within {100 * PLATEAU:g} points of round 20's:",
        "",
        f"| method | {' | '.join(ks)} | plateau round (worst K) |",
        "| --- |" + " ---: |" * (len(ks) + 1),
    ]
    for method in CANDIDATES:
        cells = []
        for k in ks:
            row = sweep[(sweep["setting"] == k) & (sweep["method"] == method)]
            if row.empty:
                cells.append("—")
                continue
            r = row.iloc[0]
            p = r.get("auroc_p")
            tested = "" if p is None or pd.isna(p) else f"; p={p:.2g}"
            cells.append(
                f"{100 * r['auroc_mean']:.2f} / {100 * r['paper_accuracy_mean']:.2f} "
                f"(n={r['repeats']}{tested})"
            )
        mine = rounds[(rounds["method"] == method) & rounds["setting"].isin(ks)]
        plateaus = [
            plateau_round(c.groupby("round")["auroc"].mean()) for _, c in mine.groupby("setting")
        ]
        worst = str(max(plateaus)) if plateaus else "—"
        lines.append(f"| {method} | {' | '.join(cells)} | {worst} |")
    return "\n".join(lines) + "\n"


#: what the consortium's arms are paired with: ``TEMPLATED`` at sentence level
BASE = f"sentence+{TEMPLATED}"
#: the combination with FedProx's proximal term (the defaults before reading), which the styles
#: experiment trains
FEDPROX = f"{BASE}+prox=0.01"
#: the product's defaults at sentence level
DEFAULTS = f"{FEDPROX}+read"


#: what the consortium experiment measures of each arm (percent)
CONSORTIUM_METRICS = (
    "leakfree_f1", "all_rows_f1", "matched_f1", "matched_all_f1", "f1_ceiling", "auroc",
    "paper_accuracy",
)  # fmt: skip
#: the other ways of choosing thresholds, each tested against the validation rows' best F1
OTHER_THRESHOLDS = ("all_rows_f1", "matched_f1", "matched_all_f1")


@dataclass(frozen=True)
class Arm:
    """One arm of a consortium setting over its seeds: ``mean`` and ``sd`` of each of
    :data:`CONSORTIUM_METRICS` in percent (NaN where the arm's runs lack it), and the paired
    ``p`` of leak-free F1, AUROC and paper accuracy against :data:`BASE` on the same seeds and of
    the F1 at each of :data:`OTHER_THRESHOLDS` against the validation thresholds' on the same
    models (None where there is nothing to test)."""

    n: int
    mean: dict[str, float]
    sd: dict[str, float]
    p: dict[str, float | None]


def consortium_arms(runs: pd.DataFrame, setting: str) -> dict[str, Arm]:
    """The arms of ``setting`` in the order they were run."""
    here = runs[runs["setting"] == setting]
    base = here[here["method"] == BASE].set_index("seed")
    arms = {}
    for method, sub in here.groupby("method", sort=False):
        sub = sub.set_index("seed")
        held = {m for m in CONSORTIUM_METRICS if m in sub and sub[m].notna().any()}
        p: dict[str, float | None] = {
            m: None if method == BASE else paired_p(sub[m], base[m])
            for m in ("leakfree_f1", "auroc", "paper_accuracy")
        }
        p |= {
            m: paired_p(sub[m], sub["leakfree_f1"]) if m in held else None for m in OTHER_THRESHOLDS
        }
        arms[str(method)] = Arm(
            n=len(sub),
            mean={m: 100 * sub[m].mean() if m in held else np.nan for m in CONSORTIUM_METRICS},
            sd={m: 100 * sub[m].std() if m in held else np.nan for m in CONSORTIUM_METRICS},
            p=p,
        )
    return arms


def consortium_table(runs: pd.DataFrame, setting: str) -> str:
    """Per arm of ``setting`` (:func:`consortium_arms`): leak-free F1 with thresholds best on the
    annotated validation rows, best on every annotated row (training rows too), and matching
    each label's prevalence over every site's validation rows or all its rows (the same
    models), its ceiling (thresholds best on the test rows), macro AUROC and paper accuracy,
    percent mean ± SD, with the paired p of F1 and AUROC against :data:`BASE` on the same seeds,
    and of each other threshold's F1 against the validation thresholds' on the same models."""
    lines = [
        f"Against `{BASE}`, setting `{setting}` (`{DEFAULTS}` is the product's defaults; "
        "percent, mean ± SD over the seeds; p: paired t-test against the first on the same "
        "seeds; F1 (validation): thresholds "
        "best for F1 on the validation rows of the sites that annotate the label; F1 (all "
        "rows): best for F1 on every annotated row of those sites, training rows too; F1 "
        "(matched): thresholds at which the share of every site's validation rows called "
        "positive matches the prevalence the annotating sites count; F1 (matched, all rows): "
        "the same over every site's training and validation rows; each on the same models, with "
        "the paired p against F1 (validation); F1 ceiling: thresholds best on the test rows "
        "themselves, which no threshold chosen elsewhere beats; —: not measured in these runs):",
        "",
        "| method | n | F1 (validation) | F1 (all rows) | F1 (matched) | F1 (matched, all rows) "
        "| F1 ceiling | macro AUROC | paper accuracy | p (F1) | p (AUROC) "
        "| p (all rows vs validation) | p (matched vs validation) "
        "| p (matched, all rows vs validation) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |",
    ]
    for method, arm in consortium_arms(runs, setting).items():
        cells = [
            "—" if np.isnan(arm.mean[m]) else f"{arm.mean[m]:.2f} ± {arm.sd[m]:.2f}"
            for m in CONSORTIUM_METRICS
        ]
        ps = [arm.p[m] for m in ("leakfree_f1", "auroc", *OTHER_THRESHOLDS)]
        tests = ["" if p is None else f"{p:.2g}" for p in ps]
        lines.append(f"| {method} | {arm.n} | {' | '.join(cells)} | {' | '.join(tests)} |")
    return "\n".join(lines) + "\n"


#: the threshold rules the gap experiment compares, by their F1 metric: every annotated row
#: first (the product's where no site reads, and the rule the others are tested against), then
#: the validation rows', then those reading the labels a site lacks, the last the product's
#: where sites read (:data:`experiments.baselines.RULES`)
THRESHOLD_RULES = {
    "all_rows_f1": "every annotated row",
    "leakfree_f1": "validation rows",
    "read_rows_f1": "every row, the labels a site lacks as read",
    "read_mean_f1": "each site's rows so read, averaged by positives",
}


def threshold_rules_table(runs: pd.DataFrame, method: str) -> str:
    """Per setting where ``method`` ran with sites that read the labels they lack: its F1 with
    each of :data:`THRESHOLD_RULES` (the same models), percent mean ± SD, and the paired p of
    each rule against every annotated row's on the same models; "" where no such run is
    stored."""
    here = runs[runs["method"] == method]
    if "read_rows_f1" not in here or here["read_rows_f1"].isna().all():
        return ""
    lines = [
        f"`{method}` with each way of choosing thresholds, on the same models (percent, mean ± "
        "SD over the seeds; p: paired t-test against the thresholds best on every row the "
        "sites annotate):",
        "",
        *_rules_header("setting"),
    ]
    for setting, sub in here.groupby("setting", sort=False):
        lines.append(_rules_row(str(setting), sub.set_index("seed")))
    return "\n".join(lines) + "\n"


def _rules_header(first: str, metrics: Sequence[str] = (), tests: Sequence[str] = ()) -> list[str]:
    """A table's header: ``first``, n, F1 with each of :data:`THRESHOLD_RULES`, then ``metrics``,
    the p of each rule against every annotated row's, then ``tests``."""
    rules = list(THRESHOLD_RULES.values())
    columns = [first, "n", *(f"F1, {t}" for t in rules), *metrics]
    columns += [*(f"p ({t})" for t in rules[1:]), *tests]
    return ["| " + " | ".join(columns) + " |", "| --- |" + " ---: |" * (len(columns) - 1)]


def _rules_row(
    name: str, sub: pd.DataFrame, metrics: Sequence[str] = (), tests: Sequence[float | None] = ()
) -> str:
    """The row of ``sub`` (one arm's runs indexed by seed) under :func:`_rules_header`: percent
    mean ± SD of each rule's F1 and of ``metrics`` ("—" where not stored), the p of each rule
    against every annotated row's on the same models, then ``tests``."""
    cells = [
        f"{100 * sub[m].mean():.2f} ± {100 * sub[m].std():.2f}" if m in sub else "—"
        for m in (*THRESHOLD_RULES, *metrics)
    ]
    ps = [paired_p(sub[m], sub["all_rows_f1"]) for m in list(THRESHOLD_RULES)[1:]] + [*tests]
    shown = ["" if p is None else f"{p:.2g}" for p in ps]
    return f"| {name} | {len(sub)} | {' | '.join(cells)} | {' | '.join(shown)} |"


def gap_table(runs: pd.DataFrame, setting: str) -> str:
    """Per arm of ``setting``: its F1 with each of :data:`THRESHOLD_RULES` (the same models),
    percent mean ± SD, its ceiling and macro AUROC, the paired p of each rule against every
    annotated row's on the same models and of that rule's F1 and AUROC against
    :data:`DEFAULTS` on the same seeds; then each arm's gap to central, with central's F1 at the same rule."""
    here = runs[runs["setting"] == setting]
    rules = list(THRESHOLD_RULES.values())
    lines = [
        f"Setting `{setting}`: F1 with thresholds chosen each way, on the same models (percent, "
        "mean ± SD over the seeds; p (rule): paired t-test against the thresholds best on "
        "every row the sites annotate, on the same models; p (vs defaults): the F1 at those "
        "thresholds and AUROC against the defaults' on the same seeds; F1 ceiling: thresholds "
        "best on the test rows):",
        "",
        *_rules_header(
            "method", ("F1 ceiling", "macro AUROC"), ("p (F1 vs defaults)", "p (AUROC vs defaults)")
        ),
    ]
    defaults = here[here["method"] == DEFAULTS].set_index("seed")
    arms = {str(m): sub.set_index("seed") for m, sub in here.groupby("method", sort=False)}
    for method, sub in arms.items():
        against = [
            None if method == DEFAULTS or not len(defaults) else paired_p(sub[m], defaults[m])
            for m in ("all_rows_f1", "auroc")
        ]
        lines.append(_rules_row(method, sub, ("f1_ceiling", "auroc"), against))
    central = arms.get("central-sentence")
    if central is not None:
        lines += ["", "Each arm's F1 below central's at the same rule, points:", ""]
        lines += ["| method | " + " | ".join(rules) + " |", "| --- |" + " ---: |" * len(rules)]
        for method, sub in arms.items():
            if method != "central-sentence":
                gaps = [f"{100 * (central[m].mean() - sub[m].mean()):.2f}" for m in THRESHOLD_RULES]
                lines.append(f"| {method} | {' | '.join(gaps)} |")
    return "\n".join(lines) + "\n"
