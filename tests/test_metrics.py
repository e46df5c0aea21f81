import numpy as np
import pytest

from reportfed.core.metrics import (
    accuracy_at,
    auroc,
    evaluate,
    expected_calibration_error,
    f1_at,
    matched_thresholds,
    prevalence_accuracy,
    site_thresholds,
    youden_thresholds,
)


def test_youden_threshold_and_paper_accuracy_on_a_known_case() -> None:
    y = np.array([[0], [0], [0], [1], [1]], dtype=float)
    p = np.array([[0.1], [0.2], [0.7], [0.6], [0.9]])
    thr = youden_thresholds(y, p)
    assert thr[0] == pytest.approx(0.6)  # J = 1 - 1/3 at 0.6 beats 0.9 (J = 0.5)
    assert accuracy_at(y, p, thr)[0] == pytest.approx(4 / 5)
    assert auroc(y, p)[0] == pytest.approx(5 / 6)
    assert f1_at(y, p, thr)[0] == pytest.approx(2 * 2 / (3 + 2))


def test_nan_entries_are_masked_and_one_class_labels_are_left_out() -> None:
    y = np.array([[1, 0, np.nan], [0, 0, 1], [np.nan, 0, 0], [1, 0, 1]], dtype=float)
    p = np.array([[0.9, 0.1, 0.5], [0.2, 0.3, 0.8], [0.99, 0.4, 0.1], [0.7, 0.2, 0.6]])
    a = auroc(y, p)
    assert a[0] == 1.0 and np.isnan(a[1]) and a[2] == 1.0
    assert prevalence_accuracy(y)[0] == pytest.approx(2 / 3)
    out = evaluate(y, p, thresholds=np.array([0.5, 0.5, 0.5]))
    assert out["auroc"] == 1.0 and out["paper_accuracy"] == 1.0
    assert out["prevalence_accuracy"] == pytest.approx((2 / 3 + 2 / 3) / 2)
    assert out["leakfree_accuracy"] == 1.0 and out["leakfree_f1"] == 1.0


def test_shape_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="differ in shape"):
        auroc(np.zeros((3, 2)), np.zeros((3, 1)))


def test_expected_calibration_error_on_a_known_case() -> None:
    """Bins of width 0.1: [0.9] holds one positive (gap 0.1), [0.1] one negative (0.1),
    [0.8] two rows, one positive (|0.8 - 0.5| = 0.3); masked rows are left out."""
    y = np.array([[1], [0], [1], [0], [np.nan]])
    p = np.array([[0.9], [0.1], [0.8], [0.8], [0.5]])
    assert expected_calibration_error(y, p)[0] == pytest.approx((0.1 + 0.1 + 2 * 0.3) / 4)


def test_matched_thresholds_call_each_labels_prevalence_positive() -> None:
    p = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.3], [0.2, 0.4]])
    t = matched_thresholds(p, np.array([0.5, 0.0]))
    assert (p >= t).sum(axis=0).tolist() == [2, 0]  # half the rows; none
    assert t[0] == (0.8 + 0.3) / 2
    assert (p >= matched_thresholds(p, np.array([1.0, 0.26]))).sum(axis=0).tolist() == [4, 1]


def test_the_node_mean_weighs_each_node_by_its_rows_and_skips_what_cannot_be_judged() -> None:
    """The Flower engine's statistic, a pure function: a node with no rows or a NaN AUROC (one
    class in its held-out rows) counts for nothing; the others by their rows."""
    from reportfed.core.metrics import node_mean

    means = node_mean(
        [
            ("Edema", 30.0, np.array([0.9, 0.4])),
            ("Edema", 10.0, np.array([0.5, 0.8])),
            ("Edema", 50.0, np.array([np.nan, 0.1])),
            ("Fracture", 0.0, np.array([0.7, 0.5])),
        ]
    )
    assert list(means) == ["Edema"]
    rows, (auc, threshold) = means["Edema"]
    assert rows == 40 and auc == pytest.approx(0.8) and threshold == pytest.approx(0.5)


def test_site_thresholds_average_the_sites_by_their_positives() -> None:
    # label 0: site 0's best F1 calls its two positives (threshold between 0.8 and 0.1), site
    # 1's calls its one (between 0.7 and 0.3); label 1 has no positive; label 2 only at site 1
    p = np.array([[0.9, 0.5, 0.9], [0.8, 0.5, 0.8], [0.1, 0.5, 0.1],
                  [0.7, 0.5, 0.8], [0.3, 0.5, 0.4], [0.2, 0.5, 0.2]])  # fmt: skip
    y = np.array([[1, 0, 0], [1, 0, 0], [0, 0, 0], [1, 0, 1], [0, 0, 0], [0, 0, 0]], float)
    sites = np.array([0, 0, 0, 1, 1, 1])
    got = site_thresholds(y, p, sites)
    np.testing.assert_allclose(got, [(2 * 0.45 + 1 * 0.5) / 3, 0.5, 0.6])
