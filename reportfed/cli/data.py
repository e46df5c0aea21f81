"""``reportfed corpus`` (a reports + labels table from a corpus) and ``reportfed embed`` (fill the
embedding cache)."""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from reportfed.cli.options import (
    add_embedder_options,
    add_granularity,
    add_report_columns,
    check_outputs,
    label_counts,
    names,
    say,
)
from reportfed.core.errors import ReportfedError
from reportfed.core.files import atomic_write, table_data
from reportfed.core.labels import CHEXPERT_14
from reportfed.data.mimic import LABELERS, SECTIONS, SPLITS
from reportfed.data.partition import TEST_FRACTION, split_rows

if TYPE_CHECKING:
    from reportfed.data.mimic import MimicCounts
    from reportfed.text.findings import Findings


def _corpus_labels(args: argparse.Namespace) -> list[str]:
    """The label columns ``--labels`` keeps (default: the 14 CheXpert labels)."""
    if not args.labels:
        return list(CHEXPERT_14)
    from reportfed.core.labels import LabelSpace

    labels = list(LabelSpace.of(names(args.labels)))
    unknown = [n for n in labels if n not in CHEXPERT_14]
    if unknown:
        raise ReportfedError(f"{args.name} has no {unknown} labels; it has {list(CHEXPERT_14)}")
    return labels


def _findings_input(args: argparse.Namespace) -> list[tuple[str, Path]]:
    return [("--findings", Path(args.findings))] if args.findings else []


def _defined(args: argparse.Namespace) -> Findings | None:
    """The findings ``--findings`` defines, if given."""
    from reportfed.text.findings import read_findings

    return read_findings(args.findings) if args.findings else None


def _read_columns(texts: list[str], findings: Findings | None) -> pd.DataFrame:
    """One column per finding of ``findings`` (none without), its four states as the text rules
    read them in ``texts`` (1 affirmed, 0 negated, -1 uncertain, blank not mentioned)."""
    from reportfed.text.lexicon import Lexicon
    from reportfed.text.states import rule_states

    if findings is None:
        return pd.DataFrame(index=range(len(texts)))
    names = list(findings.names)
    return pd.DataFrame(rule_states(texts, names, Lexicon(findings)), columns=names)


def _tally(states: np.ndarray) -> np.ndarray:
    """Per column of four-state ``states``: how many 1, 0, -1 and blank cells."""
    counts = [(states == s).sum(axis=0) for s in (1.0, 0.0, -1.0)]
    return np.stack([*counts, np.isnan(states).sum(axis=0)], axis=1)


def _tally_lines(names: list[str], tally: np.ndarray) -> str:
    return "\n".join(
        f"  {name:<28}{t[0]:>7} positive {t[1]:>7} negated {t[2]:>7} uncertain {t[3]:>7} blank"
        for name, t in zip(names, tally, strict=True)
    )


def cmd_corpus(args: argparse.Namespace) -> None:
    wrong = {"iu": ("--root", args.root), "mimic": ("--archive", args.archive)}[args.name]
    if wrong[1] is not None:
        raise ReportfedError(f"{wrong[0]} is not an option of corpus {args.name}")
    if args.name == "mimic":
        _corpus_mimic(args)
    else:
        _corpus_iu(args)


def _corpus_iu(args: argparse.Namespace) -> None:
    from reportfed.data.iu import load_iu_frame
    from reportfed.data.table import CORPUS_COLUMNS

    labels = _corpus_labels(args)
    archive = [("--archive", Path(args.archive))] if args.archive else []
    _check_corpus_out(args, archive + _findings_input(args))
    findings = _defined(args)
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
    read = _read_columns(frame["text"].tolist(), findings).set_axis(frame.index)
    out = pd.concat(
        [
            pd.DataFrame({"id": frame["uid"], "Reports": frame["text"]}),
            context,
            frame[labels],
            read,
        ],
        axis=1,
    )
    if args.format == "hf":
        from reportfed.data.hf import SplitWriter

        train, test = split_rows(len(out), TEST_FRACTION, np.random.default_rng(args.seed))
        with SplitWriter(args.out, ["train", "test"], [*labels, *read.columns]) as dataset:
            dataset.append("train", out.iloc[train])
            dataset.append("test", out.iloc[test])
        kind = (
            f" as a Hugging Face dataset ({len(train)} train, {len(test)} test: seed {args.seed})"
        )
    else:
        atomic_write(args.out, table_data(out, args.out))
        kind = ""
    say(
        f"wrote {len(out)} IU reports to {args.out}{kind} (left out the {unindexed} that IU never "
        "indexed, MeSH 'No Indexing': they have no labels)\n"
        + label_counts(labels, out[labels].to_numpy(float))
        + (
            "\nread by the text rules (--findings):\n"
            + _tally_lines(list(read.columns), _tally(read.to_numpy(np.float32)))
            if findings is not None
            else ""
        )
    )


def _corpus_mimic(args: argparse.Namespace) -> None:
    """A site table from a local MIMIC-CXR copy, streamed (:mod:`reportfed.data.mimic`)."""
    from tqdm.auto import tqdm

    from reportfed.data.mimic import STAND_IN, MimicCounts, iter_mimic, stand_in

    if args.root is None:
        raise ReportfedError("corpus mimic needs --root, the folder of a local MIMIC-CXR copy")
    if args.granuloma_as_lesion:
        raise ReportfedError("--granuloma-as-lesion is IU's (its MeSH terms); MIMIC has labels")
    labels = _corpus_labels(args)
    _check_corpus_out(args, [("--root", Path(args.root)), *_findings_input(args)])
    findings = _defined(args)
    columns = [CHEXPERT_14.index(n) for n in labels]
    counts = MimicCounts()
    rows = iter_mimic(
        args.root, labeler=args.labeler, split=args.split, sections=args.sections, counts=counts
    )
    chosen: list[tuple[int, tuple[str, str, np.ndarray]]] = []  # --sample: a reservoir
    rng = np.random.default_rng(args.seed)
    names = [*labels, *(findings.names if findings is not None else ())]
    tally = np.zeros((len(names), 4), dtype=np.int64)  # 1, 0, -1, blank per column
    written = 0

    def frame(batch: list[tuple[str, str, np.ndarray]]) -> pd.DataFrame:
        texts = [r[1] for r in batch]
        states = pd.concat(
            [
                pd.DataFrame(np.stack([row[2][columns] for row in batch]), columns=labels),
                _read_columns(texts, findings),
            ],
            axis=1,
        )
        tally[:] += _tally(states.to_numpy(np.float32))
        out = pd.DataFrame({"id": [r[0] for r in batch], "Reports": texts})
        return pd.concat([out, states], axis=1)

    with _mimic_sink(args, [*labels, *names[len(labels) :]], counts) as sink:
        batch: list[tuple[str, str, np.ndarray]] = []
        for n, row in enumerate(tqdm(rows, desc="reports", unit="report", leave=False)):
            if args.sample is not None:
                if len(chosen) < args.sample:
                    chosen.append((n, row))
                elif (j := int(rng.integers(n + 1))) < args.sample:
                    chosen[j] = (n, row)
                continue
            batch.append(row)
            if len(batch) == 4096:
                written += sink(frame(batch))
                batch = []
        if args.sample is not None:
            if counts.kept < args.sample:
                raise ReportfedError(
                    f"--sample {args.sample}: {args.root} has {counts.kept} reports to draw from"
                )
            batch = [row for _, row in sorted(chosen, key=lambda c: c[0])]
        if not batch and not written:
            raise ReportfedError(counts.why_empty(Path(args.root), args.sections, args.split))
        if batch:
            written += sink(frame(batch))
    left = [
        f"{counts.unlabelled} reports without a label row",
        f"{counts.without_report} labelled studies without a report",
    ]
    if args.split or args.format == "hf":
        left.append(f"{counts.other_split} reports of other splits or none")
    if counts.empty:
        left.append(f"{counts.empty} reports without {args.sections} text")
    if counts.repeated:
        left.append(f"{counts.repeated} reports reached twice (a linked folder or a repeated id)")
    if counts.too_large:
        left.append(f"{counts.too_large} report files over 1 MiB (first: {counts.first_too_large})")
    if counts.unreadable:
        left.append(
            f"{counts.unreadable} unreadable report files (first: {counts.first_unreadable})"
        )
    if stand_in(args.root):
        left.append(f"and it is a stand-in ({STAND_IN}), not MIMIC-CXR")
    say(
        f"wrote {written} MIMIC-CXR reports ({args.labeler} labels, {args.sections} sections"
        + (f", {args.split} split" if args.split else "")
        + f") to {args.out}"
        + (" as a Hugging Face dataset of its official splits" if args.format == "hf" else "")
        + f"; left out: {', '.join(left)}\n"
        + _tally_lines(names, tally)
    )


def _check_corpus_out(args: argparse.Namespace, inputs: list[tuple[str, Path]]) -> None:
    """Before any work: ``--out`` a table to write, or with ``--format hf`` a dataset's folder."""
    out = [("--out", Path(args.out))]
    if args.format == "hf":
        from reportfed.data.hf import check_dataset_folder

        check_dataset_folder(Path(args.out))
        check_outputs([], inputs=inputs + out)
    else:
        check_outputs([], tables=out, inputs=inputs)


@contextlib.contextmanager
def _mimic_sink(
    args: argparse.Namespace, labels: list[str], counts: MimicCounts
) -> Iterator[Callable[[pd.DataFrame], int]]:
    """Where ``corpus mimic``'s rows go, a frame at a time (how many were written, returned):
    the ``--out`` table, or with ``--format hf`` a dataset of the official splits (the split
    file's), each row in its study's (a study the split file lacks is left out, counted in
    ``counts.other_split``)."""
    if args.format != "hf":
        from reportfed.core.files import StagedTables

        with StagedTables([args.out]) as staged:

            def write(frame: pd.DataFrame) -> int:
                staged.append(args.out, frame)
                return len(frame)

            yield write
        return
    from reportfed.data.hf import SplitWriter
    from reportfed.data.mimic import official_splits

    split_of = official_splits(Path(args.root))
    splits = [args.split] if args.split else list(SPLITS)
    with SplitWriter(args.out, splits, labels) as dataset:

        def append(frame: pd.DataFrame) -> int:
            split = frame["id"].map(split_of)
            counts.other_split += int(split.isna().sum())
            for name, rows in frame.groupby(split, sort=False):
                dataset.append(str(name), rows)
            return int(split.notna().sum())

        yield append


def cmd_embed(args: argparse.Namespace) -> None:
    from tqdm.auto import tqdm

    from reportfed.data.table import count_reports, iter_reports
    from reportfed.embed import make_embedder
    from reportfed.embed.granularity import embed_reports

    source = {"text_column": args.text_column, "split": args.split}
    usable, skipped = count_reports(args.reports, **source)
    embedder = make_embedder(
        args.embedder, base_url=args.base_url, backend=args.backend, precision=args.precision
    )
    counts = {"new": 0, "cached": 0}
    start = time.perf_counter()
    with tqdm(total=usable, desc="reports", unit="report", leave=False) as bar:
        for chunk in iter_reports(args.reports, **source):
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
    p.add_argument(
        "name",
        choices=["iu", "mimic"],
        help="the corpus: iu, the IU chest X-ray reports; mimic, a local MIMIC-CXR copy",
    )
    p.add_argument(
        "--out",
        required=True,
        help="output CSV or Parquet, or with --format hf the dataset's folder",
    )
    p.add_argument(
        "--format",
        choices=("table", "hf"),
        default="table",
        help="table: a table by --out's suffix; hf: a Hugging Face DatasetDict (save_to_disk) "
        f"of the official splits: MIMIC-CXR's split file's; IU's train and test, "
        f"{TEST_FRACTION:.0%} of the reports drawn for test by --seed as the experiments draw "
        "a repeat's; labels as float32 columns (1, 0, -1, null blank)",
    )
    p.add_argument("--archive", default=None, help="iu: NLMCXR_reports.tgz (else resolved)")
    p.add_argument(
        "--root",
        default=None,
        help="mimic: the folder holding MIMIC-CXR's files/ tree or mimic-cxr-reports.zip and "
        "MIMIC-CXR-JPG's label and split files (there or up to two folders below)",
    )
    p.add_argument(
        "--labeler",
        choices=LABELERS,
        default="chexpert",
        help="mimic: whose labels, the CheXpert labeler's or NegBio's (default: chexpert)",
    )
    p.add_argument(
        "--split",
        choices=SPLITS,
        default=None,
        help="mimic: keep the studies of one official split (default: all)",
    )
    p.add_argument(
        "--sections",
        choices=SECTIONS,
        default="labelled",
        help="mimic: the text kept: labelled (impression, else findings, else the last "
        "paragraph: what the labels were read from), findings-impression, or the whole report",
    )
    p.add_argument(
        "--granuloma-as-lesion", action="store_true", help="count granulomas as Lung Lesion"
    )
    p.add_argument(
        "--findings",
        default=None,
        help="a TOML file of findings this hospital defines (docs/labels.md): one more column "
        "each, its four states as the text rules read them (1, 0, -1, blank), to train with "
        "reportfed train --findings",
    )
    p.add_argument(
        "--sample",
        type=int,
        default=None,
        help="keep N reports drawn at random, a small site (default: every report)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of --sample and of IU's test split")
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
    add_report_columns(p)
    add_embedder_options(p)
    p.set_defaults(func=cmd_embed)
