"""The Flower strategy, ClientApp and ServerApp, driven in-process through ``DirectGrid``.

Same code as the deployment (``test_flower_deployment.py``), without the process start-up, so
faults, joining and growing label sets are checked in seconds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")

from flwr.app import Array, ArrayRecord, Message

from reportfed.core import schema
from reportfed.core.aggregation import Arrays, GlobalState
from reportfed.core.config import FederationConfig
from reportfed.core.labels import LabelSpace, canonical
from reportfed.embed.weights import declared_space, resolve_model_path
from reportfed.flower import client_app, server_app
from reportfed.flower.exchange import run_on_grid
from reportfed.flower.strategy import SurgicalAggregation
from reportfed.flower.wire import ARRAYS, config_record
from reportfed.labeler import ReportLabeler
from reportfed.reports.node import initial_state
from reportfed.text.calibration import IDENTITY
from reportfed.text.model import SKIP

from .direct_grid import DirectGrid
from .flower_nodes import CONFIG, NODE_LABELS, UNION, assert_same, engine_state, run_config

FLOWER = {"hidden": "32,16", "seed": 0, "evaluate-every": 0}
#: the vector space the run declares (its default embedder's)
MINILM = declared_space("minilm")


def grid_with(tables: dict[str, Path], cache: Path, names: str = "abc", **run: Any) -> DirectGrid:
    grid = DirectGrid(client_app.app, run_config(**{**FLOWER, **run}))
    for k, name in enumerate(names):
        grid.add_node(100 + k, {"name": name, "data": str(tables[name]), "cache-dir": str(cache)})
    return grid


def init_fn(config: FederationConfig) -> Callable[[int, LabelSpace], tuple[Arrays, Arrays]]:
    def init(dim: int, labels: LabelSpace) -> tuple[Arrays, Arrays]:
        state = initial_state(dim, labels, config)
        return state.shared, state.task

    return init


def run_strategy(
    grid: DirectGrid,
    rounds: int,
    *,
    min_nodes: int = 2,
    between: Any = None,
    config: FederationConfig = CONFIG,
    evaluate_every: int = 0,
) -> tuple[SurgicalAggregation, list[GlobalState]]:
    """Run the strategy; ``between(round, strategy, grid)`` runs after each round. The grid
    answers at once, so the round timeout only bounds the wait for a dead node."""
    strategy = SurgicalAggregation(
        init_fn(config),
        fingerprint=MINILM[0],
        dim=MINILM[1],
        min_nodes=min_nodes,
        evaluate_every=evaluate_every,
        join_timeout=5,
        options=config,
    )
    states: list[GlobalState] = []

    def after(round_: int, arrays: ArrayRecord, traffic: Any) -> None:
        states.append(strategy.global_state(arrays))
        if between is not None:
            between(round_, strategy, grid)

    initial = strategy.register(grid, rounds)
    run_on_grid(
        strategy, grid, initial, range(1, rounds + 1), timeout=1,
        config=config_record(config), after_round=after,
    )  # fmt: skip
    return strategy, states


def test_flower_strategy_equals_in_process_engine_and_sends_only_own_rows(
    tables: dict[str, Path], embeddings_cache: Path
) -> None:
    grid = grid_with(tables, embeddings_cache)
    # the paper's method: without knowledge transfer and reading (both on by default) a node
    # gets only its rows
    paper = replace(CONFIG, distill=0.0, read=False)
    strategy, states = run_strategy(grid, 3, config=paper, evaluate_every=1)
    assert list(states[-1].labels) == UNION  # "Effusion" merged into "Pleural Effusion"
    expected = engine_state(tables, embeddings_cache, "abc", 3, distill=0.0, read=False)
    assert_same(states[-1], expected)
    train = [m for m in grid.sent if m.metadata.message_type == "train"]
    assert len(train) == 9
    # one exchange per round: each model is evaluated with the next round's train message,
    # the final one by the only evaluate messages
    assert [bool(m.content["meta"]["evaluate"]) for m in train] == [False] * 3 + [True] * 6
    evaluate = [m for m in grid.sent if m.metadata.message_type == "evaluate"]
    assert [m.content["meta"]["round"] for m in evaluate] == [3, 3, 3]
    evaluations = [e["evaluation"]["macro-auroc"] for e in strategy.history.entries]
    assert len(evaluations) == 3 and all(0 <= v <= 1 for v in evaluations)
    assert len(set(evaluations)) == 3  # three models, three evaluations
    for msg in train:
        name = strategy.registry.members[msg.metadata.dst_node_id].name
        labels = list(msg.content["meta"]["labels"])
        assert labels == list(strategy.registry.members[msg.metadata.dst_node_id].labels), name
        assert msg.content[ARRAYS]["task.weight"].numpy().shape[0] == 3
    assert [e["accepted"] for e in strategy.history.entries] == [["a", "b", "c"]] * 3


def test_knowledge_transfer_sends_every_row_and_matches_the_engine(
    tables: dict[str, Path], embeddings_cache: Path
) -> None:
    config = replace(CONFIG, distill=0.5, read=False)
    grid = grid_with(tables, embeddings_cache)
    strategy, states = run_strategy(grid, 2, config=config)
    expected = engine_state(tables, embeddings_cache, "abc", 2, distill=0.5, read=False)
    assert_same(states[-1], expected)
    for msg in (m for m in grid.sent if m.metadata.message_type == "train"):
        assert msg.content[ARRAYS]["task.weight"].numpy().shape[0] == len(UNION)
    for reply_labels in (strategy.registry.members[n].labels for n in strategy.registry.members):
        assert len(reply_labels) == 3  # each node still claims only its own rows


def test_reading_nodes_train_every_label_they_read_and_match_the_engine(
    tables: dict[str, Path], embeddings_cache: Path
) -> None:
    """With ``read``, a node learns the federation's labels in its first round and trains those
    it lacks as the text rules read its reports: the in-process engine's model, bit for bit
    within float tolerance, and every node now sends every label's rows."""
    config = replace(CONFIG, read=True)
    grid = grid_with(tables, embeddings_cache)
    strategy, states = run_strategy(grid, 2, config=config)
    assert_same(states[-1], engine_state(tables, embeddings_cache, "abc", 2, read=True))
    # reading changes the model: the same run without it differs
    plain = engine_state(tables, embeddings_cache, "abc", 2, read=False)
    assert not np.allclose(states[-1].task["weight"], plain.task["weight"], atol=1e-3)
    # every label of the union is trained: those a node annotates, and those it reads
    for member in strategy.registry.members.values():
        assert sorted(member.labels) == sorted(canonical(n) for n in NODE_LABELS[member.name])
        assert sorted([*member.labels, *member.reads]) == sorted(UNION), member.name


def test_options_beyond_the_paper_travel_to_the_nodes_and_match_the_engine(
    tables: dict[str, Path], embeddings_cache: Path
) -> None:
    options = {
        "skip": True,
        "balance": True,
        "weight_decay": 1e-2,
        "server_momentum": 0.9,
        "prox": 0.5,
    }
    config = replace(CONFIG, **options)
    assert schema.decode(FederationConfig, config_record(config)) == config  # every field travels
    grid = grid_with(tables, embeddings_cache)
    _, states = run_strategy(grid, 2, config=config)
    assert_same(states[-1], engine_state(tables, embeddings_cache, "abc", 2, **options))
    assert states[-1].task[SKIP].shape[0] == len(UNION)  # the skip rows are merged per label


def test_poisoned_and_wrong_shape_updates_are_rejected_and_the_run_goes_on(
    tables: dict[str, Path], embeddings_cache: Path
) -> None:
    grid = grid_with(tables, embeddings_cache)
    grid.nodes[102].node_config["lr"] = 1e30  # node c's training diverges to NaN/Inf

    def wrong_shape(reply: Message) -> Message:
        if reply.metadata.message_type == "train":
            arrays = reply.content[ARRAYS]
            arrays["shared.0.weight"] = Array(np.zeros((3, 3), dtype=np.float32))
        return reply

    grid.tamper[101] = wrong_shape  # node b
    strategy, states = run_strategy(grid, 2, min_nodes=1)
    for entry in strategy.history.entries:
        assert entry["accepted"] == ["a"]
        assert "NaN or Inf" in entry["rejected"]["c"]
        assert "differ from the federation's" in entry["rejected"]["b"]
    assert all(np.isfinite(v).all() for v in states[-1].task.values())


def test_dead_node_keeps_its_labels_and_min_nodes_holds_the_model(
    tables: dict[str, Path], embeddings_cache: Path
) -> None:
    grid = grid_with(tables, embeddings_cache)

    def kill_c(round_: int, strategy: SurgicalAggregation, grid: DirectGrid) -> None:
        if round_ == 1:
            grid.dead.add(102)

    surgical = replace(CONFIG, read=False)  # reading, on by default, would have a and b hold them
    strategy, states = run_strategy(grid, 3, between=kill_c, config=surgical)
    only_c = states[0].labels.indices(["Pneumothorax", "Support Devices"])
    for key in states[0].task:
        np.testing.assert_array_equal(states[2].task[key][only_c], states[0].task[key][only_c])
        assert not np.array_equal(states[2].task[key][:1], states[0].task[key][:1])
    assert strategy.history.entries[1]["accepted"] == ["a", "b"]
    assert strategy.history.entries[1]["failed"] == {"c": "no reply within the round timeout"}

    grid = grid_with(tables, embeddings_cache)
    strategy, states = run_strategy(grid, 2, min_nodes=3, between=kill_c, config=surgical)
    assert strategy.history.entries[1]["aggregated"] is False
    assert_same(states[1], states[0])


def test_a_node_refuses_a_run_that_declares_another_embedder_naming_both(
    tables: dict[str, Path], embeddings_cache: Path, tmp_path: Path
) -> None:
    """What a node embeds with is its own setting: a run that declares another embedder is
    refused by the node, in one line that names both and none of the node's paths, and the run
    goes on with the others (the server's own check, of the fingerprint a node reports, is
    in ``test_hostile_member.py``)."""
    small = tmp_path / "d.csv"
    pd.read_csv(tables["a"]).head(20).to_csv(small, index=False)
    grid = grid_with(tables, embeddings_cache, names="ab")
    grid.add_node(
        200,
        {"name": "d", "data": str(small), "cache-dir": str(embeddings_cache),
         "embedder": "hf:" + resolve_model_path("minilm")},
    )  # fmt: skip
    strategy, _ = run_strategy(grid, 1)
    refusals = [r.error.reason for r in grid.received if r.metadata.src_node_id == 200]
    assert refusals and all(r == refusals[0] for r in refusals)
    assert refusals[0] == (
        "this node embeds with 'hf:.../model' and the run declares 'minilm': a node embeds only "
        "with its own embedder (federation node --embedder), so it refuses the run"
    )
    assert {m.name for m in strategy.registry.members.values()} == {"a", "b"}


def test_a_node_joins_later_and_a_node_brings_a_new_label(
    tables: dict[str, Path], embeddings_cache: Path, tmp_path: Path
) -> None:
    grown = tmp_path / "b.csv"
    frame = pd.read_csv(tables["b"])
    frame.to_csv(grown, index=False)
    grid = grid_with(tables, embeddings_cache, names="ab")
    grid.nodes[101].node_config["data"] = str(grown)

    def between(round_: int, strategy: SurgicalAggregation, grid: DirectGrid) -> None:
        if round_ == 1:  # node b's hospital starts annotating fractures
            frame.assign(Fracture=(np.arange(len(frame)) % 7 == 0).astype(float)).to_csv(
                grown, index=False
            )
        if round_ == 2:  # node c connects
            grid.add_node(102, {"name": "c", "data": str(tables["c"]),
                                "cache-dir": str(embeddings_cache)})  # fmt: skip

    # a node's labels are what it annotates (reading, on by default, adds those it reads)
    strategy, states = run_strategy(grid, 4, between=between, config=replace(CONFIG, read=False))
    assert "Fracture" not in states[0].labels and "Fracture" in states[1].labels
    assert "Pneumothorax" not in states[1].labels and "Pneumothorax" in states[2].labels
    assert strategy.history.entries[3]["accepted"] == ["a", "b", "c"]
    assert list(strategy.registry.members[101].labels)[-1] == "Fracture"


def test_server_app_saves_each_round_and_resumes_after_a_restart(
    tables: dict[str, Path], embeddings_cache: Path, tmp_path: Path
) -> None:
    from flwr.app import Context, RecordDict

    out = tmp_path / "server"

    def serve(rounds: int) -> None:
        rc = run_config(**FLOWER, rounds=rounds, out=str(out), **{"min-nodes": 3})
        grid = grid_with(tables, embeddings_cache, **{"min-nodes": 3})
        grid.run_config.update(rc)
        context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=rc)
        server_app.app(grid, context)

    serve(2)
    two = ReportLabeler.load(out / server_app.MODEL_FILE, progress=False)
    assert two.provenance_["federation"]["round"] == 2
    serve(3)  # a restarted server continues with round 3 only
    three = ReportLabeler.load(out / server_app.MODEL_FILE, progress=False)
    assert three.provenance_["federation"]["round"] == 3
    assert_same(three.state_, engine_state(tables, embeddings_cache, "abc", 3))
    history = pd.read_json(out / server_app.HISTORY_FILE)
    assert history["round"].tolist() == [1, 2, 3]
    assert set(three.provenance_["federation"]["nodes"]) == {"a", "b", "c"}
    assert (three.thresholds_ != 0.5).sum() >= 4  # Youden thresholds from the nodes' held-out rows
    # each node fits a calibration on its held-out rows; the server averages them per label
    calibrated = (three.calibration_ != np.asarray(IDENTITY)).any(axis=1)
    assert calibrated.sum() >= 4 and np.isfinite(three.calibration_).all()


def test_differential_privacy_clips_and_noises_through_flowers_wrapper(
    tables: dict[str, Path], embeddings_cache: Path, tmp_path: Path
) -> None:
    from flwr.app import Context, RecordDict

    def serve(out: Path, **dp: Any) -> ReportLabeler:
        rc = run_config(**FLOWER, rounds=1, out=str(out), **{"min-nodes": 3}, **dp)
        grid = grid_with(tables, embeddings_cache)
        grid.run_config.update(rc)
        server_app.app(grid, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                                     run_config=rc))  # fmt: skip
        return ReportLabeler.load(out / server_app.MODEL_FILE, progress=False)

    off = {"distill": 0.0, "read": False}  # DP needs both off (refused otherwise)
    plain = serve(tmp_path / "plain", **off)
    private = serve(tmp_path / "dp", **off, **{"dp-noise": 0.5, "dp-clip": 0.1})
    assert list(private.classes_) == list(plain.classes_)
    start = initial_state(384, plain.state_.labels, CONFIG)
    moved = np.linalg.norm(private.state_.shared["0.weight"] - start.shared["0.weight"])
    # Gaussian noise of std noise * clip / nodes on each of the 32 x 384 weights, plus the mean
    # of three node updates each clipped to norm 0.1
    expected = 0.5 * 0.1 / 3 * np.sqrt(32 * 384)
    assert abs(moved - expected) < 0.05 * expected + 0.1
    trained = np.linalg.norm(plain.state_.shared["0.weight"] - start.shared["0.weight"])
    assert trained < expected / 3


def test_a_round_in_which_every_update_is_invalid_leaves_the_model_unchanged(
    tables: dict[str, Path], embeddings_cache: Path
) -> None:
    grid = grid_with(tables, embeddings_cache, names="bc")
    for node in grid.nodes.values():
        node.node_config["lr"] = 1e30  # both nodes diverge to NaN/Inf
    strategy, states = run_strategy(grid, 2, min_nodes=1)
    for entry in strategy.history.entries:
        assert entry["aggregated"] is False and entry["accepted"] == []
        assert set(entry["rejected"]) == {"b", "c"}
        assert all("NaN or Inf" in reason for reason in entry["rejected"].values())
    assert_same(states[1], states[0])


def test_nodes_must_define_a_shared_finding_alike(
    tables: dict[str, Path], embeddings_cache: Path, tmp_path: Path
) -> None:
    """Nodes with a findings file: the server admits those whose definitions agree, excludes
    in one line a node defining a shared finding otherwise, and keeps the definitions for the
    model (its provenance's ``findings``), which the reader then reads in four states."""
    from reportfed.text.findings import Findings, read_findings

    example = Path(__file__).resolve().parents[1] / "examples" / "findings.toml"
    other = tmp_path / "findings.toml"
    other.write_text('[[finding]]\nname = "Hiatal hernia"\nphrases = ["hiatal hernia"]\n')
    grid = grid_with(tables, embeddings_cache)
    for node_id, path in ((100, example), (101, other), (102, example)):
        grid.nodes[node_id].node_config["findings"] = str(path)
    strategy, _ = run_strategy(grid, 1, config=replace(CONFIG, read=True))
    registry = strategy.registry
    assert {m.name for m in registry.members.values()} == {"a", "c"}
    assert registry.excluded[101] == (
        "node 'b' defines the finding 'Hiatal hernia' otherwise than the federation (phrases, "
        "patterns, anatomy, aliases or parent): every site must use one definition"
    )
    record = registry.findings_record()
    assert record is not None
    kept = Findings.from_record(record)
    assert set(kept.findings) == set(read_findings(example).findings)
    assert kept.checksum == read_findings(example).checksum  # the one file the members read
    assert "findings" not in registry.members[100].settings  # kept once, not per node


def test_a_federated_model_labels_the_findings_its_nodes_defined(
    tables: dict[str, Path], embeddings_cache: Path, tmp_path: Path, monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    """End to end through the ServerApp and ClientApp: a node trains the example's findings
    from 200 IU reports it labelled with their rules, beside an IU node whose table carries a
    reader's correction of a hedge; the saved model names the file's checksum and the corrected
    phrasing, and ``reportfed label`` with it reads both findings in four states and the
    phrasing as corrected."""
    from flwr.app import Context, RecordDict

    from reportfed.cli import main
    from reportfed.text.findings import read_findings

    from .flower_nodes import write_findings_site

    example = Path(__file__).resolve().parents[1] / "examples" / "findings.toml"
    site = write_findings_site(tmp_path / "f.csv", example)
    out = tmp_path / "server"
    rc = run_config(**FLOWER, rounds=2, out=str(out), **{"min-nodes": 2})
    corrected = pd.read_csv(tables["a"])
    corrected["Corrected"] = ""
    corrected.loc[len(corrected)] = {"Report Impression": "Bibasilar opacities, likely "
                                     "atelectasis.", "Atelectasis": 1, "Corrected": "Atelectasis"}  # fmt: skip
    corrected.to_csv(tmp_path / "a.csv", index=False)
    grid = grid_with({"a": tmp_path / "a.csv"}, embeddings_cache, names="a")
    grid.add_node(101, {"name": "f", "data": str(site), "cache-dir": str(embeddings_cache),
                        "findings": str(example)})  # fmt: skip
    grid.run_config.update(rc)
    server_app.app(grid, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                                 run_config=rc))  # fmt: skip
    model = out / server_app.MODEL_FILE
    reports = tmp_path / "reports.csv"
    pd.DataFrame({"id": ["h1", "h2", "h3"], "Reports": [
        "Small hiatal hernia. Heart size is normal.",
        "No hiatal hernia. The thoracic aorta is tortuous and calcified.",
        "Possible hiatus hernia. No aortic calcification. Left basilar opacity, likely "
        "atelectasis.",
    ]}).to_csv(reports, index=False)  # fmt: skip
    monkeypatch.setenv("REPORTFED_EMBEDDINGS_CACHE", str(embeddings_cache))
    capsys.readouterr()
    assert main(["label", "--model", str(model), "--reports", str(reports),
                 "--out", str(tmp_path / "labels.csv")]) == 0  # fmt: skip
    checksum = read_findings(example).checksum
    said = capsys.readouterr().err
    assert f"findings defined in a file of SHA-256 {checksum}" in said
    assert "'likely atelectasis' reads Atelectasis affirmed (the rules read uncertain)" in said
    states = pd.read_csv(tmp_path / "labels.csv")
    assert states["Hiatal hernia"].tolist() == [1.0, 0.0, -1.0]
    assert states["Aortic calcification"].tolist()[1:] == [1.0, 0.0]
    assert states["Atelectasis"].tolist()[2] == 1.0  # read as the reader corrected it
    # label --help with that model: how it was trained, its findings' checksum, its corrections
    with pytest.raises(SystemExit) as shown:
        main(["label", "--model", str(model), "--help"])
    assert shown.value.code == 0
    help_text = capsys.readouterr().out
    assert "round 2 of a federation of a, f" in help_text
    assert f"reads findings defined in a file of SHA-256 {checksum}: " in help_text
    assert "reads a corrected phrasing (1 report(s)): 'likely atelectasis' reads" in help_text


def test_malformed_finding_definitions_leave_a_node_out() -> None:
    """A node's handshake is input: definitions that are not what a node sends exclude it in
    one line, instead of stopping the server."""
    from reportfed.core.node import Description
    from reportfed.flower.registry import Registry

    registry = Registry(fingerprint="f", dim=4)
    for node_id, sent in ((1, "not json"), (2, '{"findings": [1]}'), (3, '{"other": []}')):
        described = Description("n", LabelSpace(("Edema",)), "f", 4, 10, {"findings": sent})
        registry._admit(node_id, described)
        assert registry.excluded[node_id].startswith(
            "node 'n' sent malformed finding definitions ("
        )
    for node_id, sent in ((4, "[1]"), (5, '[{"label": "Edema"}]'), (6, json.dumps([{
            "label": "Edema", "phrase": "edema", "cue": "", "read": "affirmed", "state": "x"}]))):  # fmt: skip
        described = Description("n", LabelSpace(("Edema",)), "f", 4, 10, {"corrections": sent})
        registry._admit(node_id, described)
        assert registry.excluded[node_id].startswith("node 'n' sent malformed corrections (")
    assert not registry.members


def test_a_phrasing_two_nodes_correct_otherwise_leaves_the_second_out() -> None:
    """Corrected phrasings are kept for the model from every member; a node that corrects one
    otherwise than a member is left out in one line naming it."""
    from reportfed.core.node import Description
    from reportfed.flower.registry import Registry
    from reportfed.text.corrections import Correction, Corrections

    registry = Registry(fingerprint="f", dim=4)
    for node_id, (name, state) in enumerate(
        (("a", "affirmed"), ("b", "affirmed"), ("c", "negated"))
    ):
        sent = Corrections((Correction("Edema", "edema", "likely", "uncertain", state),)).record()
        described = Description(name, LabelSpace(("Edema",)), "f", 4, 10,
                                {"corrections": json.dumps(sent)})  # fmt: skip
        registry._admit(node_id, described)
    assert {m.name for m in registry.members.values()} == {"a", "b"}
    assert registry.corrections.corrections[0].reports == 2
    assert registry.excluded[2] == (
        "node 'c': 'edema' with cue 'likely' is corrected to negated of Edema here and to "
        "affirmed elsewhere: every site must read a phrasing one way"
    )
