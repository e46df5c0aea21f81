"""Template sentences (:mod:`reportfed.text.templates`): what they say, how a node carries them, and
what they teach a head whose reports never state its finding."""

import numpy as np
import pytest

from reportfed.core.config import FederationConfig
from reportfed.core.errors import ConfigError
from reportfed.core.labels import LabelSpace
from reportfed.core.metrics import auroc
from reportfed.labeler import ReportLabeler
from reportfed.reports.node import Node, with_templates
from reportfed.text.templates import template_rows


def test_each_label_is_stated_and_negated_and_no_finding_is_neither() -> None:
    texts, y = template_rows(LabelSpace.of(["No Finding", "Pneumothorax", "Pleural Effusion"]))
    assert texts[:6] == [
        "Pneumothorax.",
        "There is pneumothorax.",
        "Findings consistent with pneumothorax.",
        "No pneumothorax.",
        "No evidence of pneumothorax.",
        "There is no pneumothorax.",
    ]
    assert texts[6] == "Pleural effusion." and len(texts) == 12
    # "There is pneumothorax." rules No Finding out; "No pneumothorax." leaves it open
    np.testing.assert_array_equal(y[:6], [[0, 1, 0]] * 3 + [[np.nan, 0, 0]] * 3)
    np.testing.assert_array_equal(y[6:], [[0, 0, 1]] * 3 + [[np.nan, 0, 0]] * 3)


def test_a_category_reports_do_not_name_is_stated_in_the_phrases_that_mean_it() -> None:
    texts, y = template_rows(LabelSpace.of(["Enlarged Cardiomediastinum"]))
    assert "Enlarged cardiomediastinum." in texts and "No evidence of widened mediastinum." in texts
    assert len(texts) == 3 * 6
    assert y.sum() == 9 and y[texts.index("There is widened mediastinum.")] == 1
    assert not any("other" in t.lower() for t in template_rows(LabelSpace.of(["Pleural Other"]))[0])


def test_template_rows_follow_the_reports_and_are_not_counted_as_reports(minilm) -> None:  # type: ignore[no-untyped-def]
    from reportfed.embed.granularity import embed_reports

    reports = ["Heart size is normal.", "Mild edema. No effusion. Stable mediastinum."]
    bags = embed_reports(reports, minilm, granularity="sentence", cache_dir=None, progress=False)
    node = Node("a", bags, np.array([[0.0], [1.0]], np.float32), LabelSpace.of(["Edema"]))

    def embed(texts):  # type: ignore[no-untyped-def]
        return embed_reports(texts, minilm, granularity="sentence", cache_dir=None, progress=False)

    out = with_templates(node, embed)
    assert out.x.shape == (8, 3, minilm.dim) and (out.reports, out.templates) == (2, 6)
    np.testing.assert_array_equal(out.x[:2], bags)
    assert (out.x[2:, 1:] == 0).all() and (np.abs(out.x[2:, 0]).sum(axis=1) > 0).all()
    np.testing.assert_array_equal(out.y[:, 0], [0, 1, 1, 1, 1, 0, 0, 0])


def test_under_distill_a_template_row_is_a_negative_for_the_labels_its_node_lacks(
    monkeypatch,
) -> None:  # type: ignore[no-untyped-def]
    """A template sentence names one finding and mentions no other: for the federation's labels
    its node does not annotate it is a negative, where a report gets the global model's soft
    target; No Finding, which a negating sentence does not rule out, gets neither."""
    from reportfed.reports import node as report_node
    from reportfed.reports.node import ReportAlgorithm, initial_state

    seen = {}

    def capture(model, x, y, *, soft, **kwargs):  # type: ignore[no-untyped-def]
        seen["y"], seen["soft"] = y.numpy(), soft.numpy()
        return 0.0

    monkeypatch.setattr(report_node, "train_local", capture)
    rng = np.random.default_rng(0)
    node = Node(
        "a",
        rng.normal(size=(5, 8)).astype(np.float32),
        np.ones((5, 1), np.float32),
        LabelSpace.of(["Edema"]),
        templates=2,
    )
    config = FederationConfig(distill=1.0, hidden=(4,))
    labels = LabelSpace.of(["Edema", "Pneumothorax", "Fracture", "No Finding"])
    ReportAlgorithm(node, config).train(initial_state(8, labels, config), 0, 0)
    np.testing.assert_array_equal(seen["y"][:, 0], 1)
    assert np.isnan(seen["y"][:3, 1:]).all() and (seen["y"][3:, 1:3] == 0).all()
    assert np.isnan(seen["y"][3:, 3]).all()
    assert np.isnan(seen["soft"][:, 0]).all() and np.isnan(seen["soft"][3:]).all()
    assert ((seen["soft"][:3, 1:] > 0) & (seen["soft"][:3, 1:] < 1)).all()


@pytest.mark.parametrize(
    ("finding", "floor", "margin"),
    [("Pneumothorax", 0.85, 0.15), ("Enlarged Cardiomediastinum", 0.75, 0.1)],
)
def test_templates_teach_a_finding_no_training_report_states(  # type: ignore[no-untyped-def]
    finding, floor, margin, iu_embedded, embeddings_cache
) -> None:
    """A site whose reports never state the finding (IU reports, positives removed) learns it
    from the template sentences alone: unseen IU reports that state it rank above the rest;
    without templates the head has no positive to learn from. Enlarged Cardiomediastinum is a
    category no IU report names: its sentences come from the phrases that mean it (AUROC 0.80
    with them, 0.68 with sentences built from its name, 0.66 without templates)."""
    table, _ = iu_embedded
    labels = ["Cardiomegaly", finding]
    table = table.select_labels(labels)
    positive = table.labels[:, 1] == 1
    train = np.flatnonzero(~positive)[:400]
    test = np.concatenate([np.flatnonzero(positive), np.flatnonzero(~positive)[400:700]])
    scores = {}
    for templates in (True, False):
        config = FederationConfig(rounds=2, hidden=(64, 32), templates=templates)
        labeler = ReportLabeler(config=config, cache_dir=embeddings_cache, progress=False)
        labeler.fit([table.texts[i] for i in train], table.labels[train], labels)
        p = labeler.predict_scores([table.texts[i] for i in test])
        scores[templates] = auroc(table.labels[test][:, 1:], p[:, 1:])[0]
        assert labeler.provenance_["nodes"]["central"]["rows"] == 360  # reports, 10% held out
    assert scores[True] > floor and scores[True] > scores[False] + margin, scores


def test_embeddings_from_another_embedder_refuse_templates_in_one_line() -> None:
    """Template rows are embedded with the labeler's embedder, so vectors from another one would
    be stacked with them silently wrong: refused, naming the way out."""
    x = np.zeros((4, 2, 384), np.float32)
    y = np.array([[0.0], [1.0], [0.0], [1.0]])
    labeler = ReportLabeler(config=FederationConfig(rounds=1), progress=False)
    with pytest.raises(
        ConfigError, match=r"x comes from openai:.*set the config's templates=False"
    ):
        labeler.fit_embeddings(x, y, LabelSpace.of(["Edema"]), fingerprint="openai:http://h:e")
