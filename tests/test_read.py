"""Reading (``FederationConfig.read``): a site also trains the federation's labels it does not
annotate, as the product's text rules read its own reports."""

from pathlib import Path

import numpy as np
import pytest

from reportfed.core.aggregation import GlobalState
from reportfed.core.config import FederationConfig
from reportfed.core.errors import ReportfedError
from reportfed.core.labels import LabelSpace
from reportfed.reports.node import (
    Node,
    Reading,
    ReportAlgorithm,
    initial_state,
    read_lacked,
    with_read,
)
from reportfed.text.states import read_labels
from reportfed.text.templates import template_rows

REPORTS = [
    "Moderate cardiomegaly. Small left pleural effusion.",
    "No pleural effusion. Heart size is normal.",
    "Possible small right effusion.",
    "Lungs are clear.",
]


def test_what_the_rules_read_affirmed_one_negated_or_unsaid_zero_hedged_not_annotated() -> None:
    read = read_labels(REPORTS, ["Pleural Effusion", "Cardiomegaly", "Pneumothorax"])
    np.testing.assert_array_equal(read[:, 0], [1, 0, np.nan, 0])
    np.testing.assert_array_equal(read[:, 1], [1, 0, 0, 0])
    assert not read[:, 2].any()


def test_a_node_reads_the_federations_labels_it_lacks_with_their_template_rows(minilm) -> None:  # type: ignore[no-untyped-def]
    from reportfed.embed.granularity import embed_reports

    def embed(texts):  # type: ignore[no-untyped-def]
        return embed_reports(texts, minilm, granularity="sentence", cache_dir=None, progress=False)

    own = LabelSpace.of(["Cardiomegaly"])
    node = Node("a", embed(REPORTS), np.array([[1], [0], [0], [0]], np.float32), own)
    reading = read_lacked(REPORTS, own, embed)
    assert "Cardiomegaly" not in reading.columns and "Pleural Effusion" in reading.columns
    federation = LabelSpace.of(
        ["Cardiomegaly", "Pleural Effusion", "Edema", "Custom finding"], allow_unknown=True
    )
    out = with_read(Node(**{**node.__dict__, "read": reading}), federation)
    # its own label first; the federation's others it can read; a label no rule names stays out
    assert out.labels.names == ("Cardiomegaly", "Pleural Effusion", "Edema")
    np.testing.assert_array_equal(out.y[:4], [[1, 1, 0], [0, 0, 0], [0, np.nan, 0], [0, 0, 0]])
    # then the template rows of the labels read, each naming one finding
    texts, rows = template_rows(out.labels, LabelSpace.of(["Pleural Effusion", "Edema"]))
    assert out.templates == len(texts) == len(out.x) - 4 and out.reports == 4
    np.testing.assert_array_equal(out.y[4:], rows)
    np.testing.assert_allclose(out.x[4:, 0], embed(texts)[:, 0], atol=1e-6)
    assert "Pleural Effusion" not in out.read.columns and "Pneumothorax" in out.read.columns
    assert with_read(out, federation) is out  # nothing left to read in this federation


def test_a_reading_node_sends_the_rows_of_the_labels_it_reads_and_judges_only_its_own() -> None:
    rng = np.random.default_rng(0)
    own = LabelSpace.of(["Cardiomegaly"])
    x = rng.normal(size=(40, 8)).astype(np.float32)
    y = (rng.random((40, 1)) < 0.3).astype(np.float32)
    read = {"Edema": (rng.random(40) < 0.2).astype(np.float32)}
    config = FederationConfig(rounds=1, hidden=(8,), local_epochs=1, read=True, templates=False)
    node = Node("a", x, y, own, read=Reading(read))
    algorithm = ReportAlgorithm(node, config, val_x=x[:10], val_y=y[:10])
    state = initial_state(8, LabelSpace.of(["Cardiomegaly", "Edema", "Atelectasis"]), config)
    update, _ = algorithm.train(state, 1, 0)
    assert list(update.labels) == ["Cardiomegaly", "Edema"]
    assert update.task["weight"].shape[0] == 2
    assert algorithm.describe().labels == own  # it registers what it annotates
    # it judges its own label alone (no held-out row of Edema), and sends Edema's threshold,
    # best F1 on its reports as read, with the positives it rests on
    found = algorithm.evaluate(GlobalState(state.labels, update.shared, state.task))
    assert found.labels == ["Cardiomegaly", "Edema"] and np.isnan(found.y[:, 1]).all()
    assert not np.isnan(found.y[:, 0]).any() and found.weights is not None
    assert found.weights[1] == read["Edema"].sum() and found.thresholds is not None
    with pytest.raises(ReportfedError, match="column over its 40 reports"):
        Node("b", x, y, own, read=Reading({"Edema": np.zeros(3, np.float32)}))


def test_a_labeler_reads_at_fit_and_without_the_texts_refuses_only_where_a_site_lacks_a_label() -> (
    None
):
    from reportfed.core.errors import ConfigError
    from reportfed.labeler import ReportLabeler

    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 2, 384)).astype(np.float32)
    y = np.full((8, 2), np.nan, dtype=np.float32)
    y[:4, 0] = [1, 0, 0, 0]  # site a annotates Cardiomegaly, site b Pleural Effusion
    y[4:, 1] = [1, 0, 0, 0]
    sites = ["a"] * 4 + ["b"] * 4
    labels = LabelSpace.of(["Cardiomegaly", "Pleural Effusion"])
    config = FederationConfig(rounds=1, hidden=(8,), templates=False)
    labeler = ReportLabeler(config=config, val_fraction=0.0, progress=False)
    with pytest.raises(
        ConfigError, match=r"node 'a' lacks labels .* pass texts=, or set read=False"
    ):
        labeler.fit_embeddings(x, y, labels, sites, fingerprint="precomputed")
    labeler.fit_embeddings(x, y, labels, sites, fingerprint="precomputed", texts=REPORTS * 2)
    nodes = labeler.provenance_["nodes"]
    assert nodes["a"] == {"rows": 4, "labels": ["Cardiomegaly"], "read": ["Pleural Effusion"]}
    assert nodes["b"] == {"rows": 4, "labels": ["Pleural Effusion"], "read": ["Cardiomegaly"]}
    alone = ReportLabeler(config=config, val_fraction=0.0, progress=False)  # nothing to read
    alone.fit_embeddings(x, np.nan_to_num(y), labels, sites, fingerprint="precomputed")
    assert "read" not in alone.provenance_["nodes"]["a"]


def test_the_committed_reading_of_iu_against_mesh_is_what_the_rules_read_today(
    iu_archive: Path,
) -> None:
    """docs/experiments.md renders the rules' reading of IU against its MeSH labels from a
    committed file (``benchmarks/reading_mesh.py``): a rule that reads differently makes it
    stale, and this fails until the benchmark is run again."""
    import json

    from benchmarks.reading_mesh import measure

    from .conftest import ROOT

    committed = json.loads((ROOT / "benchmarks" / "results" / "reading_mesh.json").read_text())
    assert measure() == committed
