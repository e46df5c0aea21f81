"""What decides a label (``benchmarks/decision_sources.py``): a cell is right as its yardstick's
reference says (a binary gold's 1, or a suite's four-state text), and macro F1 counts only the
cells a yardstick speaks of."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from .conftest import ROOT

NAN = np.nan


def test_cells_are_right_as_each_kind_of_reference_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # a script's folder, as it runs
    sources = importlib.import_module("decision_sources")
    states = np.array([[1, NAN], [-1, 1], [0, 0]], dtype=np.float32)
    gold = np.array([[1, 0], [0, 1], [1, 0]], dtype=np.float32)
    binary = sources.Yardstick("gold", ["a", "b", "c"], ["X", "Y"], gold, True)
    # only state 1 is a positive: -1 and 0 against a gold 0 are right, 0 against a 1 is not
    assert sources._right(states, binary).tolist() == [[True, True], [True, True], [False, True]]
    assert sources.macro_f1(states, binary) == pytest.approx((2 / 3 + 1) / 2)
    expected = np.array([["1", NAN], ["", "-1"], ["0", "1"]], dtype=object)
    suite = sources.Yardstick("suite", ["a", "b", "c"], ["X", "Y"], expected, False)
    assert sources._right(states, suite).tolist() == [[True, False], [False, False], [True, False]]
    # Y's first cell is unscored: the suite says nothing of it, so its 0 counts nowhere
    assert sources._scored(suite).tolist() == [[True, False], [True, True], [True, True]]
    assert sources.macro_f1(states, suite) == pytest.approx(0.5)
