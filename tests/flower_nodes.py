"""Node tables for the Flower tests: disjoint IU reports, different label sets per node (node c
names its findings in the NIH vocabulary), written as the CSVs a hospital would hold."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reportfed.core.aggregation import GlobalState
from reportfed.core.config import FederationConfig, Granularity, NodeSettings, RunSettings
from reportfed.core.labels import canonical
from reportfed.data.iu import load_iu
from reportfed.flower.launch import APP_DIR
from reportfed.reports.engine import run_federation
from reportfed.reports.site import load_report_node
from reportfed.text.lexicon import Lexicon

NODE_LABELS = {
    "a": ["Cardiomegaly", "Pleural Effusion", "Atelectasis"],
    "b": ["Cardiomegaly", "Lung Opacity", "Edema"],
    "c": ["Effusion", "Pneumothorax", "Support Devices"],  # NIH spelling of Pleural Effusion
}
CONFIG = FederationConfig(rounds=3, hidden=(32, 16), seed=0)  #: what the Flower runs match
UNION = [
    "Cardiomegaly", "Lung Opacity", "Edema", "Atelectasis", "Pneumothorax", "Pleural Effusion",
    "Support Devices",
]  # fmt: skip


def write_node_tables(
    out: Path, rows: int = 150, labels: dict[str, list[str]] = NODE_LABELS
) -> dict[str, Path]:
    """One CSV per node (``Report Impression`` + its label columns) from disjoint IU rows."""
    table = load_iu().fully_annotated()
    order = np.random.default_rng(0).permutation(len(table))
    paths = {}
    for k, (name, names) in enumerate(labels.items()):
        sub = table.subset(order[k * rows : (k + 1) * rows])
        frame = pd.DataFrame({"Report Impression": sub.texts})
        for label in names:
            frame[label] = sub.labels[:, sub.label_space.index(canonical(label))]
        paths[name] = out / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    return paths


def write_findings_site(out: Path, findings: Path, archive: Path | None = None) -> Path:
    """A site of 200 IU reports labelled with the text rules in the findings ``findings``
    defines (hedged: -1), 60 of them stating one where IU has that many: the documented way a
    hospital starts labelling a finding of its own."""
    from reportfed.text.findings import read_findings
    from reportfed.text.states import read_labels

    found = read_findings(findings)
    iu = load_iu(archive) if archive is not None else load_iu()
    read = read_labels(iu.texts, list(found.names), Lexicon(found))
    stated = np.flatnonzero((read == 1).any(axis=1))[:60]
    rest = [i for i in range(len(iu)) if i not in set(stated)][: 200 - len(stated)]
    rows = sorted([*stated.tolist(), *rest])
    site = pd.DataFrame({"Reports": [iu.texts[i] for i in rows]})
    for c, name in enumerate(found.names):
        site[name] = np.nan_to_num(read[rows, c], nan=-1.0)
    site.to_csv(out, index=False)
    return out


def run_config(**overrides: Any) -> dict[str, Any]:
    """The app's run config (``app/pyproject.toml``, its tables flattened as Flower does) with
    ``overrides``: a run setting by its key, a hyperparameter by its key in the run's modality
    table (``rounds=3`` sets ``reports.rounds``, ``modality="images"`` reads ``images.*``)."""
    from flwr.common.config import flatten_dict

    with open(APP_DIR / "pyproject.toml", "rb") as f:
        config = flatten_dict(tomllib.load(f)["tool"]["flwr"]["app"]["config"])
    table = overrides.get("modality", config["modality"])
    for key, value in overrides.items():
        name = key if key in config else f"{table}.{key}"
        assert name in config, f"the app's run config has no {key!r}"
        config[name] = value
    return config


def engine_state(
    tables: dict[str, Path],
    cache: Path,
    names: str,
    rounds: int,
    granularity: Granularity = "sentence",
    **overrides: Any,
) -> GlobalState:
    """The in-process engine's global state for the nodes ``names`` after ``rounds`` rounds."""
    config = FederationConfig(**{**CONFIG.__dict__, "rounds": rounds, **overrides})
    nodes = [
        load_report_node(
            NodeSettings(data=str(tables[n]), name=n, cache_dir=str(cache)),
            config,
            RunSettings(granularity=granularity),
        ).node
        for n in sorted(names)
    ]
    return run_federation(nodes, config, progress=False).state


def assert_same(a: GlobalState, b: GlobalState, atol: float = 1e-6) -> None:
    """Same labels, and every weight equal within ``atol`` (float tolerance by default)."""
    assert a.labels == b.labels
    for key in a.shared:
        np.testing.assert_allclose(a.shared[key], b.shared[key], atol=atol)
    for key in a.task:
        np.testing.assert_allclose(a.task[key], b.task[key], atol=atol)
