"""``reportfed corpus`` (a reports + labels table from a corpus) and ``reportfed embed`` (fill the
embedding cache)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from reportfed.cli.options import (
    add_embedder_options,
    add_granularity,
    add_text_column,
    check_outputs,
    label_counts,
    names,
    say,
)
from reportfed.core.errors import ReportfedError
from reportfed.core.files import atomic_write, table_data
from reportfed.core.labels import CHEXPERT_14


def cmd_corpus(args: argparse.Namespace) -> None:
    from reportfed.data.iu import load_iu_frame
    from reportfed.data.table import CORPUS_COLUMNS

    labels = list(CHEXPERT_14)
    if args.labels:
        from reportfed.core.labels import LabelSpace

        labels = list(LabelSpace.of(names(args.labels)))
        unknown = [n for n in labels if n not in CHEXPERT_14]
        if unknown:
            raise ReportfedError(f"IU has no {unknown} labels; it has {list(CHEXPERT_14)}")
    archive = [("--archive", Path(args.archive))] if args.archive else []
    check_outputs([], tables=[("--out", Path(args.out))], inputs=archive)
    frame = load_iu_frame(args.archive, granuloma_as_lesion=args.granuloma_as_lesion)
    frame = frame[frame["text"] != ""]
    indexed = frame[list(CHEXPERT_14)].notna().any(axis=1)
    unindexed = int((~indexed).sum())  # MeSH "No Indexing": no label, not "every label 0"
    frame = frame[indexed]
    if args.sample is not None:
        if not 1 <= args.sample <= len(frame):
            raise ReportfedError(f"--sample must be in [1, {len(frame)}], got {args.sample}")
        frame = frame.sample(n=args.sample, random_state=args.seed).sort_index()
    context = frame[list(CORPUS_COLUMNS)].assign(mesh_major=frame["mesh_major"].map("; ".join))
    out = pd.concat(
        [pd.DataFrame({"id": frame["uid"], "Reports": frame["text"]}), context, frame[labels]],
        axis=1,
    )
    atomic_write(args.out, table_data(out, args.out))
    say(
        f"wrote {len(out)} IU reports to {args.out} (left out the {unindexed} that IU never "
        "indexed, MeSH 'No Indexing': they have no labels)\n"
        + label_counts(labels, out[labels].to_numpy(float))
    )


def cmd_embed(args: argparse.Namespace) -> None:
    from tqdm.auto import tqdm

    from reportfed.data.table import count_reports, iter_reports
    from reportfed.embed import make_embedder
    from reportfed.embed.granularity import embed_reports

    usable, skipped = count_reports(args.reports, text_column=args.text_column)
    embedder = make_embedder(args.embedder, base_url=args.base_url)
    counts = {"new": 0, "cached": 0}
    start = time.perf_counter()
    with tqdm(total=usable, desc="reports", unit="report", leave=False) as bar:
        for chunk in iter_reports(args.reports, text_column=args.text_column):
            found: dict[str, int] = {}
            embed_reports(
                chunk.texts,
                embedder,
                granularity=args.granularity,
                cache_dir=args.cache_dir,
                counts=found,
            )
            counts = {k: counts[k] + found[k] for k in counts}
            bar.update(len(chunk))
    secs = time.perf_counter() - start
    unit = "sentences" if args.granularity == "sentence" else "reports"
    rate = f"{counts['new'] / secs:.1f} {unit}/s" if counts["new"] else "nothing new to embed"
    say(
        f"{usable} reports -> {embedder.dim}-dim embeddings with {embedder.fingerprint} in "
        f"{secs:.2f} s: {counts['new']} distinct {unit} embedded ({rate}), {counts['cached']} "
        f"from the cache {args.cache_dir}"
        + (f"; skipped {skipped} empty or wordless reports" if skipped else "")
    )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``corpus`` and ``embed`` to the ``reportfed`` parser."""
    p = sub.add_parser("corpus", help="build a reports + labels table from a corpus")
    p.add_argument("name", choices=["iu"], help="the corpus: iu, the IU chest X-ray reports")
    p.add_argument("--out", required=True, help="output CSV or Parquet")
    p.add_argument("--archive", default=None, help="path to NLMCXR_reports.tgz (else resolved)")
    p.add_argument(
        "--granuloma-as-lesion", action="store_true", help="count granulomas as Lung Lesion"
    )
    p.add_argument(
        "--sample",
        type=int,
        default=None,
        help="keep N reports drawn at random, a small site (default: every report)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of --sample")
    p.add_argument(
        "--labels",
        default=None,
        help="comma-separated label columns to keep (default: the 14 CheXpert labels)",
    )
    p.set_defaults(func=cmd_corpus)

    p = sub.add_parser("embed", help="embed a reports table into the cache, print throughput")
    p.add_argument(
        "--reports", required=True, help="CSV/Parquet with a text column, or headerless CSV"
    )
    add_granularity(p)
    add_text_column(p)
    add_embedder_options(p)
    p.set_defaults(func=cmd_embed)
