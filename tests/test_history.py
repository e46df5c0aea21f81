"""The operator's line per round, from the run history."""

from __future__ import annotations

from reportfed.flower.history import RunHistory


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
        "round timeout); d (NaN), macro AUROC 0.9123 (round 2's model), 0.00 MB moved"
    )
