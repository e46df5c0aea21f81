"""The report-labeling paper's third experiment: one IU site and one MIMIC-CXR site.

The IU site holds IU's fully annotated reports (MeSH-derived labels), the MIMIC site
``reports`` reports of a local MIMIC-CXR copy (the CheXpert labeler's labels, -1 and blank as
0 as in the papers), drawn once with seed 0 from its official train split, the same for every
repeat. The MIMIC text goes through reportfed's own sentence splitter and section scope, as
``reportfed label`` reads a report (the indication line is context, not a finding). A repeat
splits each site's rows 80/20, keeps each site's test rows in the shared test set, assigns the
13 findings with ``n_shared`` of them at both sites (:func:`~reportfed.data.partition.split_labels`)
and holds out 10% of each site's training rows for the leak-free thresholds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from experiments.baselines import SWEEP_NUMERICS, Scenario
from experiments.protocol import Protocol, site_rows
from experiments.runner import iu_data, iu_read
from reportfed.core.labels import CHEXPERT_13, LabelSpace
from reportfed.core.paths import embeddings_cache_dir
from reportfed.data.mimic import load_mimic
from reportfed.data.partition import split_labels, split_rows
from reportfed.embed import make_embedder
from reportfed.embed.granularity import embed_reports
from reportfed.text.sentences import findings_sentences
from reportfed.text.states import read_labels

#: MIMIC reports drawn for its site by default: as many as IU's fully annotated ones
MIMIC_REPORTS = 3832
#: the papers' test and validation shares, which every experiment's repeat splits by
PROTOCOL = Protocol(n_nodes=2)


@dataclass(frozen=True)
class MimicSite:
    """What the experiment reads: a MIMIC-CXR copy's ``root``, how many of its train reports the
    MIMIC site holds, and how many of IU's the IU site holds (``None``: all of them; fewer make
    a trial or a test quick), each drawn once with seed 0."""

    root: Path
    reports: int = MIMIC_REPORTS
    iu_reports: int | None = None


@dataclass(frozen=True)
class TwoHospitals:
    """Both sites' rows, IU's first: report embeddings, sentence bags, labels over ``labels``,
    what the text rules read, and each row's site (0 IU, 1 MIMIC)."""

    x: np.ndarray
    bags: np.ndarray
    y: np.ndarray
    labels: LabelSpace
    read: np.ndarray
    site: np.ndarray


def _pad(bags: np.ndarray, sentences: int) -> np.ndarray:
    """Sentence bags padded with all-zero rows (no sentence) to ``sentences`` per report."""
    out = np.zeros((len(bags), sentences, bags.shape[2]), dtype=bags.dtype)
    out[:, : bags.shape[1]] = bags
    return out


@cache
def two_hospitals(site: MimicSite) -> TwoHospitals:
    """IU's site and a MIMIC site as ``site`` says (all the reports where there are fewer)."""
    read_iu = iu_read()  # one row per IU report: only the drawn ones are embedded
    iu_rows = np.sort(np.random.default_rng(0).permutation(len(read_iu))[: site.iu_reports])
    drawn = tuple(iu_rows.tolist())
    x_iu, y_iu, labels, _, _ = iu_data("minilm", rows=drawn)
    bags_iu = iu_data("minilm", granularity="sentence", rows=drawn)[0]
    read_iu = read_iu[iu_rows]
    root, reports = site.root, site.reports
    mimic = load_mimic(root, split="train", sections="report").select_labels(list(CHEXPERT_13))
    rows = np.sort(np.random.default_rng(0).permutation(len(mimic))[:reports])
    texts = [" ".join(findings_sentences(mimic.texts[i])) for i in rows]
    y_mimic = mimic.labels[rows][:, mimic.label_space.indices(labels)]
    embedder = make_embedder("minilm", **SWEEP_NUMERICS)
    cache_dir = embeddings_cache_dir()
    x_mimic = embed_reports(texts, embedder, granularity="report", cache_dir=cache_dir)
    bags_mimic = embed_reports(texts, embedder, granularity="sentence", cache_dir=cache_dir)
    longest = max(bags_iu.shape[1], bags_mimic.shape[1])
    return TwoHospitals(
        x=np.concatenate([x_iu, x_mimic]),
        bags=np.concatenate([_pad(bags_iu, longest), _pad(bags_mimic, longest)]),
        y=np.concatenate([y_iu, y_mimic]).astype(np.float32),
        labels=labels,
        read=np.concatenate([read_iu, read_labels(texts, list(labels))]),
        site=np.repeat([0, 1], [len(x_iu), len(x_mimic)]),
    )


def iu_mimic(n_shared: int, site: MimicSite) -> Callable[[int], Scenario]:
    """The repeats of one setting: ``n_shared`` findings at both sites (the module docstring)."""

    def build(seed: int) -> Scenario:
        data = two_hospitals(site)
        rng = np.random.default_rng(seed)
        train, test = [], []
        for k in (0, 1):
            rows = np.flatnonzero(data.site == k)
            kept, held = split_rows(len(rows), PROTOCOL.test_fraction, rng)
            train.append(rows[kept])
            test.append(rows[held])
        fit_rows = np.concatenate(train)
        spaces = split_labels(data.labels, 2, n_shared, rng)
        return Scenario(
            x=data.x,
            y=data.y,
            labels=data.labels,
            sites=site_rows(fit_rows, data.site[fit_rows], spaces, PROTOCOL.val_fraction, seed),
            test=np.concatenate(test),
            seed=seed,
            sentences=data.bags,
            read=data.read,
        )

    return build
