"""reportfed's states on real reports with expert labels: NegBio's OpenI gold standard.

NegBio's authors labelled 3,851 IU reports for the 14 NIH findings (``openi_gld_std14.csv``,
beside the project in ``../shared/data/negbio``; public domain). Eight of them map to CheXpert's
(:data:`MAPPED`: Effusion is Pleural Effusion, Mass or Nodule is Lung Lesion). On the reports
``reportfed corpus iu`` returns that the gold standard labels (3,734), per mapped finding: the
precision, recall and F1 of state 1 against the gold's 1, and of "1 or -1" (found at all,
hedged or not), with their counts; and the same on each half of the reports (:func:`half`, a
fixed hash of the report's id), since rules are decided on one half (``A``) and the other
(``B``) says whether a change generalizes.

Two readers: ``model`` (the default model as ``reportfed label`` runs it: the text rules decide
every finding a sentence names, the model the rest) and ``rules`` (the text rules alone; a
finding no rule names is blank). ``--details FILE`` writes every cell where state 1 and the
gold disagree, with the sentence and cue behind the state, for reading; it holds IU text
(CC BY-NC-ND), so it goes to a file outside the repository, never into it.

    python benchmarks/openi_gold.py [--out benchmarks/results/openi_gold.json] [--details F]
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reportfed.core.environment import setting

#: CheXpert finding -> the NIH findings of the gold standard that mean it
MAPPED: dict[str, tuple[str, ...]] = {
    "Atelectasis": ("Atelectasis",),
    "Cardiomegaly": ("Cardiomegaly",),
    "Pleural Effusion": ("Pleural Effusion",),
    "Pneumonia": ("Pneumonia",),
    "Pneumothorax": ("Pneumothorax",),
    "Consolidation": ("Consolidation",),
    "Edema": ("Edema",),
    "Lung Lesion": ("Mass", "Nodule"),
}
GOLD_CSV = "negbio/openi_gld_std14.csv"
RESULTS = Path(__file__).resolve().parent / "results" / "openi_gold.json"
#: a figure resting on fewer gold positives than this says so where it is shown
FEW = 30


def half(uid: str) -> str:
    """The half a report belongs to: ``A`` or ``B`` by the first byte of the SHA-256 of its id
    (fixed before any rule was changed; ``A`` is where rules are decided)."""
    return "A" if hashlib.sha256(uid.encode()).digest()[0] % 2 == 0 else "B"


def shared_data() -> Path:
    """``../shared/data`` beside the checkout (``$REPORTFED_SHARED_DATA`` where set)."""
    env = setting("REPORTFED_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


def gold_reports(gold_csv: Path | None = None) -> pd.DataFrame:
    """The reports ``corpus iu`` returns that the gold standard labels: ``uid``, ``text``,
    ``half`` and one 0/1 column per mapped finding."""
    from reportfed.core.labels import CHEXPERT_14
    from reportfed.data.iu import load_iu_frame, load_negbio

    gold = load_negbio(gold_csv or shared_data() / GOLD_CSV)
    frame = load_iu_frame()
    frame = frame[(frame["text"] != "") & frame[list(CHEXPERT_14)].notna().any(axis=1)]
    frame = frame[frame["uid"].isin(gold.index)]
    out = pd.DataFrame({"uid": frame["uid"].to_numpy(), "text": frame["text"].to_numpy()})
    out["half"] = [half(u) for u in out["uid"]]
    rows = gold.loc[out["uid"]]
    for label, nih in MAPPED.items():
        out[label] = (rows[list(nih)].to_numpy() == 1).any(axis=1).astype(int)
    return out


def _prf(tp: int, fp: int, fn: int) -> dict[str, float | int]:
    precision = tp / (tp + fp) if tp + fp else float("nan")
    recall = tp / (tp + fn) if tp + fn else float("nan")
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else float("nan")
    return {"tp": tp, "fp": fp, "fn": fn, "precision": precision, "recall": recall, "f1": f1}


def score(states: np.ndarray, gold: pd.DataFrame) -> dict[str, Any]:
    """Per mapped finding, state 1 and "1 or -1" against the gold's 1 (``states``: a column
    per :data:`MAPPED` finding, in its order), and their macro F1."""
    out: dict[str, Any] = {"reports": len(gold), "labels": {}}
    for j, label in enumerate(MAPPED):
        truth = gold[label].to_numpy() == 1
        per = {"positives": int(truth.sum())}
        for name, called in (
            ("state 1", states[:, j] == 1),
            ("1 or -1", np.isin(states[:, j], (1, -1))),
        ):
            tp = int((called & truth).sum())
            per[name] = _prf(tp, int((called & ~truth).sum()), int((~called & truth).sum()))
        out["labels"][label] = per
    for name in ("state 1", "1 or -1"):
        out[f"macro F1 ({name})"] = float(
            np.nanmean([v[name]["f1"] for v in out["labels"].values()])
        )
    return out


def read_states(reader: str, texts: list[str]) -> tuple[np.ndarray, pd.DataFrame | None]:
    """The states of the :data:`MAPPED` findings (a column each) that ``reader`` (``model`` or
    ``rules``) gives ``texts``, and for ``model`` the evidence behind them."""
    labels = list(MAPPED)
    if reader == "rules":
        from reportfed.text.states import rule_states

        return rule_states(texts, labels), None
    from reportfed.default_model import load_default_model

    labeler = load_default_model()
    labeler.progress = False
    found = labeler.annotate(texts, evidence=True)
    names = list(labeler.classes_)
    return found.states[:, [names.index(c) for c in labels]], found.evidence


def evaluate(reader: str, gold: pd.DataFrame) -> tuple[dict[str, Any], pd.DataFrame]:
    """``reader``'s scores on all of ``gold`` and on each half, and the cells where state 1 and
    the gold disagree (with the sentence and cue behind the state where known)."""
    states, evidence = read_states(reader, gold["text"].tolist())
    found: dict[str, Any] = {"all": score(states, gold)}
    for h in ("A", "B"):
        rows = (gold["half"] == h).to_numpy()
        found[h] = score(states[rows], gold[rows])
    wrong = []
    for j, label in enumerate(MAPPED):
        truth = gold[label].to_numpy() == 1
        called = states[:, j] == 1
        for i in np.flatnonzero(truth != called):
            wrong.append((gold["uid"].iat[i], gold["half"].iat[i], label, int(truth[i]),
                          states[i, j], i))  # fmt: skip
    details = pd.DataFrame(wrong, columns=["uid", "half", "label", "gold", "state", "row"])
    if evidence is not None and len(details):
        why = evidence.assign(row=evidence["id"].astype(int)).set_index(["row", "label"])
        keys = list(zip(details["row"], details["label"], strict=True))
        for column in ("sentence", "cue", "source"):
            details[column] = [why[column].get(k, "") for k in keys]
    details["text"] = gold["text"].to_numpy()[details["row"].to_numpy(int)] if len(details) else []
    return found, details.drop(columns="row")


def main() -> None:
    from machine import machine

    from reportfed.core.files import atomic_write

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--readers", nargs="+", default=["rules", "model"])
    parser.add_argument("--details", default=None, help="CSV of the disagreements (IU text)")
    args = parser.parse_args()
    gold = gold_reports()
    results: dict[str, Any] = {"machine": machine(), "reports": len(gold),
                               "halves": gold["half"].value_counts().to_dict()}  # fmt: skip
    frames = []
    for reader in args.readers:
        found, details = evaluate(reader, gold)
        results[reader] = found
        frames.append(details.assign(reader=reader))
        print(reader, {k: round(v, 3) for k, v in found["all"].items() if k.startswith("macro")})
    atomic_write(args.out, (json.dumps(results, indent=2) + "\n").encode())
    if args.details:
        pd.concat(frames).to_csv(args.details, index=False)


if __name__ == "__main__":
    main()
