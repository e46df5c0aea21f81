import numpy as np
import pytest

from reportfed.core.config import FederationConfig
from reportfed.core.errors import ConfigError, ModelFileError, ReportfedError
from reportfed.core.labels import LabelSpace
from reportfed.labeler import ReportLabeler

CONFIG = FederationConfig(rounds=8, hidden=(64, 32), lr=3e-3)


@pytest.fixture(scope="module")
def fitted(iu_embedded, embeddings_cache):  # type: ignore[no-untyped-def]
    table, _ = iu_embedded
    sub = table.subset(np.arange(1200))
    y = sub.labels.copy()
    nodes = np.array(["a"] * 600 + ["b"] * 600)
    space = sub.label_space
    a_cols = space.indices(["Cardiomegaly", "Pleural Effusion", "Atelectasis"])
    b_cols = space.indices(["Lung Opacity", "Support Devices"])
    keep = np.zeros_like(y, dtype=bool)
    keep[np.ix_(nodes == "a", a_cols)] = True
    keep[np.ix_(nodes == "b", b_cols)] = True
    y[~keep] = np.nan
    labeler = ReportLabeler(config=CONFIG, cache_dir=embeddings_cache, progress=False)
    return labeler.fit(sub.texts, y, list(space), nodes=list(nodes)), table


def test_thresholds_read_the_labels_a_site_lacks(fitted) -> None:  # type: ignore[no-untyped-def]
    """Sites that read the labels they lack label at each label's threshold of best F1 on each
    site's own rows, those labels as the text rules read its reports, averaged over the sites
    weighted by their positives (the consortium rerun's rule in docs/experiments.md), not at the
    threshold best on every annotated row pooled; the held-out F1 users read follows the rule."""
    from reportfed.core.metrics import f1_thresholds, site_thresholds
    from reportfed.text.states import read_labels

    labeler, table = fitted
    sub = table.subset(np.arange(1200))
    names = list(labeler.classes_)
    nodes = np.array(["a"] * 600 + ["b"] * 600)
    known = sub.labels[:, sub.label_space.indices(names)]
    own = {"a": ["Cardiomegaly", "Pleural Effusion", "Atelectasis"],
           "b": ["Lung Opacity", "Support Devices"]}  # fmt: skip
    read, annotated = known.copy(), known.copy()
    for site, labels in own.items():
        rows = np.flatnonzero(nodes == site)
        lacked = [c for c, n in enumerate(names) if n not in labels]
        read[np.ix_(rows, lacked)] = read_labels(
            [sub.texts[i] for i in rows], [names[c] for c in lacked]
        )
        annotated[np.ix_(rows, lacked)] = np.nan
    p = labeler.predict_scores_embeddings(labeler.embed(sub.texts))
    np.testing.assert_allclose(labeler.thresholds_, site_thresholds(read, p, nodes), atol=1e-6)
    assert not np.allclose(labeler.thresholds_, f1_thresholds(annotated, p), atol=1e-3)
    assert labeler.provenance_["held_out"]["Cardiomegaly"]["f1_training_threshold"] is not None


def test_thresholds_read_only_the_labels_the_rules_read() -> None:
    """A site's labels read for the thresholds are those its node trains as read, its held-out
    rows read the same way: No Finding, which the rules do not read, stays not annotated where
    a site lacks it; with nothing left to read there is no reading."""
    from reportfed.labeler import _read_lacked
    from reportfed.text.lexicon import PLAIN

    labels = LabelSpace(("Edema", "No Finding", "Pneumonia"))
    texts = ["Mild pulmonary edema. No pneumonia.", "No acute disease.",
             "Right lower lobe pneumonia.", "Normal chest."]  # fmt: skip
    nan = np.nan
    y = np.array([[1, nan, nan], [0, nan, nan], [nan, 0, 1], [nan, 1, 0]], np.float32)
    site = np.array(["a", "a", "b", "b"])
    x = np.zeros((4, 8), np.float32)
    labeler = ReportLabeler(
        config=FederationConfig(templates=False, read=True), val_fraction=0.5, progress=False
    )
    sites, _ = labeler._sites(x, y, labels, site, texts, PLAIN)
    assert all(len(s.fit) == len(s.val) == 1 for s in sites.values())  # both kinds of row
    read = _read_lacked(y, sites, texts, labels, PLAIN)
    expected = [[1, nan, 0], [0, nan, 0], [0, 0, 1], [0, 1, 0]]
    np.testing.assert_array_equal(read, np.array(expected, np.float32))
    y[2:, 0], y[:2, 2] = 0, 0  # every site annotates what the rules read
    sites, _ = labeler._sites(x, y, labels, site, texts, PLAIN)
    assert _read_lacked(y, sites, texts, labels, PLAIN) is None


def test_fit_predicts_the_union_of_node_labels(fitted) -> None:  # type: ignore[no-untyped-def]
    labeler, table = fitted
    assert list(labeler.classes_) == [
        "Cardiomegaly",
        "Lung Opacity",
        "Atelectasis",
        "Pleural Effusion",
        "Support Devices",
    ]
    test = table.subset(np.arange(1200, 1800))
    p = labeler.predict_proba(test.texts)
    assert p.shape == (600, 5) and ((p >= 0) & (p <= 1)).all()
    pred = labeler.predict(test.texts)
    assert set(np.unique(pred)) <= {0.0, 1.0}
    from reportfed.core.metrics import auroc

    y = test.labels[:, test.label_space.indices(list(labeler.classes_))]
    assert np.nanmin(auroc(y, p)) > 0.75
    assert labeler.provenance_["nodes"]["a"]["labels"] == [
        "Cardiomegaly",
        "Atelectasis",
        "Pleural Effusion",
    ]


def test_probabilities_are_calibrated_with_the_mentions(fitted) -> None:  # type: ignore[no-untyped-def]
    """The calibration fitted on the validation rows reads an affirmed mention as evidence for
    the finding and a negated one against it, and improves the Brier score on unseen rows."""
    from reportfed.text.calibration import FEATURES

    labeler, table = fitted
    coef = dict(zip(FEATURES, labeler.calibration_[0, :-1], strict=False))
    assert coef["logit"] > 0 and coef["affirmed"] > 0 > coef["negated"]
    test = table.subset(np.arange(1200, 1800))
    y = test.labels[:, test.label_space.indices(list(labeler.classes_))]
    known = ~np.isnan(y)
    brier = {
        name: np.mean((p[known] - y[known]) ** 2)
        for name, p in (
            ("scores", labeler.predict_scores(test.texts)),
            ("calibrated", labeler.predict_proba(test.texts)),
        )
    }
    assert brier["calibrated"] < brier["scores"]
    effusion = list(labeler.classes_).index("Pleural Effusion")
    said = labeler.predict_proba(["Small left pleural effusion.", "No pleural effusion."])
    assert said[0, effusion] > 0.5 > said[1, effusion]


def test_save_load_round_trip_is_exact(fitted, tmp_path, embeddings_cache) -> None:  # type: ignore[no-untyped-def]
    labeler, table = fitted
    path = labeler.save(tmp_path / "m.safetensors")
    loaded = ReportLabeler.load(path, cache_dir=embeddings_cache, progress=False)
    texts = table.texts[:50]
    assert np.array_equal(loaded.predict_proba(texts), labeler.predict_proba(texts))
    assert np.array_equal(loaded.thresholds_, labeler.thresholds_)
    assert np.array_equal(loaded.calibration_, labeler.calibration_)
    assert list(loaded.classes_) == list(labeler.classes_)
    # the file keeps the architecture; how the model was trained is provenance
    assert (loaded.config.hidden, loaded.config.dropout, loaded.config.skip) == (
        labeler.config.hidden, labeler.config.dropout, labeler.config.skip,
    )  # fmt: skip
    trained = loaded.provenance_["config"]
    assert FederationConfig(**{**trained, "hidden": tuple(trained["hidden"])}) == labeler.config


def test_truncated_or_corrupted_model_files_are_rejected(fitted, tmp_path) -> None:  # type: ignore[no-untyped-def]
    labeler, _ = fitted
    raw = labeler.save(tmp_path / "m.safetensors").read_bytes()
    (tmp_path / "t.safetensors").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ModelFileError, match="not a readable reportfed model file"):
        ReportLabeler.load(tmp_path / "t.safetensors")
    flipped = bytearray(raw)
    flipped[-10] ^= 0xFF
    (tmp_path / "c.safetensors").write_bytes(bytes(flipped))
    with pytest.raises(ModelFileError, match="checksum"):
        ReportLabeler.load(tmp_path / "c.safetensors")
    with pytest.raises(ModelFileError, match="no such model file"):
        ReportLabeler.load(tmp_path / "missing.safetensors")


def test_another_embedder_is_an_error(fitted, tmp_path) -> None:  # type: ignore[no-untyped-def]
    labeler, _ = fitted
    path = labeler.save(tmp_path / "m.safetensors")
    with pytest.raises(ModelFileError, match="trained with embedder st:all-MiniLM-L6-v2"):
        ReportLabeler.load(path, embedder="hf:minilm")


def test_unfitted_and_empty_inputs() -> None:
    from sklearn.exceptions import NotFittedError

    with pytest.raises(ReportfedError, match="not fitted"):
        ReportLabeler().predict_proba(["x"])
    with pytest.raises(NotFittedError):  # scikit-learn's, for pipelines that catch it
        ReportLabeler().predict(["x"])
    with pytest.raises(ReportfedError, match="empty or non-string"):
        ReportLabeler().embed(["fine", "  "])


def test_a_labeler_with_a_skip_head_saves_and_loads(
    iu_embedded, tmp_path, embeddings_cache
) -> None:  # type: ignore[no-untyped-def]
    table, _ = iu_embedded
    sub = table.subset(np.arange(300))
    config = FederationConfig(rounds=2, hidden=(16, 8), skip=True, balance=True, local_epochs=2)
    labeler = ReportLabeler(config=config, cache_dir=embeddings_cache, progress=False)
    labeler.fit(sub.texts, sub.labels, list(sub.label_space), nodes=["a"] * 150 + ["b"] * 150)
    loaded = ReportLabeler.load(
        labeler.save(tmp_path / "m.safetensors"), cache_dir=embeddings_cache, progress=False
    )
    assert loaded.config.skip and loaded.provenance_["config"]["balance"]
    texts = table.texts[300:350]
    assert np.array_equal(loaded.predict_proba(texts), labeler.predict_proba(texts))


def test_classes_keep_the_callers_label_order(iu_embedded, embeddings_cache) -> None:  # type: ignore[no-untyped-def]
    table, _ = iu_embedded
    labels = ["Cardiomegaly", "Pleural Effusion", "Atelectasis", "Edema"]
    sub = table.subset(np.arange(400)).select_labels(labels)
    labeler = ReportLabeler(
        config=FederationConfig(rounds=2, hidden=(16,)), cache_dir=embeddings_cache, progress=False
    )
    labeler.fit(sub.texts, sub.labels, labels)
    assert list(labeler.classes_) == labels
    p = labeler.predict_proba(sub.texts[:200])
    from reportfed.core.metrics import auroc

    assert auroc(sub.labels[:200, :1], p[:, :1])[0] > 0.6  # column 0 is Cardiomegaly
    with pytest.raises(ReportfedError, match="not one string"):
        labeler.predict_proba("Cardiomegaly.")  # type: ignore[arg-type]
    assert labeler.predict_proba([]).shape == (0, 4)
    with pytest.raises(ReportfedError, match="labels must be 1, 0 or NaN"):
        labeler.fit(sub.texts[:10], np.full((10, 4), 2.0), labels)
    with pytest.raises(ReportfedError, match="nodes names 3 rows"):
        labeler.fit(sub.texts[:10], sub.labels[:10], labels, nodes=["a", "b", "c"])


def _rewrite(path, edit) -> None:  # type: ignore[no-untyped-def]
    """Rewrite a model file's metadata with ``edit(meta)``, keeping its weights."""
    import json

    from safetensors import safe_open
    from safetensors.numpy import save_file

    with safe_open(str(path), framework="numpy") as f:
        meta = json.loads(f.metadata()["reportfed"])
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    edit(meta)
    save_file(tensors, str(path), metadata={"reportfed": json.dumps(meta)})


def test_edited_metadata_fails_the_checksum_v1_is_refused_and_v3_loads(fitted, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from reportfed.text.model_file import checksum as _checksum

    labeler, _ = fitted
    for edit in (
        lambda m: m["labels"].reverse(),  # swapped columns
        lambda m: m["thresholds"].__setitem__(0, 0.0),
        lambda m: m["calibration"][0].__setitem__(0, 5.0),
        lambda m: m.__setitem__("granularity", "report"),
    ):
        path = labeler.save(tmp_path / "m.safetensors")
        _rewrite(path, edit)
        with pytest.raises(ModelFileError, match="checksum"):
            ReportLabeler.load(path, progress=False)

    def tensors_of(p):  # type: ignore[no-untyped-def]
        from safetensors.numpy import load_file

        return load_file(str(p))

    def resealed(edit):  # type: ignore[no-untyped-def]
        """``edit``, then a checksum made to match (what a careful forger would do)."""

        def rewrite(meta) -> None:  # type: ignore[no-untyped-def]
            edit(meta)
            meta["checksum"] = _checksum(tensors_of(path), meta)

        return rewrite

    for edit in (
        lambda m: m.__setitem__("thresholds", m["thresholds"][:2]),  # a short list
        lambda m: m["thresholds"].__setitem__(0, float("nan")),
        lambda m: m["labels"].__setitem__(1, m["labels"][0]),  # a duplicate label
        lambda m: m.__setitem__("calibration", m["calibration"][:1]),
    ):
        path = labeler.save(tmp_path / "m.safetensors")
        _rewrite(path, resealed(edit))
        with pytest.raises(ModelFileError, match="inconsistent model metadata"):
            ReportLabeler.load(path, progress=False)

    # /1's checksum covers the weights only, so a swapped label list would pass: refused
    path = labeler.save(tmp_path / "m.safetensors")
    _rewrite(path, lambda m: m.__setitem__("format", "reportfed-model/1"))
    with pytest.raises(ModelFileError, match=r"reportfed-model/1 file.*retrain"):
        ReportLabeler.load(path, progress=False)

    # /3 has no calibration: its probabilities are the model's scores
    def version_three(meta) -> None:  # type: ignore[no-untyped-def]
        meta["format"] = "reportfed-model/3"
        del meta["calibration"]

    path = labeler.save(tmp_path / "m.safetensors")
    _rewrite(path, resealed(version_three))
    old = ReportLabeler.load(path, progress=False)
    assert list(old.classes_) == list(labeler.classes_)
    texts = ["Small left pleural effusion.", "No acute disease."]
    np.testing.assert_allclose(old.predict_proba(texts), labeler.predict_scores(texts), atol=1e-6)

    # /4's calibration has no "likely" coefficient: it reads as 0, the probabilities /4 gave
    def version_four(meta) -> None:  # type: ignore[no-untyped-def]
        meta["format"] = "reportfed-model/4"
        meta["calibration"] = [row[:4] + row[5:] for row in meta["calibration"]]

    path = labeler.save(tmp_path / "m.safetensors")
    _rewrite(path, resealed(version_four))
    four = ReportLabeler.load(path, progress=False)
    expected = labeler.calibration_.copy()
    expected[:, 4] = 0.0
    np.testing.assert_array_equal(four.calibration_, expected)


def test_scikit_learn_clones_the_labeler_and_validates_at_fit() -> None:
    """scikit-learn's API checks that apply to an estimator of report texts. Its shared checks
    of fitting and predicting (dtypes, sparse input, NaN, sample order...) feed 2-D numeric
    arrays, which a labeler of texts does not take: with its tags saying so (texts in, a
    required multi-label ``y``), ``check_estimator`` runs the clone check alone (below), and
    the fit checks that do apply are held here (fit returns self, a second fit starts from
    scratch) and in this file's other tests (NotFittedError, Pipeline and GridSearchCV)."""
    from sklearn.base import clone
    from sklearn.utils import estimator_checks as checks

    labeler = ReportLabeler(config=FederationConfig(rounds=2), val_fraction=0.2, progress=False)
    copy = clone(labeler)
    assert copy is not labeler and copy.get_params() == labeler.get_params()
    copy.set_params(val_fraction=0.3, granularity="report")
    assert (copy.val_fraction, copy.granularity) == (0.3, "report")
    assert (labeler.val_fraction, labeler.granularity) == (0.2, "sentence")
    for check in (
        checks.check_parameters_default_constructible,
        checks.check_no_attributes_set_in_init,
        checks.check_get_params_invariance,
        checks.check_set_params,
        checks.check_estimator_cloneable,
        checks.check_estimator_repr,
        checks.check_do_not_raise_errors_in_init_or_set_params,
        checks.check_estimators_unfitted,
        checks.check_mixin_order,
        checks.check_valid_tag_types,
        checks.check_estimator_tags_renamed,
    ):
        check("ReportLabeler", ReportLabeler(progress=False))
    ran = checks.check_estimator(ReportLabeler(progress=False), on_fail=None)
    assert [(r["check_name"], r["status"]) for r in ran] == [
        ("check_estimator_cloneable", "passed")
    ]
    # fit returns the estimator, and a second fit starts from scratch (its labels alone)
    small = FederationConfig(rounds=1, hidden=(8,), templates=False, read=False)
    fitted = ReportLabeler(config=small, val_fraction=0.25, progress=False)
    x = np.random.default_rng(0).normal(size=(8, 1, 16)).astype(np.float32)
    y = np.array([[1, 0], [0, 1], [1, 1], [0, 0]] * 2, np.float32)
    both, one = LabelSpace(("Edema", "Pneumonia")), LabelSpace(("Fracture",))
    assert fitted.fit_embeddings(x, y, both, fingerprint="precomputed") is fitted
    fitted.fit_embeddings(x, y[:, :1], one, fingerprint="precomputed")
    assert list(fitted.classes_) == ["Fracture"] and fitted.state_.labels == one
    bad = ReportLabeler(val_fraction=1.5, progress=False)  # stored as given, refused at fit
    with pytest.raises(ConfigError, match=r"val_fraction must be in \[0, 1\)"):
        bad.fit_embeddings(
            np.zeros((4, 2, 8), np.float32), np.zeros((4, 1)), LabelSpace(("Edema",))
        )


def test_a_library_warning_names_the_callers_line(embeddings_cache) -> None:  # type: ignore[no-untyped-def]
    """Four positives of a label warn (too few to learn from), attributed to the line that
    called reportfed, not to a line inside it, whichever method the caller went through."""
    from reportfed.core.errors import ReportfedWarning

    small = FederationConfig(rounds=1, hidden=(8,), templates=False, read=False)
    texts = ["Mild pulmonary edema.", "No acute disease."] * 4
    y = np.array([[1], [0]] * 4, np.float32)
    labeler = ReportLabeler(config=small, cache_dir=embeddings_cache, progress=False)
    with pytest.warns(ReportfedWarning, match="4 positive and 4 negative") as said:
        labeler.fit(texts, y, ["Edema"])
    assert {w.filename for w in said if w.category is ReportfedWarning} == {__file__}


def test_a_pipeline_in_a_grid_search_tunes_the_labeler(iu_embedded, embeddings_cache) -> None:  # type: ignore[no-untyped-def]
    """The module docstring's promise: ``Pipeline`` and ``GridSearchCV`` take the labeler as
    they take any estimator (the label names travel as a fit parameter)."""
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer

    from reportfed.core.metrics import auroc

    table, _ = iu_embedded
    sub = table.subset(np.arange(400))
    names = ["Cardiomegaly", "Pleural Effusion"]
    y = sub.labels[:, sub.label_space.indices(names)]

    def macro_auroc(pipeline: Pipeline, texts: list[str], truth: np.ndarray) -> float:
        return float(np.mean(auroc(truth, pipeline.predict_proba(texts))))

    pipeline = Pipeline(
        [
            ("strip", FunctionTransformer(lambda texts: [t.strip() for t in texts])),
            ("labeler", ReportLabeler(cache_dir=embeddings_cache, progress=False)),
        ]
    )
    configs = [FederationConfig(rounds=r, hidden=(32,), local_epochs=1) for r in (1, 4)]
    search = GridSearchCV(pipeline, {"labeler__config": configs}, cv=2, scoring=macro_auroc)
    search.fit(sub.texts, y, labeler__labels=names)
    assert search.best_params_["labeler__config"] in configs
    assert all(0.5 < s <= 1.0 for s in search.cv_results_["mean_test_score"])
    best = search.best_estimator_.named_steps["labeler"]
    assert list(best.classes_) == names and best is not pipeline.named_steps["labeler"]
    assert search.predict_proba(["Moderate cardiomegaly."]).shape == (1, 2)


def test_held_out_quality_is_measured_at_thresholds_the_rows_did_not_choose() -> None:
    """The held-out figures users read: F1 at the thresholds given (chosen on the training
    rows), and a caveat where positives are too few or a class is missing."""
    from reportfed.core.labels import LabelSpace
    from reportfed.labeler import FEW_POSITIVES, _held_out

    y = np.array([[1, 0, 1], [0, 0, 1], [1, 0, 0], [0, 0, 1]], dtype=np.float32)
    scores = np.array([[0.9, 0.1, 0.2], [0.6, 0.2, 0.9], [0.4, 0.3, 0.1], [0.1, 0.4, 0.8]])
    found = _held_out(
        y, scores, np.array([0.5, 0.5, 0.5]), LabelSpace.of(["Edema", "Mass", "Pneumonia"])
    )
    # at 0.5 rows 0 and 1 are called: one right, one wrong, and row 2's positive missed
    assert found["Edema"]["f1_training_threshold"] == 0.5 and found["Edema"]["auroc"] == 0.75
    assert (
        found["Edema"]["caveat"] == "2 held-out positive(s): too few to measure"
        and FEW_POSITIVES == 10
    )
    assert found["Mass"] == {
        "rows": 4, "positives": 0, "auroc": None, "f1_training_threshold": None,
        "caveat": "no held-out positive",
    }  # fmt: skip
    # rows 1 and 3 called and right, row 0's positive (0.2) missed: F1 2*2 / (2*2 + 1)
    assert (
        found["Pneumonia"]["positives"] == 3 and found["Pneumonia"]["f1_training_threshold"] == 0.8
    )
