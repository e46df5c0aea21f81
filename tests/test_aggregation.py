from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reportfed.core.aggregation import GlobalState, NodeUpdate, aggregate, node_arrays
from reportfed.core.errors import InvalidUpdateError
from reportfed.core.labels import CHEXPERT_13, LabelSpace
from reportfed.core.server import ServerMomentum, ServerOptions

H = 4


def update(node: str, labels, seed: int, *, n: int = 1, dtype=np.float64) -> NodeUpdate:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    space = LabelSpace.of(labels, allow_unknown=True)
    return NodeUpdate(
        node,
        space,
        shared={
            "0.weight": rng.normal(size=(H, 3)).astype(dtype),
            "0.bias": rng.normal(size=H).astype(dtype),
        },
        task={
            "weight": rng.normal(size=(len(space), H)).astype(dtype),
            "bias": rng.normal(size=len(space)).astype(dtype),
        },
        num_examples=n,
    )


def fedavg(arrays):  # type: ignore[no-untyped-def]
    return {k: np.mean(np.stack([a[k] for a in arrays]), axis=0) for k in arrays[0]}


label_sets = st.lists(st.sampled_from(CHEXPERT_13), min_size=1, max_size=6, unique=True)


@settings(max_examples=40, deadline=None)
@given(labels=label_sets, k=st.integers(1, 6), seed=st.integers(0, 10_000))
def test_identical_label_sets_equal_plain_fedavg_bitwise(labels, k, seed) -> None:  # type: ignore[no-untyped-def]
    ups = [update(f"n{i}", labels, seed + i) for i in range(k)]
    out = aggregate(ups).state
    order = out.labels.indices(ups[0].labels)
    expected_shared = fedavg([u.shared for u in ups])
    expected_task = fedavg([u.task for u in ups])
    for key in expected_shared:
        assert np.array_equal(out.shared[key], expected_shared[key])
    for key in expected_task:
        assert np.array_equal(out.task[key][order], expected_task[key])


@settings(max_examples=40, deadline=None)
@given(
    sets=st.lists(label_sets, min_size=1, max_size=5),
    seed=st.integers(0, 10_000),
    perm_seed=st.integers(0, 1000),
)
def test_node_order_does_not_matter(sets, seed, perm_seed) -> None:  # type: ignore[no-untyped-def]
    ups = [update(f"n{i}", s, seed + i) for i, s in enumerate(sets)]
    shuffled = [ups[i] for i in np.random.default_rng(perm_seed).permutation(len(ups))]
    a, b = aggregate(ups).state, aggregate(shuffled).state
    assert a.labels == b.labels
    for key in a.task:
        assert np.array_equal(a.task[key], b.task[key])
    for key in a.shared:
        assert np.array_equal(a.shared[key], b.shared[key])


@settings(max_examples=40, deadline=None)
@given(sets=st.lists(label_sets, min_size=1, max_size=5), seed=st.integers(0, 10_000))
def test_each_label_is_the_mean_over_the_nodes_that_have_it(sets, seed) -> None:  # type: ignore[no-untyped-def]
    ups = [update(f"n{i}", s, seed + i) for i, s in enumerate(sets)]
    result = aggregate(ups)
    for name in result.state.labels:
        rows = [u.task["weight"][u.labels.index(name)] for u in ups if name in u.labels]
        got = result.state.task["weight"][result.state.labels.index(name)]
        assert result.contributors[name] == len(rows)
        if len(rows) == 1:
            assert np.array_equal(got, rows[0])  # unique labels are copied exactly
        else:
            assert np.allclose(got, np.mean(rows, axis=0), rtol=0, atol=1e-12)


def test_union_and_node_round_trip() -> None:
    a = update("a", ["Edema", "Cardiomegaly"], 1)
    b = update("b", ["Pneumonia", "Edema"], 2)
    state = aggregate([a, b]).state
    assert list(state.labels) == ["Cardiomegaly", "Edema", "Pneumonia"]
    shared, task = node_arrays(state, b.labels)
    assert task["weight"].shape == (2, H)
    assert np.array_equal(task["weight"][0], state.task["weight"][2])  # Pneumonia, b's own order
    # A node whose update equals its view changes nothing: node -> global -> node is stable.
    again = aggregate(
        [
            NodeUpdate("a", a.labels, *node_arrays(state, a.labels)),
            NodeUpdate("b", b.labels, shared, task),
        ],
        state,
    ).state
    for key in state.task:
        assert np.allclose(again.task[key], state.task[key], rtol=0, atol=1e-15)


def test_aliases_merge_into_one_class() -> None:
    a = update("nih", LabelSpace.of(["Effusion", "Pleural_Thickening"]), 1)
    b = update("chexpert", LabelSpace.of(["Pleural Effusion"]), 2)
    result = aggregate([a, b])
    assert list(result.state.labels) == ["Pleural Effusion", "Pleural Thickening"]
    assert result.contributors["Pleural Effusion"] == 2


def test_raw_label_lists_are_canonicalised() -> None:
    a = update("a", ["Effusion"], 1)
    raw = NodeUpdate("b", ["effusion"], a.shared, a.task)
    assert aggregate([a, raw]).contributors == {"Pleural Effusion": 2}


def test_absent_labels_keep_previous_weights() -> None:
    first = aggregate([update("a", ["Edema"], 1), update("b", ["Fracture"], 2)]).state
    second = aggregate([update("a", ["Edema"], 3)], first).state
    fracture = first.labels.index("Fracture")
    assert np.array_equal(
        second.task["weight"][second.labels.index("Fracture")], first.task["weight"][fracture]
    )
    assert list(second.labels) == ["Edema", "Fracture"]


def test_sample_weighting() -> None:
    a, b = update("a", ["Edema"], 1, n=3), update("b", ["Edema"], 2, n=1)
    out = aggregate([a, b], weighting="samples").state
    assert np.allclose(out.shared["0.bias"], 0.75 * a.shared["0.bias"] + 0.25 * b.shared["0.bias"])
    assert np.allclose(out.task["bias"], 0.75 * a.task["bias"] + 0.25 * b.task["bias"])


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (
            lambda u: NodeUpdate(
                u.node_id, u.labels, {**u.shared, "0.bias": np.full(H, np.nan)}, u.task
            ),
            "NaN or Inf",
        ),
        (
            lambda u: NodeUpdate(
                u.node_id, u.labels, u.shared, {**u.task, "bias": np.array([np.inf])}
            ),
            "NaN or Inf",
        ),
        (
            lambda u: NodeUpdate(
                u.node_id, u.labels, {**u.shared, "0.weight": np.zeros((H, 5))}, u.task
            ),
            "keys/shapes",
        ),
        (
            lambda u: NodeUpdate(u.node_id, u.labels, {**u.shared, "extra": np.zeros(2)}, u.task),
            "keys/shapes",
        ),
        (
            lambda u: NodeUpdate(u.node_id, u.labels, u.shared, {**u.task, "bias": np.zeros(3)}),
            "3 rows for 1 labels",
        ),
        (
            lambda u: NodeUpdate(u.node_id, ["Effusion", "Pleural Effusion"], u.shared, u.task),
            "duplicate label",
        ),
    ],
)
def test_invalid_updates_name_the_node_or_are_dropped(mutate, reason) -> None:  # type: ignore[no-untyped-def]
    good = [update("a", ["Edema"], 1), update("b", ["Edema"], 2)]
    bad = mutate(update("bad", ["Edema"], 3))
    with pytest.raises(InvalidUpdateError, match=f"node 'bad': .*{reason}"):
        aggregate([*good, bad])
    result = aggregate([*good, bad], on_invalid="drop")
    assert result.accepted == ["a", "b"] and reason.split()[0] in result.rejected["bad"]
    expected = fedavg([u.shared for u in good])
    assert np.array_equal(result.state.shared["0.weight"], expected["0.weight"])


def test_previous_state_is_the_shape_reference() -> None:
    prev = aggregate([update("a", ["Edema"], 1)]).state
    wrong = NodeUpdate(
        "x",
        ["Edema"],
        {"0.weight": np.zeros((H, 5)), "0.bias": np.zeros(H)},
        {"weight": np.zeros((1, H)), "bias": np.zeros(1)},
    )
    with pytest.raises(InvalidUpdateError, match="node 'x'"):
        aggregate([wrong], prev)
    assert isinstance(prev, GlobalState)


def test_server_momentum_accumulates_the_shared_block_and_keeps_the_task_rows() -> None:
    labels = LabelSpace(("Edema",))

    def state(w: float, row: float) -> GlobalState:
        return GlobalState(
            labels, {"w": np.full(2, w, np.float32)}, {"weight": np.full((1, 2), row)}
        )

    momentum = ServerMomentum(ServerOptions(server_momentum=0.5))
    first = momentum.apply(state(0.0, 0.0), state(1.0, 3.0))  # velocity 1
    np.testing.assert_allclose(first.shared["w"], 1.0)
    second = momentum.apply(first, state(2.0, 4.0))  # velocity 0.5 * 1 + 1 = 1.5
    np.testing.assert_allclose(second.shared["w"], 2.5)
    np.testing.assert_array_equal(second.task["weight"], 4.0)  # the merged rows, untouched
    assert second.shared["w"].dtype == np.float32
    plain = state(2.0, 4.0)
    assert ServerMomentum(ServerOptions()).apply(first, plain) is plain  # the papers' merge
    with pytest.raises(ValueError, match="momentum"):
        ServerOptions(server_momentum=1.0)


@pytest.mark.parametrize("count", [float("nan"), float("inf"), 0])
def test_sample_weighting_refuses_counts_that_are_not_finite_and_positive(count: float) -> None:
    good = update("a", ["Edema"], 0, n=10)
    bad = replace(update("b", ["Edema"], 1), num_examples=count)
    result = aggregate([good, bad], weighting="samples", on_invalid="drop")
    assert "num_examples" in result.rejected["b"] and result.accepted == ["a"]
    assert all(np.isfinite(v).all() for v in result.state.shared.values())


def test_mixed_precision_never_downcasts_and_bad_options_are_refused() -> None:
    half = update("a", ["Edema"], 0, dtype=np.float16)
    single = update("b", ["Edema"], 1, dtype=np.float32)
    result = aggregate([half, single])
    assert all(
        v.dtype == np.float32 for v in (*result.state.shared.values(), *result.state.task.values())
    )
    with pytest.raises(ValueError, match="on_invalid"):
        aggregate([half, single], on_invalid="skip")  # type: ignore[arg-type]


def test_a_tie_in_array_shapes_is_not_decided_by_list_order() -> None:
    a = update("a", ["Edema"], 0)
    b = update("b", ["Edema"], 1)
    wider = {k: np.zeros((v.shape[0] + 1, *v.shape[1:])) for k, v in b.shared.items()}
    b = replace(b, shared=wider)
    for order in ([a, b], [b, a]):
        with pytest.raises(ValueError, match="no majority"):
            aggregate(order, on_invalid="drop")
    reference = GlobalState(LabelSpace.of(["Edema"]), a.shared, a.task)
    assert aggregate([b, a], reference, on_invalid="drop").accepted == ["a"]
