"""The operator's line per round, from the run history."""

from __future__ import annotations

from reportfed.core.record import RunHistory


def test_a_round_line_names_time_nodes_the_left_out_auroc_and_bytes() -> None:
    history = RunHistory(
        [
            {"round": 1, "seconds": 4.25, "accepted": ["a", "b"], "rejected": {}, "failed": {},
             "bytes": {"a": {"down": 500_000, "up": 250_000}, "b": {"down": 500_000, "up": 250_000}}},
            {"round": 2, "seconds": 30.0, "accepted": ["a"], "rejected": {"d": "NaN"},
             "failed": {"c": "no reply within the round timeout"},
             "evaluation": {"macro-auroc": 0.91234}},
        ]
    )  # fmt: skip
    assert history.line(1, 2, 2) == "round 1/2: 4.2 s, 2/2 nodes answered, 1.50 MB moved"
    assert history.line(2, 2, 3) == (
        "round 2/2: 30.0 s, 2/3 nodes answered, 1 accepted, left out: c (no reply within the "
        "round timeout); d (NaN), macro AUROC 0.9123 (round 2's model, node-mean), 0.00 MB moved"
    )


def test_an_evaluation_says_its_statistic_and_reads_back_as_written() -> None:
    """Both engines write one record; a history written before it named the statistic is a
    Flower run's (node-mean)."""
    from reportfed.core.record import NODE_MEAN, POOLED, Evaluation

    written = Evaluation(POOLED, {"Edema": 0.8, "Cardiomegaly": 0.9}, {"Edema": 3}, min_rows=40)
    record = written.to_json()
    assert record["statistic"] == "pooled" and record["macro-auroc"] == 0.85
    back = Evaluation.from_json(record)
    assert back.statistic == POOLED and back.auroc == written.auroc and back.min_rows == 40
    assert back.macro == 0.85 and back.said == "pooled over every site's held-out rows"
    assert Evaluation.from_json({"auroc/Edema": 0.7}).statistic == NODE_MEAN
