"""Small-MLP training runs with reportfed's thread count and leaves torch's as it found it."""

from __future__ import annotations

import pytest
import torch

from reportfed.core.errors import ConfigError
from reportfed.nn.threads import TRAINING_THREADS, training_threads
from reportfed.text.model import ReportMLP
from reportfed.text.train import train_local


def test_training_uses_its_thread_count_and_restores_torchs(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    seen = []
    model = ReportMLP(8, 2, hidden=(4,), dropout=0.0)
    original = model.forward

    def forward(x: torch.Tensor) -> torch.Tensor:
        seen.append(torch.get_num_threads())
        return original(x)

    monkeypatch.setattr(model, "forward", forward)
    before = torch.get_num_threads()
    x, y = torch.randn(10, 8), torch.randint(0, 2, (10, 2)).float()
    train_local(model, x, y, batch_size=5)
    assert set(seen) == {TRAINING_THREADS} and torch.get_num_threads() == before

    monkeypatch.setenv("REPORTFED_TRAINING_THREADS", "2")
    seen.clear()
    train_local(model, x, y, batch_size=5)
    assert set(seen) == {2} and torch.get_num_threads() == before


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_thread_count_is_refused(monkeypatch, value: str) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("REPORTFED_TRAINING_THREADS", value)
    with pytest.raises(ConfigError, match="REPORTFED_TRAINING_THREADS"):
        training_threads()
