"""reportfed's states on real reports with expert labels: NegBio's OpenI gold standard.

NegBio's authors labelled 3,851 IU reports for the 14 NIH findings (``openi_gld_std14.csv``,
beside the project in ``../shared/data/negbio``; public domain). Eight of them map to CheXpert's
(:data:`MAPPED`: Effusion is Pleural Effusion, Mass or Nodule is Lung Lesion). On the reports
``reportfed corpus iu`` returns that the gold standard labels (3,734), per mapped finding: the
precision, recall and F1 of state 1 against the gold's 1, of "1 or -1" (found at all,
hedged or not), and of "1 or a likely hedge" (state 1, or -1 by a hedge that leans to present:
the gold's own convention, :attr:`reportfed.text.assertion.Mention.likely`), with their counts;
and the same on each half of the reports (:func:`half`, a fixed hash of the report's id), since
rules are decided on one half (``A``) and the other (``B``) says whether a change generalizes.
Every cell where state 1 and the gold disagree is sorted by how the state came about
(:func:`sort_disagreements`), and for the default model the Brier score of its calibrated
probabilities against the gold.

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
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from reportfed.core.environment import setting

if TYPE_CHECKING:
    from reportfed.text.assertion import Mention

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
#: a figure resting on fewer reference positives than this (gold or MeSH) says so where it is shown
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


#: how a disagreement of state 1 with the gold came about, by the state and its mention
WHY = {
    "likely": "gold 1, -1 by a hedge that leans to present (X or Y, versus, probable, "
    "borderline): CheXpert's convention writes -1 for every hedge",
    "possible": "gold 1, -1 by any other hedge (may represent, possible, suggestive of, "
    "cannot exclude, vascular congestion)",
    "negated": "gold 1, negated (0)",
    "unmentioned": "gold 1, not mentioned by the text (blank, or 0 by the model)",
    "deidentified": "gold 0, 1 from a sentence with a word removed by de-identification (XXXX)",
    "affirmed": "gold 0, 1 from a sentence that names the finding",
    "model": "gold 0, 1 by the model's score where the text names nothing",
}
READINGS = ("state 1", "1 or -1", "1 or a likely hedge")


def score(
    states: np.ndarray, gold: pd.DataFrame, likely: np.ndarray | None = None
) -> dict[str, Any]:
    """Per mapped finding, each of :data:`READINGS` against the gold's 1 (``states``: a column
    per :data:`MAPPED` finding, in its order; ``likely``: where a -1 leans to present, without
    which the last reading is left out), and their macro F1."""
    out: dict[str, Any] = {"reports": len(gold), "labels": {}}
    readings = READINGS if likely is not None else READINGS[:2]
    for j, label in enumerate(MAPPED):
        truth = gold[label].to_numpy() == 1
        per = {"positives": int(truth.sum())}
        calls = [states[:, j] == 1, np.isin(states[:, j], (1, -1))]
        if likely is not None:
            calls.append((states[:, j] == 1) | ((states[:, j] == -1) & likely[:, j]))
        for name, called in zip(readings, calls, strict=True):
            tp = int((called & truth).sum())
            per[name] = _prf(tp, int((called & ~truth).sum()), int((~called & truth).sum()))
        out["labels"][label] = per
    for name in readings:
        out[f"macro F1 ({name})"] = float(
            np.nanmean([v[name]["f1"] for v in out["labels"].values()])
        )
    return out


def read_states(
    reader: str, texts: list[str]
) -> tuple[np.ndarray, np.ndarray | None, pd.DataFrame | None]:
    """The states of the :data:`MAPPED` findings (a column each) that ``reader`` (``model`` or
    ``rules``) gives ``texts``, and for ``model`` its calibrated probabilities and the evidence
    behind them."""
    labels = list(MAPPED)
    if reader == "rules":
        from reportfed.text.states import rule_states

        return rule_states(texts, labels), None, None
    from reportfed.default_model import load_default_model

    labeler = load_default_model()
    labeler.progress = False
    found = labeler.annotate(texts, evidence=True)
    columns = [list(labeler.classes_).index(c) for c in labels]
    return found.states[:, columns], found.proba[:, columns], found.evidence


def likely_cells(mentions: list[dict[str, Mention | None]]) -> np.ndarray:
    """Per report (``mentions``: :func:`reportfed.text.states.report_mentions` of the
    :data:`MAPPED` findings) and mapped finding, whether its mention is a hedge that leans to
    present (:attr:`reportfed.text.assertion.Mention.likely`)."""
    return np.array(
        [[(m := found[c]) is not None and m.likely for c in MAPPED] for found in mentions]
    )


def sort_disagreements(
    states: np.ndarray, mentions: list[dict[str, Mention | None]], gold: pd.DataFrame
) -> pd.DataFrame:
    """Every cell where state 1 and the gold's 1 disagree: ``uid``, ``half``, ``label``,
    ``gold``, ``state``, ``row`` and ``why`` (a key of :data:`WHY`)."""
    wrong = []
    for j, label in enumerate(MAPPED):
        truth = gold[label].to_numpy() == 1
        for i in np.flatnonzero(truth != (states[:, j] == 1)):
            mention = mentions[i][label]
            if states[i, j] == -1:
                why = "likely" if mention is not None and mention.likely else "possible"
            elif truth[i]:
                negated = mention is not None and mention.assertion == "negated"
                why = "negated" if states[i, j] == 0 and negated else "unmentioned"
            elif mention is None:
                why = "model"
            else:
                why = "deidentified" if "XXXX" in mention.text else "affirmed"
            wrong.append((gold["uid"].iat[i], gold["half"].iat[i], label, int(truth[i]),
                          states[i, j], i, why))  # fmt: skip
    return pd.DataFrame(wrong, columns=["uid", "half", "label", "gold", "state", "row", "why"])


def _counts(details: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Per finding, how many disagreements each :data:`WHY` class holds."""
    return {
        label: {
            why: int(((details["label"] == label) & (details["why"] == why)).sum()) for why in WHY
        }
        for label in MAPPED
    }


def _brier(proba: np.ndarray, gold: pd.DataFrame) -> float:
    """Macro Brier score of ``proba`` against the gold's 1 over the mapped findings."""
    truth = gold[list(MAPPED)].to_numpy() == 1
    return float(np.mean(((proba - truth) ** 2).mean(axis=0)))


def evaluate(reader: str, gold: pd.DataFrame) -> tuple[dict[str, Any], pd.DataFrame]:
    """``reader``'s scores on all of ``gold`` and on each half (with the Brier score of the
    model's probabilities), the disagreements sorted by :data:`WHY`, and the cells where state
    1 and the gold disagree (with the sentence and cue behind the state where known)."""
    states, proba, evidence = read_states(reader, gold["text"].tolist())
    from reportfed.text.states import report_mentions

    mentions = report_mentions(gold["text"].tolist(), list(MAPPED))
    likely = likely_cells(mentions)
    details = sort_disagreements(states, mentions, gold)
    found: dict[str, Any] = {}
    for part in ("all", "A", "B"):
        rows = np.ones(len(gold), bool) if part == "all" else (gold["half"] == part).to_numpy()
        found[part] = score(states[rows], gold[rows], likely[rows])
        found[part]["disagreements"] = _counts(details[rows[details["row"]]])
        if proba is not None:
            found[part]["brier"] = _brier(proba[rows], gold[rows])
    if evidence is not None and len(details):
        why = evidence.assign(row=evidence["id"].astype(int)).set_index(["row", "label"])
        keys = list(zip(details["row"], details["label"], strict=True))
        for column in ("sentence", "cue", "source"):
            details[column] = [why[column].get(k, "") for k in keys]
    details["text"] = gold["text"].to_numpy()[details["row"].to_numpy(int)] if len(details) else []
    return found, details.drop(columns="row")


def _shared_coefficients() -> dict[str, float]:
    """The default model's calibration coefficients that every label shares (the features')."""
    from reportfed.default_model import load_default_model
    from reportfed.text.calibration import FEATURES

    return dict(zip(FEATURES, map(float, load_default_model().calibration_[0]), strict=False))


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
        if reader == "model":
            results["model"]["coefficients"] = _shared_coefficients()
        frames.append(details.assign(reader=reader))
        print(reader, {k: round(v, 3) for k, v in found["all"].items() if k.startswith("macro")})
    atomic_write(args.out, (json.dumps(results, indent=2) + "\n").encode())
    if args.details:
        pd.concat(frames).to_csv(args.details, index=False)


if __name__ == "__main__":
    main()
