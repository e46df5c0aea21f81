"""``reportfed`` command line: label, train, corpus, embed, experiment, federation.

Every bad input ends in one line ``reportfed: error: ...`` on stderr and exit status 2, with no
partial output file left behind.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reportfed import schema
from reportfed.config import FederationConfig
from reportfed.errors import ReportfedError, ReportfedWarning
from reportfed.io import atomic_write, check_writable, table_data, table_format, write_together
from reportfed.labels import CHEXPERT_13, CHEXPERT_14
from reportfed.model_file import encode_model
from reportfed.sentences import GRANULARITIES, GRANULARITY_HELP


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _names(text: str) -> list[str]:
    """The names of a comma-separated option (blanks dropped)."""
    return [s.strip() for s in text.split(",") if s.strip()]


def _counts(names: Sequence[str], y: np.ndarray) -> str:
    rows = [
        f"  {n:<28}{int(np.nansum(y[:, i])):>6} positive  {int(np.isnan(y[:, i]).sum()):>5} missing"
        for i, n in enumerate(names)
    ]
    return "\n".join(rows)


# -- corpus ----------------------------------------------------------------------------------
def cmd_corpus(args: argparse.Namespace) -> None:
    from reportfed.data.iu import load_iu_frame

    labels = list(CHEXPERT_14)
    if args.labels:
        from reportfed.labels import LabelSpace

        labels = list(LabelSpace.of(_names(args.labels)))
        unknown = [n for n in labels if n not in CHEXPERT_14]
        if unknown:
            raise ReportfedError(f"IU has no {unknown} labels; it has {list(CHEXPERT_14)}")
    _check_outputs([], tables=[("--out", Path(args.out))])
    frame = load_iu_frame(args.archive, granuloma_as_lesion=args.granuloma_as_lesion)
    frame = frame[frame["text"] != ""]
    if args.sample is not None:
        if not 1 <= args.sample <= len(frame):
            raise ReportfedError(f"--sample must be in [1, {len(frame)}], got {args.sample}")
        frame = frame.sample(n=args.sample, random_state=args.seed).sort_index()
    out = pd.DataFrame(
        {
            "id": frame["uid"],
            "Reports": frame["text"],
            "findings": frame["findings"],
            "impression": frame["impression"],
            "mesh_major": frame["mesh_major"].map("; ".join),
        }
    )
    out = pd.concat([out, frame[labels]], axis=1)
    atomic_write(args.out, table_data(out, args.out))
    _say(
        f"wrote {len(out)} IU reports to {args.out}\n"
        + _counts(labels, out[labels].to_numpy(float))
    )


# -- embed -----------------------------------------------------------------------------------
def cmd_embed(args: argparse.Namespace) -> None:
    from reportfed.data.table import read_reports
    from reportfed.embed import make_embedder
    from reportfed.embed.granularity import embed_reports

    table = read_reports(args.reports, text_column=args.text_column)
    embedder = make_embedder(args.embedder, base_url=args.base_url)
    counts: dict[str, int] = {}
    start = time.perf_counter()
    x = embed_reports(
        table.texts,
        embedder,
        granularity=args.granularity,
        cache_dir=args.cache_dir,
        counts=counts,
    )
    secs = time.perf_counter() - start
    unit = "sentences" if args.granularity == "sentence" else "reports"
    rate = f"{counts['new'] / secs:.1f} {unit}/s" if counts["new"] else "nothing new to embed"
    _say(
        f"{len(table)} reports -> {x.shape[-1]}-dim embeddings with {embedder.fingerprint} in "
        f"{secs:.2f} s: {counts['new']} distinct {unit} embedded ({rate}), {counts['cached']} "
        f"from the cache {args.cache_dir}"
        + (
            f"; skipped {table.skipped_empty} empty or wordless reports"
            if table.skipped_empty
            else ""
        )
    )


# -- train -----------------------------------------------------------------------------------
def cmd_train(args: argparse.Namespace) -> None:
    from reportfed.labeler import ReportLabeler

    if bool(args.node) == bool(args.iu):
        raise ReportfedError("give either --node FILE (one per site, repeatable) or --iu")
    _check_outputs([("--out", Path(args.out)), ("--metrics", Path(args.metrics))])
    config = schema.from_args(FederationConfig, args)
    labeler = ReportLabeler(
        args.embedder,
        granularity=args.granularity,
        base_url=args.base_url,
        config=config,
        val_fraction=args.val_fraction,
        cache_dir=args.cache_dir,
    )
    if args.node:
        from reportfed.data.table import read_reports

        custom = _names(args.custom_labels or "")
        tables = [
            read_reports(
                p,
                custom_labels=custom,
                uncertain=args.uncertain,
                blank=args.blank,
                require_labels=True,
            )
            for p in args.node
        ]
        found = {str(c) for t in tables for c in t.label_space}
        missing = [c for c in custom if c not in found]
        if missing:
            raise ReportfedError(f"--custom-labels: no --node table has a column {missing}")
        for p, t in zip(args.node, tables, strict=True):
            annotated = [n for n in t.label_space if n not in t.blank_columns]
            _say(
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
        summary = {"nodes": labeler.provenance_["nodes"]}
    else:
        labeler, summary = _train_iu(labeler, args)
    summary.update(
        {
            "model": str(args.out),
            "labels": list(labeler.classes_),
            "thresholds": [round(float(t), 4) for t in labeler.thresholds_],
        }
    )
    write_together(
        [
            (args.out, encode_model(labeler.model_file())),
            (args.metrics, json.dumps(summary, indent=2).encode()),
        ]
    )
    _say(f"wrote model {args.out} and summary {args.metrics}")


def _train_iu(labeler, args: argparse.Namespace) -> tuple[Any, dict]:
    """Train on IU under the papers' protocol; the trained labeler and the run's summary."""
    from reportfed.data.iu import load_iu
    from reportfed.protocol import Protocol, simulate

    labels = CHEXPERT_14 if args.with_no_finding else CHEXPERT_13
    if args.nodes < 1:
        raise ReportfedError(f"--nodes must be at least 1, got {args.nodes}")
    if not 0 <= args.shared <= len(labels):
        raise ReportfedError(
            f"--shared must be in [0, {len(labels)}] (the labels), got {args.shared}"
        )
    table = load_iu(args.archive).select_labels(list(labels))
    table = table.fully_annotated()
    protocol = Protocol(
        n_nodes=args.nodes,
        n_shared=args.shared,
        val_fraction=args.val_fraction,
        federation=labeler.config,
    )
    x = labeler.embed(table.texts)
    result = simulate(
        x, table.labels, table.label_space, protocol, args.seed, labeler=labeler, fingerprint=None
    )
    labeler = result.labeler
    for name, info in labeler.provenance_["nodes"].items():
        _say(f"{name}: {info['rows']} training reports, labels {info['labels']}")
    _say("test metrics: " + ", ".join(f"{k} {v:.4f}" for k, v in result.metrics.items()))
    return labeler, {
        "protocol": {
            "nodes": args.nodes,
            "shared": args.shared,
            "seed": args.seed,
            "reports": len(table),
        },
        "test_metrics": result.metrics,
        "node_labels": [list(s) for s in result.node_labels],
    }


# -- label -----------------------------------------------------------------------------------
def cmd_label(args: argparse.Namespace) -> None:
    from reportfed.data.table import read_reports
    from reportfed.default_model import load_default_model
    from reportfed.labeler import ReportLabeler

    out = Path(args.out)
    extra = {flag: Path(value) for flag, value in
             (("--probabilities", args.probabilities), ("--evidence", args.evidence)) if value}  # fmt: skip
    paths = [("--out", out), *extra.items()]
    _check_outputs([], tables=paths, inputs=[("--reports", Path(args.reports))])
    table = read_reports(args.reports, text_column=args.text_column)
    if table.skipped_empty:
        _say(
            f"skipped {table.skipped_empty} reports that are empty, missing or without a word "
            "(a number is no report)"
        )
    labeler = (
        ReportLabeler.load(args.model, cache_dir=args.cache_dir)
        if args.model
        else load_default_model(cache_dir=args.cache_dir, say=_say)
    )
    names = list(labeler.classes_)
    clash = [n for n in names if n in ("Reports", table.id_column)]
    if clash:
        raise ReportfedError(f"the model has a label named {clash[0]!r}, an output column name")
    start = time.perf_counter()
    read = labeler.annotate(table.texts, table.ids, evidence="--evidence" in extra)
    ids = {table.id_column: table.ids} if table.id_column else {}

    def frame(values: np.ndarray) -> pd.DataFrame:
        columns = dict(zip(names, values.T, strict=True))
        return pd.DataFrame({**ids, "Reports": table.texts, **columns})

    tables = {"--out": frame(read.states)}
    if "--probabilities" in extra:
        tables["--probabilities"] = frame(read.proba)
    if read.evidence is not None:
        tables["--evidence"] = read.evidence
    written = dict(paths)
    write_together([(written[flag], table_data(t, written[flag])) for flag, t in tables.items()])
    _say(
        f"labelled {len(table)} reports in {time.perf_counter() - start:.2f} s -> {out}"
        " (1 positive, 0 negated, -1 uncertain, blank not mentioned)"
    )


def _check_outputs(
    outputs: list[tuple[str, Path]],
    *,
    tables: Sequence[tuple[str, Path]] = (),
    inputs: Sequence[tuple[str, Path]] = (),
) -> None:
    """Before any work: every output writable, every table's suffix a format it can be written
    in, none of them an input or another output."""
    for _, path in [*outputs, *tables]:
        check_writable(path)
    for flag, path in tables:
        try:
            table_format(path)
        except ReportfedError as exc:
            raise ReportfedError(f"{flag} {exc}") from None
    named = [*inputs, *outputs, *tables]
    for i, (flag, path) in enumerate(named):
        for other, other_path in named[:i]:
            if path.resolve() == other_path.resolve():
                raise ReportfedError(f"{flag} and {other} are the same file: {path}")


# -- parser ----------------------------------------------------------------------------------
def _embedder_args(p: argparse.ArgumentParser, *, choose: bool = True) -> None:
    from reportfed.paths import embeddings_cache_dir

    p.add_argument(
        "--cache-dir", default=str(embeddings_cache_dir()), help="embedding cache directory"
    )
    if not choose:
        return
    p.add_argument(
        "--embedder",
        default="minilm",
        help="minilm (default) | st:PATH_OR_ID | hf:PATH_OR_ID | openai:MODEL",
    )
    p.add_argument("--base-url", default=None, help="base URL of an OpenAI-compatible API")


def add_granularity(p: argparse.ArgumentParser) -> None:
    """Add ``--granularity`` (how reports are embedded; the product's default, sentence) to ``p``."""
    p.add_argument(
        "--granularity",
        choices=GRANULARITIES,
        default="sentence",
        help=GRANULARITY_HELP,
    )


def cmd_experiment(args: argparse.Namespace) -> None:
    from experiments.suite import main as run_experiment

    run_experiment([args.name, *args.args])


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows an option's default, unless it is None or the help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or "default" in text:
            return text
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose help shows each option's default."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The ``reportfed`` argument parser."""
    parser = _Parser(prog="reportfed", description=__doc__.splitlines()[0].replace("``", ""))
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("corpus", help="build a reports + labels table from a corpus")
    p.add_argument("name", choices=["iu"])
    p.add_argument("--out", required=True, help="output CSV or Parquet")
    p.add_argument("--archive", default=None, help="path to NLMCXR_reports.tgz (else resolved)")
    p.add_argument(
        "--granuloma-as-lesion", action="store_true", help="count granulomas as Lung Lesion"
    )
    p.add_argument(
        "--sample", type=int, default=None, help="keep N reports drawn at random (a small site)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of --sample")
    p.add_argument("--labels", default=None, help="comma-separated label columns to keep")
    p.set_defaults(func=cmd_corpus)

    p = sub.add_parser("embed", help="embed a reports table into the cache, print throughput")
    p.add_argument("--reports", required=True)
    add_granularity(p)
    p.add_argument(
        "--text-column",
        default=None,
        help="the report column; None: the first of Reports, Report Impression, REPORT, report, text",
    )
    _embedder_args(p)
    p.set_defaults(func=cmd_embed)

    p = sub.add_parser(
        "train", help="federated training from node tables or a simulated IU partition"
    )
    p.add_argument(
        "--node", action="append", default=[], help="a site's reports table with label columns"
    )
    p.add_argument(
        "--custom-labels",
        default=None,
        help="comma-separated columns to train as labels beyond the CheXpert and NIH-14 names "
        "(two states when labelling: 1 or 0)",
    )
    p.add_argument("--iu", action="store_true", help="simulate sites on the IU corpus")
    p.add_argument("--archive", default=None, help="IU archive path (with --iu)")
    p.add_argument("--nodes", type=int, default=2, help="simulated sites (with --iu)")
    p.add_argument("--shared", type=int, default=0, help="labels every site has (with --iu)")
    p.add_argument(
        "--with-no-finding", action="store_true", help="train No Finding too (with --iu)"
    )
    p.add_argument(
        "--uncertain",
        choices=["zeros", "ones", "ignore"],
        default="zeros",
        help="what a -1 label means for presence (zeros: as in the papers)",
    )
    p.add_argument(
        "--blank",
        choices=["negative", "ignore"],
        default="negative",
        help="what a blank label cell means: negative (not mentioned, the CheXpert labeler's "
        "convention) or ignore (not annotated)",
    )
    add_granularity(p)
    schema.add_flags(p, FederationConfig)
    p.add_argument(
        "--val-fraction",
        type=float,
        default=0.1,
        help="share of each site's rows held out to choose labelling thresholds, in [0, 1)",
    )
    p.add_argument("--out", default="reportfed-model.safetensors", help="the model file written")
    p.add_argument(
        "--metrics", default="reportfed-metrics.json", help="the training summary (JSON) written"
    )
    _embedder_args(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser(
        "label",
        help="label reports: the CheXpert labeler's format (1 positive, 0 negated, -1 uncertain, "
        "blank not mentioned)",
    )
    p.add_argument(
        "--reports", required=True, help="CSV/Parquet with a text column, or headerless CSV"
    )
    p.add_argument(
        "--text-column",
        default=None,
        help="the report column; None: the first of Reports, Report Impression, REPORT, report, text",
    )
    p.add_argument(
        "--model", default=None, help="model file; None: the default IU model, built on first use"
    )
    p.add_argument(
        "--out", default="labeled_reports.csv", help="the labels written (CSV, or .parquet)"
    )
    p.add_argument(
        "--probabilities", default=None, help="also write per-label presence probabilities here"
    )
    p.add_argument(
        "--evidence",
        default=None,
        help="also write why: a row per report and non-blank label (id, label, state, "
        "probability, sentence, cue, source: text | model | rule)",
    )
    _embedder_args(p, choose=False)
    p.set_defaults(func=cmd_label)

    from experiments import EXPERIMENTS

    p = sub.add_parser("experiment", help="run a paper experiment (= python -m experiments)")
    p.add_argument("name", choices=EXPERIMENTS, help="the experiment (see the README)")
    p.add_argument(
        "args", nargs=argparse.REMAINDER, help="[--repeats N] [--quick] [--embedder SPEC]"
    )
    p.set_defaults(func=cmd_experiment)

    from reportfed.federation.flower.commands import add_parser as add_federation_parser

    add_federation_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``reportfed`` console script."""
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():
        default = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], *rest: Any, **kw: Any) -> None:
            if issubclass(category, ReportfedWarning):
                _say(f"reportfed: warning: {message}")
            else:
                default(message, category, *rest, **kw)

        warnings.showwarning = show
        try:
            args.func(args)
        except ReportfedError as exc:
            _say(f"reportfed: error: {exc}")
            return 2
        except KeyboardInterrupt:
            _say("reportfed: interrupted")
            return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
