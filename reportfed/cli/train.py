"""``reportfed train``: federated training in this process, one site per labelled table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reportfed.cli.options import (
    add_embedder_options,
    add_granularity,
    check_outputs,
    names,
    say,
)
from reportfed.core import schema
from reportfed.core.config import FederationConfig, SiteSettings
from reportfed.core.errors import ReportfedError
from reportfed.core.files import write_together
from reportfed.text.model_file import encode_model

if TYPE_CHECKING:
    from reportfed.labeler import ReportLabeler


def cmd_train(args: argparse.Namespace) -> None:
    from reportfed.data.hf import is_dataset
    from reportfed.data.table import read_table
    from reportfed.text.findings import read_findings

    inputs = [("--node", Path(p)) for p in args.node]
    inputs += [("--findings", Path(args.findings))] if args.findings else []
    check_outputs(training_outputs(args), inputs=inputs)
    site = schema.from_args(SiteSettings, args)
    labeler = training_labeler(args, schema.from_args(FederationConfig, args), site.val_fraction)
    custom = names(args.custom_labels or "")
    # its findings are label columns, by their names or aliases, with four states
    defined = read_findings(args.findings).columns() if args.findings else None
    tables = [
        read_table(
            p,
            custom_labels=custom,
            aliases=defined,
            uncertain=site.uncertain,
            blank=site.blank,
            require_labels=True,
            split=args.split if is_dataset(p) else None,
        )
        for p in args.node
    ]
    found = {str(c) for t in tables for c in t.label_space}
    missing = [c for c in custom if c not in found]
    if missing:
        raise ReportfedError(f"--custom-labels: no --node table has a column {missing}")
    for p, t in zip(args.node, tables, strict=True):
        annotated = [n for n in t.label_space if n not in t.blank_columns]
        say(
            f"node {p}: {len(t)} reports, labels {annotated}"
            + (f", skipped {t.skipped_empty} empty or wordless" if t.skipped_empty else "")
            + (
                f"; not annotated on any row (left out): {list(t.blank_columns)}"
                if t.blank_columns
                else ""
            )
            + (
                f"; not label names, ignored: {list(t.ignored_columns)}"
                if t.ignored_columns
                else ""
            )
        )
    labeler.fit_tables(tables)
    held_out = labeler.provenance_.get("held_out", {})
    if held_out:
        say(held_out_table(held_out))
    summary = {"nodes": labeler.provenance_["nodes"], "held_out": held_out}
    save_labeler(labeler, args.out, args.metrics, summary, report=args.report)


def training_outputs(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """The files a training command writes, by the flag that names them."""
    named = [("--out", args.out), ("--metrics", args.metrics), ("--report", args.report)]
    return [(flag, Path(value)) for flag, value in named if value]


def held_out_table(held_out: dict[str, dict[str, Any]]) -> str:
    """The per-label quality on the held-out rows, as lines for the terminal: AUROC, and F1 at
    a threshold chosen on the training rows (the labelling threshold is chosen on every row,
    these among them, and would measure itself), each label's caveat beside it."""
    width = max(len(name) for name in held_out)
    lines = [
        "held-out rows (--val-fraction of each table): AUROC, and F1 at a threshold chosen on "
        "the training rows alone:",
        f"  {'label':<{width}}  rows  positives  AUROC     F1",
    ]
    for name, q in held_out.items():
        auc = "-" if q["auroc"] is None else f"{q['auroc']:.3f}"
        f1 = "-" if q["f1_training_threshold"] is None else f"{q['f1_training_threshold']:.3f}"
        note = f"  ({q['caveat']})" if q.get("caveat") else ""
        lines.append(
            f"  {name:<{width}}  {q['rows']:>4}  {q['positives']:>9}  {auc:>5}  {f1:>5}{note}"
        )
    return "\n".join(lines)


def training_labeler(
    args: argparse.Namespace, config: FederationConfig, val_fraction: float
) -> ReportLabeler:
    """The unfitted labeler the options of :func:`add_training_options` describe."""
    from reportfed.labeler import ReportLabeler

    return ReportLabeler(
        args.embedder,
        granularity=args.granularity,
        base_url=args.base_url,
        config=config,
        val_fraction=val_fraction,
        cache_dir=args.cache_dir,
        backend=args.backend,
        precision=args.precision,
        findings=getattr(args, "findings", None),
    )


def save_labeler(
    labeler: ReportLabeler,
    out: str | Path,
    metrics: str | Path | None,
    summary: dict[str, Any],
    *,
    report: str | Path | None = None,
) -> None:
    """Write a trained labeler's model file and, where asked, its training summary (JSON) and
    the run report page of its rounds (:mod:`reportfed.pages.run_report`), all or none."""
    from reportfed.pages.run_report import in_process, render

    summary = {
        **summary,
        "model": str(out),
        "labels": list(labeler.classes_),
        "thresholds": [round(float(t), 4) for t in labeler.thresholds_],
    }
    files: list[tuple[str | Path, bytes]] = [(out, encode_model(labeler.model_file()))]
    if metrics:
        files.append((metrics, json.dumps(summary, indent=2).encode()))
    if report:
        page = render(labeler.history_, in_process(labeler.provenance_, len(labeler.history_)))
        files.append((report, page.encode()))
    write_together(files)
    also = [f"summary {metrics}"] * bool(metrics) + [f"report {report}"] * bool(report)
    say(f"wrote model {out}" + (f" with {' and '.join(also)}" if also else ""))


def add_training_options(p: argparse.ArgumentParser) -> None:
    """The options of any training command: hyperparameters, granularity, embedder, outputs."""
    add_granularity(p)
    schema.add_flags(p, FederationConfig)
    p.add_argument("--out", default="reportfed-model.safetensors", help="the model file written")
    p.add_argument("--metrics", default=None, help="also write the training summary (JSON) here")
    p.add_argument(
        "--report",
        default=None,
        help="also write the run's report page (HTML: per-label validation AUROC, seconds and "
        "MB per round, which site annotates and which reads each label, the settings)",
    )
    add_embedder_options(p)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``train`` to the ``reportfed`` parser."""
    p = sub.add_parser("train", help="federated training in this process, one site per table")
    p.add_argument(
        "--node",
        action="append",
        required=True,
        help="a site's reports table with label columns, or a Hugging Face dataset with them "
        "(repeatable: one per site)",
    )
    p.add_argument(
        "--split",
        default=None,
        help="the split read of each --node that is a Hugging Face dataset with several",
    )
    p.add_argument(
        "--custom-labels",
        default=None,
        help="comma-separated columns to train as labels beyond the CheXpert and NIH-14 names "
        "(two states when labelling: 1 or 0)",
    )
    p.add_argument(
        "--findings",
        default=None,
        help="a TOML file of findings this hospital defines (docs/labels.md): their columns "
        "train as labels, read by the text rules in four states; the model keeps the file",
    )
    schema.add_flags(p, SiteSettings)
    add_training_options(p)
    p.set_defaults(func=cmd_train)
