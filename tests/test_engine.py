from pathlib import Path

import numpy as np
import pytest
import torch

from experiments.protocol import Protocol, simulate
from reportfed.core.aggregation import GlobalState
from reportfed.core.config import FederationConfig
from reportfed.core.labels import LabelSpace
from reportfed.core.metrics import auroc
from reportfed.nn.loss import masked_bce
from reportfed.reports.engine import run_federation
from reportfed.reports.node import Node
from reportfed.text.model import _sentence_logits, global_model, node_model, predict_proba
from reportfed.text.scoring import check_architecture, decisive_sentences, predict_state
from reportfed.text.train import positive_weights

from .synthetic import synthetic

FAST = FederationConfig(rounds=6, hidden=(32, 16), batch_size=16, lr=1e-2)


def two_nodes() -> tuple[list[Node], np.ndarray, np.ndarray, LabelSpace]:
    x, y, space = synthetic()
    a, b = LabelSpace(space[:3]), LabelSpace(space[3:])
    nodes = [Node("a", x[:250], y[:250, :3], a), Node("b", x[250:500], y[250:500, 3:], b)]
    return nodes, x[500:], y[500:], space


def test_masked_bce_ignores_nan_targets() -> None:
    logits = torch.tensor([[0.0, 5.0], [1.0, -2.0]])
    targets = torch.tensor([[1.0, float("nan")], [0.0, float("nan")]])
    expected = torch.nn.functional.binary_cross_entropy_with_logits(logits[:, 0], targets[:, 0])
    assert torch.allclose(masked_bce(logits, targets), expected)
    weighted = masked_bce(logits, targets, torch.tensor([3.0, 7.0]))
    bce = torch.nn.functional.binary_cross_entropy_with_logits(
        logits[:, 0], targets[:, 0], reduction="none"
    )
    assert torch.allclose(weighted, (bce * torch.tensor([3.0, 1.0])).mean())  # positives x3


def test_positive_weights_count_the_annotated_rows_of_each_label() -> None:
    nan = np.nan
    y = np.array([[1, 0, nan], [0, 0, nan], [0, 0, 1], [0, nan, 1]], dtype=np.float32)
    np.testing.assert_allclose(positive_weights(y), [3.0, 1.0, 1.0])  # no positives -> 1
    np.testing.assert_allclose(positive_weights(np.array([[1.0]] + [[0.0]] * 500)), [100.0])


def test_federation_learns_every_label_and_is_deterministic() -> None:
    nodes, x_test, y_test, space = two_nodes()
    first = run_federation(nodes, FAST, progress=False)
    second = run_federation(nodes, FAST, progress=False)
    assert first.state.labels == LabelSpace.union([space])
    for key in first.state.task:
        assert np.array_equal(first.state.task[key], second.state.task[key])
    p = predict_proba(global_model(first.state, x_test.shape[1], FAST), torch.from_numpy(x_test))
    cols = space.indices(first.state.labels)
    assert auroc(y_test[:, cols], p).min() > 0.8
    assert len(first.history) == 6 and set(first.history[0]["loss"]) == {"a", "b"}


def test_evaluation_hook_and_drop_of_a_poisoned_node() -> None:
    nodes, _, _, _ = two_nodes()
    poisoned = Node("poisoned", nodes[0].x.copy(), nodes[0].y, nodes[0].labels)
    poisoned.x[0, 0] = np.nan  # its training diverges into NaN weights
    config = FederationConfig(rounds=2, hidden=(8,), on_invalid="drop")
    result = run_federation(
        [*nodes, poisoned],
        config,
        progress=False,
        evaluate=lambda r, state: {"n_labels": len(state.labels)},
    )
    assert (
        result.history[0]["rejected"] == {"poisoned": "task['weight'] contains NaN or Inf"}
        or "poisoned" in result.history[0]["rejected"]
    )
    assert result.history[-1]["n_labels"] == 6


def test_protocol_central_and_federated_on_synthetic_data() -> None:
    x, y, space = synthetic(n=1500)
    # synthetic vectors embed no text: no template sentences to put beside them, nothing to read
    config = FederationConfig(rounds=8, hidden=(32, 16), lr=3e-3, templates=False, read=False)
    central = simulate(x, y, space, Protocol(n_nodes=1, federation=config), seed=1)
    fed = simulate(x, y, space, Protocol(n_nodes=3, federation=config), seed=1)
    assert [len(s) for s in fed.node_labels] == [2, 2, 2]
    for result in (central, fed):
        assert set(result.metrics) == {
            "paper_accuracy",
            "auroc",
            "prevalence_accuracy",
            "leakfree_accuracy",
            "leakfree_f1",
            "f1_ceiling",
        }
        assert result.metrics["auroc"] > 0.75
    assert (
        simulate(x, y, space, Protocol(n_nodes=3, federation=config), seed=1).metrics == fed.metrics
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("rounds", 0),
        ("rounds", -3),
        ("batch_size", 0),
        ("lr", float("nan")),
        ("lr", 0.0),
        ("dropout", 1.0),
        ("on_invalid", "skip"),
        ("server_momentum", 1.0),
    ],
)
def test_config_refuses_values_no_run_can_use(field: str, value: object) -> None:
    from reportfed.core.errors import ConfigError

    with pytest.raises(ConfigError, match=field):
        FederationConfig(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("skip", [False, True])
def test_labelling_in_numpy_is_the_torch_model(skip: bool) -> None:
    """The NumPy forward pass (labelling) gives the torch model's probabilities (training) on
    reports and on sentence bags with padding, and the same decisive sentences."""
    from reportfed.nn.arrays import to_arrays

    config = FederationConfig(hidden=(32, 16), skip=skip)
    space = LabelSpace(("Edema", "Cardiomegaly", "Fracture"))
    model = node_model(12, len(space), config, seed=3)
    with torch.no_grad():  # a skip term that is not zero, as after training
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)) * 0.3)
    state = GlobalState(space, *to_arrays(model))
    check_architecture(state, 12, config)
    rng = np.random.default_rng(0)
    reports = rng.normal(size=(50, 12)).astype(np.float32)
    bags = rng.normal(size=(40, 7, 12)).astype(np.float32)
    bags[::3, 4:] = 0  # padding
    bags[5] = 0  # a report without a sentence
    torch_model = global_model(state, 12, config)
    for x in (reports, bags):
        np.testing.assert_allclose(
            predict_state(state, x), predict_proba(torch_model, torch.from_numpy(x)), atol=1e-6
        )
    with torch.no_grad():
        top = _sentence_logits(torch_model.score, torch.from_numpy(bags)).argmax(dim=1).numpy()
    assert np.array_equal(decisive_sentences(state, bags), top)
    with pytest.raises(ValueError, match="architecture"):
        check_architecture(state, 12, FederationConfig(hidden=(32,), skip=skip))


def test_the_in_process_loop_writes_the_record_a_flower_server_writes(tmp_path: Path) -> None:
    """One RunHistory for both engines: the loop's entries carry a Flower server's keys, read
    back from history.json as written, and give the operator's round line."""
    from reportfed.core.record import RunHistory

    nodes, _, _, _ = two_nodes()
    result = run_federation(nodes, FederationConfig(rounds=2, hidden=(8,)), progress=False)
    assert isinstance(result.history, RunHistory) and len(result.history) == 2
    assert set(result.history[0]) == {
        "round", "failed", "loss", "seconds", "accepted", "rejected", "aggregated", "bytes",
    }  # fmt: skip
    assert result.history[1]["accepted"] == ["a", "b"] and result.history[1]["failed"] == {}
    result.history.save(tmp_path / "history.json")
    back = RunHistory.load(tmp_path / "history.json")
    assert back.entries == result.history.entries
    assert back.line(2, 2, 2).startswith("round 2/2: ") and "2/2 nodes answered" in back.line(
        2, 2, 2
    )
