"""The server step, written once (:class:`reportfed.core.server.SurgicalServer`): its rules, and one
server option (``server_lr``) declared once and obeyed by every engine: the in-process loop, the
lockstep engine, the image federation and the Flower strategy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from experiments.lockstep import run_federations
from reportfed.core.aggregation import GlobalState, NodeUpdate, Sums, aggregate, update_norm
from reportfed.core.config import FederationConfig
from reportfed.core.errors import ConfigError
from reportfed.core.labels import LabelSpace
from reportfed.core.server import ServerOptions, SurgicalServer
from reportfed.reports.engine import run_federation
from reportfed.reports.node import Node, initial_state

from .synthetic import synthetic

SPACE = LabelSpace.of(["Edema", "Atelectasis"])


def state(value: float) -> GlobalState:
    return GlobalState(SPACE, {"w": np.full(3, value)}, {"weight": np.full((2, 3), value)})


def update(name: str, value: float) -> NodeUpdate:
    s = state(value)
    return NodeUpdate(name, SPACE, s.shared, s.task)


def test_clip_norm_bounds_each_update_and_judges_sums_by_their_mean_change() -> None:
    # from 0, a node changes its 3 + 6 weights by 1 each (norm 3) and another by 4 each (norm 12)
    updates = [update("a", 1.0), update("b", 4.0)]
    clipped = SurgicalServer(state(0.0), ServerOptions(clip_norm=1.5)).step(updates)
    # each change scaled to norm 1.5: a by 1/2, b by 1/8, so every weight moves 0.5 on average
    np.testing.assert_allclose(clipped.state.shared["w"], 0.5)
    np.testing.assert_allclose(clipped.state.task["weight"], 0.5)
    assert update_norm(update("b", 4.0), state(0.0)) == pytest.approx(12.0)

    # an update of the wrong shape is judged before it is clipped: dropped, not a crash
    wrong = NodeUpdate("c", SPACE, {"w": np.ones(4)}, {"weight": np.ones((2, 3))})
    options = ServerOptions(clip_norm=1.5, on_invalid="drop")
    dropped = SurgicalServer(state(0.0), options).step([*updates, wrong])
    assert (
        dropped.accepted == ["a", "b"] and "differ from the federation's" in dropped.rejected["c"]
    )
    np.testing.assert_allclose(dropped.state.shared["w"], 0.5)

    def summed(value: float) -> Sums:  # two nodes, both with both labels, mean change ``value``
        s = state(2 * value)
        return Sums(SPACE, s.shared, s.task, 2.0, np.array([2.0, 2.0]))

    server = SurgicalServer(state(0.0), ServerOptions(clip_norm=1.5))
    within = server.step(summed(0.5), ["a", "b"])  # mean change of norm 1.5: what clipping allows
    assert within.aggregated and within.accepted == ["a", "b"]
    np.testing.assert_allclose(within.state.shared["w"], 0.5)
    beyond = server.step(summed(1.0), ["a", "b"])  # from 0.5 to 1.0: norm 1.5 again, allowed
    assert beyond.aggregated
    refused = server.step(summed(3.0), ["a", "b"])  # a node that did not clip before masking
    assert not refused.aggregated and "exceeds clip_norm 1.5" in refused.rejected["a"]
    np.testing.assert_allclose(refused.state.shared["w"], 1.0)  # unchanged


def test_a_step_merges_then_moves_the_representation_by_the_server_rules() -> None:
    updates = [update("a", 1.0), update("b", 3.0)]
    plain = SurgicalServer(state(0.0)).step(updates)
    merged = aggregate(updates, state(0.0)).state
    assert plain.aggregated and plain.accepted == ["a", "b"] and plain.joined == []
    np.testing.assert_array_equal(plain.state.shared["w"], merged.shared["w"])  # bit for bit

    half = SurgicalServer(state(0.0), ServerOptions(server_lr=0.5)).step(updates)
    np.testing.assert_allclose(half.state.shared["w"], 1.0)  # 0 + 0.5 * (2 - 0)
    np.testing.assert_allclose(half.state.task["weight"], 2.0)  # task rows as merged

    waiting = SurgicalServer(state(0.0), min_nodes=3)
    step = waiting.step(updates)
    assert not step.aggregated and step.state is waiting.state
    with pytest.raises(ConfigError, match="server_lr"):
        ServerOptions(server_lr=float("nan"))


def test_every_update_invalid_with_drop_leaves_the_model_and_names_the_nodes() -> None:
    server = SurgicalServer(state(0.0), ServerOptions(on_invalid="drop"))
    step = server.step([update("a", float("nan"))])
    assert not step.aggregated and "NaN or Inf" in step.rejected["a"]
    np.testing.assert_array_equal(step.state.shared["w"], 0.0)


def _text_nodes() -> list[Node]:
    x, y, space = synthetic(n=200)
    return [
        Node("a", x[:100], y[:100, :4], LabelSpace(space.names[:4])),
        Node("b", x[100:], y[100:, 2:], LabelSpace(space.names[2:])),
    ]


def _loop(config: FederationConfig) -> tuple[GlobalState, GlobalState]:
    nodes = _text_nodes()
    start = initial_state(24, LabelSpace.union(n.labels for n in nodes), config)
    return start, run_federation(nodes, config, progress=False).state


def _lockstep(config: FederationConfig) -> tuple[GlobalState, GlobalState]:
    nodes = _text_nodes()
    start = initial_state(24, LabelSpace.union(n.labels for n in nodes), config)
    result = run_federations([nodes], [config])[0].state
    assert result is not None
    return start, result


def _vision(tmp_path: Path) -> tuple[GlobalState, GlobalState]:
    pytest.importorskip("monai")
    from reportfed.nn.arrays import to_arrays
    from reportfed.vision.data import read_image_table
    from reportfed.vision.federation import (
        ImageFederationConfig,
        ImageNode,
        new_model,
        run_image_federation,
    )
    from reportfed.vision.synthetic import write_synthetic_node

    names = {"a": ["Cardiomegaly", "Pleural Effusion"], "b": ["Pleural Effusion", "Pneumothorax"]}
    nodes = [
        ImageNode(n, read_image_table(write_synthetic_node(tmp_path / n, 16, labels, seed=k)))
        for k, (n, labels) in enumerate(names.items())
    ]
    config = ImageFederationConfig(image_size=64, batch_size=8, rounds=1, server_lr=0.0)
    result = run_image_federation(nodes, config, progress=False).state
    start = GlobalState(result.labels, *to_arrays(new_model(config, len(result.labels))))
    return start, result


def _flower(tables: dict[str, Path], cache: Path) -> tuple[GlobalState, GlobalState]:
    pytest.importorskip("flwr")
    from .flower_nodes import CONFIG
    from .test_flower import grid_with, init_fn, run_strategy

    config = replace(CONFIG, server_lr=0.0)
    strategy, states = run_strategy(grid_with(tables, cache, names="ab"), 1, config=config)
    start = GlobalState(strategy.labels, *init_fn(config)(384, strategy.labels))
    return start, states[-1]


@pytest.mark.parametrize("engine", ["loop", "lockstep", "vision", "flower"])
def test_server_lr_zero_freezes_the_representation_in_every_engine(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    config = FederationConfig(rounds=2, hidden=(16,), server_lr=0.0)
    runs: dict[str, Callable[[], tuple[GlobalState, GlobalState]]] = {
        "loop": lambda: _loop(config),
        "lockstep": lambda: _lockstep(config),
        "vision": lambda: _vision(tmp_path),
        "flower": lambda: _flower(
            request.getfixturevalue("tables"), request.getfixturevalue("embeddings_cache")
        ),
    }
    start, end = runs[engine]()
    for key, value in start.shared.items():
        np.testing.assert_array_equal(end.shared[key], value, err_msg=key)
    assert any(not np.array_equal(end.task[k], start.task[k]) for k in end.task), "task rows train"
