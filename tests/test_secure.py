"""Secure surgical aggregation through Flower's SecAgg+: the real ServerApp and ClientApp driven
in-process (``DirectGrid``); the loopback deployment test runs it across processes.

Quantization: SecAgg+ rounds every value of a node's change to 30 bits over +-8 (no clip norm),
stochastically, at most 2 x 8 / 2**30 = 1.5e-8 a value, and the node hands it float64 changes
(Flower quantizes in its input's dtype: in float32 the levels round to 24 bits, 9.5e-7 at range
8). One secure round's weights lie within that step of the plain round's, plus the rounding of
the merged weights to float32 (measured 1.5e-8). Later rounds train from those weights, and Adam
magnifies the difference on weights whose gradient is near zero.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import Context, Message, RecordDict

from reportfed.cli import main
from reportfed.core.aggregation import Sums
from reportfed.core.server import SurgicalServer
from reportfed.flower import client_app, server_app
from reportfed.labeler import ReportLabeler

from .direct_grid import DirectGrid, Tamper
from .flower_nodes import UNION, run_config

FLOWER = {"hidden": "32,16", "seed": 0, "evaluate-every": 0, "resume": False}
#: how far one secure round's weights may lie from the plain round's: SecAgg+'s step at range 8,
#: and a unit in the last place of the weight where the two means round to different floats
ONE_ROUND = {"atol": 2 * 8 / 2**30, "rtol": 2**-23}
TEXTS = ["Heart is enlarged.", "No pleural effusion.", "Small left effusion.", "Normal chest."]


def serve(
    tables: dict[str, Path],
    cache: Path,
    out: Path,
    names: str = "abc",
    tamper: dict[str, Tamper] | None = None,
    **run: Any,
) -> tuple[ReportLabeler, DirectGrid]:
    rc = run_config(**{**FLOWER, "rounds": 3, "out": str(out), "min-nodes": len(names), **run})
    grid = DirectGrid(client_app.app, rc)
    for k, name in enumerate(names):
        grid.add_node(100 + k, {"name": name, "data": str(tables[name]), "cache-dir": str(cache)})
        if tamper and name in tamper:
            grid.tamper[100 + k] = tamper[name]
    context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=rc)
    server_app.app(grid, context)
    return ReportLabeler.load(out / server_app.MODEL_FILE, progress=False), grid


def assert_close(a: ReportLabeler, b: ReportLabeler, atol: float, rtol: float = 0.0) -> None:
    assert list(a.classes_) == list(b.classes_)
    for block in ("shared", "task"):
        for key, value in getattr(a.state_, block).items():
            np.testing.assert_allclose(value, getattr(b.state_, block)[key], atol=atol, rtol=rtol)


def history(out: Path) -> list[dict[str, Any]]:
    import json

    return json.loads((out / server_app.HISTORY_FILE).read_text())  # type: ignore[no-any-return]


def test_the_secure_model_equals_the_plain_one_and_the_server_sees_only_the_sum(
    tables: dict[str, Path], embeddings_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain, _ = serve(tables, embeddings_cache, tmp_path / "plain")
    received: list[Any] = []
    step = SurgicalServer.step

    def spy(self: SurgicalServer, updates: Any, nodes: Any = ()) -> Any:
        received.append(updates)
        return step(self, updates, nodes)

    monkeypatch.setattr(SurgicalServer, "step", spy)
    secure, grid = serve(
        tables, embeddings_cache, tmp_path / "secure", **{"secure-aggregation": True}
    )
    assert list(secure.classes_) == UNION
    np.testing.assert_allclose(secure.predict_proba(TEXTS), plain.predict_proba(TEXTS), atol=1e-5)
    # the server's step got the three nodes' sum each round, never one node's update
    assert len(received) == 3 and all(isinstance(r, Sums) and r.weight == 3 for r in received)
    # and no reply carried arrays in the clear: only SecAgg+'s masked integers and metrics
    trains = [r for r in grid.received if r.metadata.message_type == "train"]
    assert len(trains) == 3 * 4 * 3  # rounds x SecAgg+ stages x nodes
    assert all(not any(len(a) for a in r.content.array_records.values()) for r in trains)
    assert [e["accepted"] for e in history(tmp_path / "secure")] == [["a", "b", "c"]] * 3
    # the history counts each node's bytes: SecAgg+ sends the masked vector (8 bytes a value, not
    # 4) and its keys and shares, so a secure round costs a node more than a plain one
    secure_up = [e["bytes"][n]["up"] for e in history(tmp_path / "secure") for n in "abc"]
    plain_up = [e["bytes"][n]["up"] for e in history(tmp_path / "plain") for n in "abc"]
    assert min(secure_up) > max(plain_up) > 0


def test_a_secure_round_equals_the_plain_round_within_secaggs_step(
    tables: dict[str, Path], embeddings_cache: Path, tmp_path: Path
) -> None:
    plain, _ = serve(tables, embeddings_cache, tmp_path / "plain", rounds=1)
    secure, _ = serve(
        tables, embeddings_cache, tmp_path / "secure", rounds=1, **{"secure-aggregation": True}
    )
    assert_close(secure, plain, **ONE_ROUND)
    assert secure.state_.task["weight"].tolist() != plain.state_.task["weight"].tolist()  # rounded


def test_a_secure_round_of_reading_nodes_equals_the_plain_round(
    tables: dict[str, Path], embeddings_cache: Path, tmp_path: Path
) -> None:
    """Reading nodes send rows for labels they did not register: the server counts them among
    each label's holders, so the mean of the masked sums is the plain round's."""
    plain, _ = serve(tables, embeddings_cache, tmp_path / "plain", rounds=1, read=True)
    secure, _ = serve(
        tables, embeddings_cache, tmp_path / "secure", rounds=1, read=True,
        **{"secure-aggregation": True},
    )  # fmt: skip
    assert_close(secure, plain, **ONE_ROUND)


def test_secure_aggregation_with_a_clip_norm_and_server_momentum(
    tables: dict[str, Path], embeddings_cache: Path, tmp_path: Path
) -> None:
    options = {"clip-norm": 0.05, "server-momentum": 0.5, "rounds": 2}
    plain, _ = serve(tables, embeddings_cache, tmp_path / "plain", **options)
    secure, _ = serve(
        tables, embeddings_cache, tmp_path / "secure", **options, **{"secure-aggregation": True}
    )
    np.testing.assert_allclose(secure.predict_proba(TEXTS), plain.predict_proba(TEXTS), atol=1e-5)
    assert_close(secure, plain, atol=1e-3)  # range 0.05: steps of 9.3e-11


def dies_when_masking(grid_holder: list[DirectGrid], node_id: int) -> Tamper:
    """A node that goes dark in SecAgg+'s third stage (it trained; its masked vector never
    arrives), and stays dark."""

    def tamper(reply: Message) -> Message | None:
        configs = reply.content.config_records.get("secaggplus_configs")
        if configs is not None and "masked_params" in configs:
            grid_holder[0].dead.add(node_id)
            return None
        return reply

    return tamper


def test_a_node_that_drops_out_mid_round_does_not_stop_a_secure_run(
    tables: dict[str, Path], embeddings_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grids: list[DirectGrid] = []
    init = DirectGrid.__init__

    def keep(self: DirectGrid, *args: Any) -> None:
        init(self, *args)
        grids.append(self)

    monkeypatch.setattr(DirectGrid, "__init__", keep)
    timeout = {"round-timeout": 2.0, "secure-aggregation": True, "rounds": 2, "min-nodes": 2}
    out = tmp_path / "three"
    model, _ = serve(
        tables, embeddings_cache, out, tamper={"c": dies_when_masking(grids, 102)}, **timeout
    )
    # three nodes, threshold two: SecAgg+ rebuilds c's masks from a's and b's key shares
    for entry in history(out):
        assert entry["aggregated"] and entry["accepted"] == ["a", "b"]
        assert entry["failed"]["c"] == "no masked update (dropped out of SecAgg+)"
    assert list(model.classes_) == UNION
    assert all(np.isfinite(v).all() for v in model.state_.task.values())

    # two nodes, threshold two: below it the workflow halts and the round leaves the model as it was
    grids.clear()
    out = tmp_path / "two"
    serve(
        tables, embeddings_cache, out, "ab", tamper={"b": dies_when_masking(grids, 101)}, **timeout
    )
    assert [e["aggregated"] for e in history(out)] == [False, False]
    assert all(e["accepted"] == [] for e in history(out))


def test_what_secure_aggregation_cannot_do_is_refused_in_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    run = ["federation", "run", "--superlink", "127.0.0.1:1", "--insecure"]
    run += ["--out", str(tmp_path), "--secure-aggregation"]
    for extra, message in [
        (["--weighting", "samples"], "weighting by sample counts needs each node's count"),
        (["--dp-noise", "0.5"], "secure aggregation with dp-noise is not supported"),
        (["--min-nodes", "1"], "secure aggregation needs min-nodes >= 2"),
    ]:
        assert main([*run, *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith("reportfed: error: ") and message in err and err.count("\n") == 1
