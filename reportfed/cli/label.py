"""``reportfed label``: reports in, the CheXpert labeler's four states out (and, on request,
presence probabilities and the evidence behind every state)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from reportfed.cli.options import (
    add_embedder_options,
    add_report_columns,
    check_outputs,
    say,
    warn,
)
from reportfed.core.errors import ReportfedError
from reportfed.core.files import StagedTables
from reportfed.pages.review import REVIEW_LIMIT, ReviewPage
from reportfed.text.model_file import beyond_lexicon

if TYPE_CHECKING:
    from reportfed.data.table import ReportTable
    from reportfed.text.findings import Findings


def cmd_label(args: argparse.Namespace) -> None:
    from tqdm.auto import tqdm

    from reportfed.data.table import count_reports, iter_reports
    from reportfed.default_model import load_default_reader
    from reportfed.reader import ReportReader

    hf_out = args.format == "hf"
    out = Path(args.out or ("labeled_reports" if hf_out else "labeled_reports.csv"))
    dataset = _DatasetOut(args, out) if hf_out else None
    extra = {flag: Path(value) for flag, value in
             (("--probabilities", args.probabilities), ("--evidence", args.evidence)) if value}  # fmt: skip
    paths = [*([] if dataset else [("--out", out)]), *extra.items()]
    review = [("--review", Path(args.review))] if args.review else []
    inputs = [("--reports", Path(args.reports))]
    inputs += [("--findings", Path(args.findings))] if args.findings else []
    inputs += [("--out", out)] if dataset else []
    check_outputs(review, tables=paths, inputs=inputs)
    parts = dataset.splits if dataset else [args.split]
    usable = skipped = 0
    for part in parts:
        counted = count_reports(args.reports, text_column=args.text_column, split=part)
        usable, skipped = usable + counted[0], skipped + counted[1]
    if skipped:
        say(
            f"skipped {skipped} reports that are empty, missing or without a word "
            "(a number is no report)"
        )
    numerics = {"cache_dir": args.cache_dir, "backend": args.backend, "precision": args.precision}
    labeler = (
        ReportReader.load(args.model, **numerics) if args.model else load_default_reader(**numerics)
    )
    if args.findings:
        _check_findings(args.findings, labeler.findings_)
    for line in beyond_lexicon(labeler.provenance_):
        say(f"the model reads {line}")
    names = list(labeler.classes_)
    if dataset:
        dataset.check(names)
    written = dict(paths)
    page = ReviewPage(names) if args.review else None
    start = time.perf_counter()
    unread, unreadable = 0, list[str]()  # how many reports cannot be read; the first ten ids
    mixed, mixed_shown = 0, list[str]()  # reports read but for sentences in another language
    done, id_hashes = 0, []  # reports labelled; a 64-bit hash of each id, to find duplicates
    text = not args.no_text  # the report text copied into --out and --probabilities
    chunks = (
        (part, chunk)
        for part in parts
        for chunk in iter_reports(args.reports, text_column=args.text_column, split=part)
    )
    with (
        StagedTables(list(written.values())) as staged,
        tqdm(total=usable, desc="labelling", unit="report", leave=False) as bar,
    ):
        for part, chunk in chunks:
            clash = [n for n in names if n in ("Reports", chunk.id_column)]
            if clash:
                raise ReportfedError(
                    f"the model has a label named {clash[0]!r}, an output column name"
                )
            first = done + 1  # the chunk's first report's row in the outputs
            read = labeler.annotate(
                chunk.texts,
                chunk.ids,
                evidence="--evidence" in extra or page is not None,
                first_row=first,
            )
            done += len(chunk)
            if chunk.id_column:
                id_hashes.append(np.fromiter(map(hash, chunk.ids), np.int64, len(chunk)))
            if dataset:
                dataset.add(part, chunk, read.states)
            else:
                staged.append(written["--out"], _table(chunk, names, read.states, text))
            if "--probabilities" in extra:
                staged.append(written["--probabilities"], _table(chunk, names, read.proba, text))
            if "--evidence" in extra and read.evidence is not None:
                staged.append(written["--evidence"], read.evidence)
            if page is not None and read.evidence is not None:
                page.add(chunk.ids, chunk.texts, read.evidence, first)
            unread += len(read.unreadable)
            unreadable += [chunk.ids[i] for i in read.unreadable][: 10 - len(unreadable)]
            mixed += len(read.other_language)
            mixed_shown += [f"{chunk.ids[i]}: {s!r}" for i, s in read.other_language][
                : 3 - len(mixed_shown)
            ]
            bar.update(len(chunk))
        if page is not None:  # inside: a page that cannot be written leaves no table either
            page.write(args.review)
        if dataset:  # last inside: a dataset that cannot be written leaves no table either
            dataset.write(out)
    shared = _shared_ids(id_hashes)
    if shared:
        warn(
            f"{shared} report(s) share their id with another report; "
            "the evidence's row column (the report's place in the output) tells them apart"
        )
    if mixed:
        shown = "; ".join(mixed_shown) + ("; ..." if mixed > len(mixed_shown) else "")
        warn(
            f"{mixed} report(s) hold sentences in another language than "
            f"English, which the labeler does not read; their English sentences are labelled "
            f"({shown})"
        )
    if unread:
        shown = ", ".join(unreadable) + (", ..." if unread > len(unreadable) else "")
        warn(
            f"{unread} report(s) say nothing the labeler can read "
            f"(only section headers, or not English), so they have no state (ids {shown})"
        )
    kind = f" (a Hugging Face dataset{dataset.said()})" if dataset else ""
    say(
        f"labelled {usable} reports in {time.perf_counter() - start:.2f} s -> {out}{kind}"
        " (1 positive, 0 negated, -1 uncertain, blank not mentioned)"
    )
    if page is not None:
        say(f"review page: {args.review} ({len(page.reports):,} reports; open it in a browser)")


class _DatasetOut:
    """``--format hf``: the input dataset's rows, every column kept, with a label column per
    finding (``--prefix`` before its name), saved with ``save_to_disk``; every split of a
    ``DatasetDict`` unless ``--split`` names one."""

    def __init__(self, args: argparse.Namespace, out: Path) -> None:
        from reportfed.data import hf

        if not hf.is_dataset(args.reports):
            raise ReportfedError(
                "--format hf writes the input dataset's rows with label columns: --reports must "
                "name a Hugging Face dataset (a save_to_disk folder, a folder of Arrow or Parquet "
                "shards, hf://datasets/OWNER/NAME); a table's labels go to --out FILE"
            )
        if args.no_text:
            raise ReportfedError("--no-text is for tables; --format hf keeps the input's columns")
        source, target = Path(args.reports).resolve(), out.resolve()
        if source.is_relative_to(target) or target.is_relative_to(source):
            raise ReportfedError(f"--out {out} would write over or inside --reports")
        hf.check_dataset_folder(out)
        loaded = hf.load(args.reports)
        self.prefix: str = args.prefix
        self.splits = [args.split] if args.split is not None else hf.splits(loaded)
        self.parts = {s: hf.choose_split(loaded, args.reports, s) for s in self.splits}
        #: each split's states, a row per row (NaN: not mentioned, or a report skipped)
        self.states: dict[str | None, np.ndarray] = {}

    def check(self, names: list[str]) -> None:
        """Before labelling: no column of the dataset is one the labels would take."""
        from reportfed.data import hf

        self.names = [self.prefix + n for n in names]
        for part in self.parts.values():
            hf.check_columns_free(part, self.names)
        self.states = {s: np.full((len(p), len(names)), np.nan, np.float32)
                       for s, p in self.parts.items()}  # fmt: skip

    def add(self, split: str | None, chunk: ReportTable, states: np.ndarray) -> None:
        """A chunk of ``split``'s reports labelled: its states into their rows."""
        self.states[split][list(chunk.positions)] = states

    def write(self, out: Path) -> None:
        from datasets import DatasetDict

        from reportfed.data import hf

        labelled = {s: hf.with_states(p, self.names, self.states[s]) for s, p in self.parts.items()}
        hf.save_dataset(labelled[None] if None in labelled else DatasetDict(labelled), out)

    def said(self) -> str:
        return f", splits {', '.join(map(str, self.parts))}" if None not in self.parts else ""


class _HelpWithModel(argparse.Action):
    """``--help``: the options, then the model's provenance (:func:`model_provenance`); a model
    that cannot be read ends in one error line."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, argparse.SUPPRESS, nargs=0, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        parser.print_help()
        try:
            said = model_provenance(getattr(namespace, "model", None))
        except ReportfedError as exc:
            parser.exit(2, f"reportfed: error: {exc}\n")
        print(f"\n{said}")
        parser.exit()


def model_provenance(model: str | None) -> str:
    """How the model file ``model`` (``None``: the default model, where it is built) was trained:
    its labels, embedder, who trained it, and what it reads beyond the lexicon."""
    from reportfed.default_model import default_model_path
    from reportfed.text.model_file import read_model

    path = Path(model) if model else default_model_path()
    if model is None and not path.is_file():
        return "the default model is not built yet: the first `reportfed label` builds it"
    read = read_model(path)
    provenance = read.provenance
    trained = f"  trained by reportfed {provenance.get('reportfed', '?')}"
    if fed := provenance.get("federation"):
        trained += f", round {fed['round']} of a federation of {', '.join(fed['nodes'])}"
    lines = [
        f"model {path}:",
        f"  labels: {', '.join(read.state.labels)}",
        f"  embedder: {read.embedder.get('fingerprint', '?')}, {read.granularity} granularity",
        trained,
    ]
    beyond = beyond_lexicon(provenance)
    lines += [f"  reads {line}" for line in beyond] or ["  reads the lexicon alone"]
    return "\n".join(lines)


def _check_findings(path: str, kept: Findings | None) -> None:
    """``--findings``: the definitions of ``path`` must be those the model was trained with
    (``kept``), which are the ones it labels with."""
    from reportfed.text.findings import read_findings

    asked = read_findings(path)
    if kept is None or set(kept.findings) != set(asked.findings):
        trained = "no finding file" if kept is None else f"those of SHA-256 {kept.checksum}"
        raise ReportfedError(
            f"--findings {path} (SHA-256 {asked.checksum}) defines other findings than the "
            f"model was trained with ({trained}): a model labels with the definitions it was "
            "trained with; train one with this file (reportfed train --findings)"
        )


def _shared_ids(hashes: list[np.ndarray]) -> int:
    """How many reports have an id that an earlier report has (from the ids' 64-bit hashes: 8
    bytes a report, not the ids themselves)."""
    if not hashes:
        return 0
    every = np.concatenate(hashes)
    return len(every) - len(np.unique(every))


def _table(chunk: ReportTable, names: list[str], values: np.ndarray, text: bool) -> pd.DataFrame:
    """One chunk's rows of an output table: its ids (where the input has them; else, without the
    text, each report's ``file_row`` in the input file, the header being row 1, so that every
    output row can be traced back), the reports (with ``text``) and one column per label."""
    ids: dict[str, list[str] | list[int]] = {}
    if chunk.id_column:
        ids[chunk.id_column] = chunk.ids
    elif not text:
        ids["file_row"] = [int(i) for i in chunk.ids]
    reports = {"Reports": chunk.texts} if text else {}
    return pd.DataFrame({**ids, **reports, **dict(zip(names, values.T, strict=True))})


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``label`` to the ``reportfed`` parser."""
    p = sub.add_parser(
        "label",
        help="label reports: the CheXpert labeler's format (1 positive, 0 negated, -1 uncertain, "
        "blank not mentioned)",
        add_help=False,
    )
    p.add_argument(
        "-h",
        "--help",
        action=_HelpWithModel,
        help="show this help and how the model was trained: the one --model names (given before "
        "--help), else the default model where it is built",
    )
    p.add_argument(
        "--reports",
        required=True,
        help="CSV/Parquet with a text column, or headerless CSV; or a Hugging Face dataset: a "
        "save_to_disk folder, a folder of Arrow or Parquet shards, hf://datasets/OWNER/NAME from "
        "the local hub cache (docs/datasets.md)",
    )
    add_report_columns(p)
    p.add_argument(
        "--model",
        default=None,
        help="model file (default: the default IU model, built on first use); what it reads "
        "beyond the lexicon (findings a hospital defined, with their file's SHA-256, and "
        "corrected phrasings) is said before it labels",
    )
    p.add_argument(
        "--out",
        default=None,
        help="the labels written (.csv, .csv.gz, .tsv, .tsv.gz, .parquet, .pq or .xlsx; default "
        "labeled_reports.csv), or with --format hf the dataset's folder (default labeled_reports)",
    )
    p.add_argument(
        "--format",
        choices=("table", "hf"),
        default="table",
        help="table: a table by --out's suffix; hf: a Hugging Face dataset (save_to_disk) of the "
        "input dataset's rows and columns with a label column per finding, every split unless "
        "--split names one",
    )
    p.add_argument(
        "--prefix",
        default="",
        help="--format hf: put each label column under this prefix and the finding's name (for a "
        "dataset that has columns of those names, reference labels say)",
    )
    p.add_argument(
        "--probabilities", default=None, help="also write per-label presence probabilities here"
    )
    p.add_argument(
        "--no-text",
        action="store_true",
        help="leave the report text out of --out and --probabilities (by default they copy it "
        "after the id column, as the CheXpert labeler's output does); an input without an id "
        "column then gets a file_row column: each report's row in the input file (the header is "
        "row 1)",
    )
    p.add_argument(
        "--evidence",
        default=None,
        help="also write why: a row per report and non-blank label (id, row, label, state, "
        "probability, sentence, cue, source: text | correction | model | rule)",
    )
    p.add_argument(
        "--review",
        default=None,
        help="also write a review page here (HTML, self-contained): each report with the "
        "sentences behind its states highlighted, filters by label, state and source "
        f"(the first {REVIEW_LIMIT:,} reports)",
    )
    p.add_argument(
        "--findings",
        default=None,
        help="a findings file (docs/labels.md) the model must have been trained with: a check; "
        "a model always labels with the definitions it keeps",
    )
    add_embedder_options(p, choose=False)
    p.set_defaults(func=cmd_label)
