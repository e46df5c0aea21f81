"""Real Flower processes on 127.0.0.1: a SuperLink, one SuperNode per hospital, ``flwr run``.

Bounded in time (every process is killed at the end); ~6 s per message exchange, so the runs are
short. The in-process tests (``test_flower.py``) cover the same code's corner cases.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")

from reportfed.flower.identity import generate_node_keys
from reportfed.flower.server_app import HISTORY_FILE, MODEL_FILE
from reportfed.flower.tls import generate_certificates
from reportfed.labeler import ReportLabeler
from reportfed.pages.run_report import REPORT_FILE
from tests.loopback import LoopbackFederation

from .browser import render
from .flower_nodes import UNION, assert_same, engine_state, write_node_tables

#: real SuperLink and SuperNode processes, minutes each
pytestmark = pytest.mark.usefixtures("processes")  # every test here: real processes, slow

RUN = {"reports.hidden": "32,16", "reports.seed": 0, "evaluate-every": 0, "min-nodes": 3,
       "round-timeout": 45.0}  # fmt: skip


def test_registered_hospitals_over_tls_refuse_an_intruder_and_resume_under_secure_aggregation(
    tables: dict[str, Path],
    embeddings_cache: Path,
    tmp_path: Path,
) -> None:
    certs = generate_certificates(tmp_path / "certs")
    out = tmp_path / "server"
    run = {**RUN, "granularity": "report", "out": str(out)}  # the killed-node test: sentences
    # the in-process engine first: it embeds the tables into the shared cache, so the nodes read
    # the vectors it trained on (bf16 vectors move in their last bits with the texts batched
    # together, and this test alone would otherwise compare two embeddings of each report)
    expected = {r: engine_state(tables, embeddings_cache, "abc", r, "report") for r in (2, 3)}
    with LoopbackFederation(tmp_path, certificates=certs) as cluster:
        for name in "abc":  # each with a key registered at the server
            cluster.add_node(name, tables[name], **{"cache-dir": str(embeddings_cache)})
        # a process holding the CA certificate and a key of its own, never registered
        intruder = generate_node_keys(tmp_path / "intruder", "x")
        cluster.add_node(
            "x", tables["a"], key=intruder, admitted=False, **{"cache-dir": str(embeddings_cache)}
        )
        cluster.run({**run, "reports.rounds": 2, "min-nodes": 3})
        assert json.loads((out / HISTORY_FILE).read_text())[-1]["round"] == 2
        two = ReportLabeler.load(out / MODEL_FILE, progress=False)
        assert_same(two.state_, expected[2])
        # a new server run resumes at round 3, under secure aggregation (SecAgg+ across processes)
        cluster.run({**run, "reports.rounds": 3, "secure-aggregation": True})
        assert "Secure aggregation completed" in cluster.log("superlink") + (
            tmp_path / "flwr-run.log"
        ).read_text(errors="replace")
        refusals = cluster.log("superlink").count("No SuperNode found with the given public key")
        assert refusals >= 1 and cluster.procs["node-x"].poll() not in (None, 0)
        assert "Failed to activate SuperNode" in cluster.log("node-x")
    model = ReportLabeler.load(out / MODEL_FILE, progress=False)
    assert list(model.classes_) == UNION and model.granularity_ == "report"
    assert model.provenance_["federation"]["round"] == 3
    # round 3 under SecAgg+: its rounding (1.5e-8 a weight, tests/test_secure.py) is within the
    # engines' tolerance
    assert_same(model.state_, expected[3])
    history = json.loads((out / HISTORY_FILE).read_text())
    assert [e["round"] for e in history] == [1, 2, 3]
    assert all(e["accepted"] == ["a", "b", "c"] for e in history)
    assert history[-1]["evaluation"]["macro-auroc"] > 0.5


def test_a_node_killed_in_round_two_and_a_poisoned_node(
    tables: dict[str, Path],
    embeddings_cache: Path,
    tmp_path: Path,
) -> None:
    extra = write_node_tables(tmp_path, rows=60, labels={"d": ["Cardiomegaly", "Edema"]})
    out = tmp_path / "server"
    with LoopbackFederation(tmp_path) as cluster:
        for name in "abc":
            cluster.add_node(name, tables[name], **{"cache-dir": str(embeddings_cache)})
        cluster.add_node("d", extra["d"], lr=1e30, **{"cache-dir": str(embeddings_cache)})
        finished = threading.Event()

        def kill_c_after_round_one() -> None:
            while not finished.is_set() and not (out / HISTORY_FILE).exists():
                time.sleep(0.2)
            cluster.kill_node("c")

        killer = threading.Thread(target=kill_c_after_round_one, daemon=True)
        killer.start()
        try:
            cluster.run(
                {**RUN, "reports.rounds": 2, "out": str(out), "min-nodes": 2, "round-timeout": 60.0}
            )
        finally:
            finished.set()
            killer.join()
    history = json.loads((out / HISTORY_FILE).read_text())
    assert [e["round"] for e in history] == [1, 2]
    assert history[0]["accepted"] == ["a", "b", "c"]
    assert all("NaN or Inf" in e["rejected"]["d"] for e in history)
    assert history[1]["accepted"] == ["a", "b"]
    assert history[1]["failed"]["c"] in ("no reply within the round timeout", "not connected")
    model = ReportLabeler.load(out / MODEL_FILE, progress=False)
    assert {"Pneumothorax", "Support Devices"} <= set(model.classes_)  # c's labels stay
    assert all(np.isfinite(v).all() for v in model.state_.task.values())


def test_a_node_whose_table_disappears_is_named_lost_with_its_labels(
    tables: dict[str, Path],
    embeddings_cache: Path,
    tmp_path: Path,
) -> None:
    """Node b's table is deleted after round 1: b answers round 2 with the reason in one log
    line (no traceback), and the round's history, the model's provenance and the closing
    summary name b as lost since round 2, with the labels no other node holds."""
    import shutil

    from reportfed.text.model_file import read_model

    b = tmp_path / "b.csv"
    shutil.copy(tables["b"], b)
    out = tmp_path / "server"
    with LoopbackFederation(tmp_path) as cluster:
        cluster.add_node("a", tables["a"], **{"cache-dir": str(embeddings_cache)})
        cluster.add_node("b", b, **{"cache-dir": str(embeddings_cache)})
        finished = threading.Event()

        def delete_b_after_round_one() -> None:
            while not finished.is_set() and not (out / HISTORY_FILE).exists():
                time.sleep(0.2)
            b.unlink()

        deleter = threading.Thread(target=delete_b_after_round_one, daemon=True)
        deleter.start()
        try:
            # without reading (on by default: a would read b's labels and keep them learning)
            cluster.run(
                {**RUN, "granularity": "report", "reports.rounds": 2, "reports.read": False,
                 "out": str(out), "min-nodes": 1, "round-timeout": 60.0}
            )  # fmt: skip
        finally:
            finished.set()
            deleter.join()
        node_log = cluster.log("node-b")
    history = json.loads((out / HISTORY_FILE).read_text())
    assert history[0]["accepted"] == ["a", "b"] and history[1]["accepted"] == ["a"]
    # the server learns the file's name, never where it lies on the node's disk
    assert history[1]["failed"]["b"] == f"node error: .../{b.name}: no such file"
    lost = read_model(out / MODEL_FILE).provenance["federation"]["lost"]
    assert lost == {
        "b": {
            "since-round": 2,
            "reason": history[1]["failed"]["b"],
            "labels-untrained": ["Lung Opacity", "Edema"],
        }
    }
    assert "this node cannot answer train" in node_log and "Traceback" not in node_log
    # the run report, in a real browser: plots drawn, b named lost, no console message
    dom, console = render(out / REPORT_FILE, tmp_path / "report.png")
    assert console == []
    assert dom.count("<svg") == 3 and dom.count("<polyline") >= 1
    assert "lost from round 2" in dom and "no such file" in dom


def test_a_taken_name_and_an_unregistered_key_are_refused_in_one_line(
    tmp_path: Path, capsys, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Real processes: ``federation register`` refuses a name the server already has, and a
    node whose key the server never registered ends in one line saying so (exit status 1), its
    Flower processes stopped with it."""
    import subprocess
    import sys

    from reportfed.cli import main
    from reportfed.flower.processes import free_port

    certs = generate_certificates(tmp_path / "certs")
    data = tmp_path / "site.csv"
    data.write_text("Reports,Edema\nMild edema.,1\nNo edema.,0\nClear lungs.,0\n")
    with LoopbackFederation(tmp_path, certificates=certs) as cluster:
        cluster.register("hospital_a")
        other = generate_node_keys(tmp_path / "other", "hospital_a")
        ca = ["--root-certificates", str(certs.ca)]
        register = ["federation", "register", str(other.public), "--superlink", cluster.address]
        assert main([*register, *ca]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1] == (
            "reportfed: error: a node named 'hospital_a' is already registered (node "
            f"{err[-1].split('(node ')[1].split(')')[0]}): give this hospital another --name"
        )
        assert main([*register, "--name", "hospital_b", *ca]) == 0  # under its own name
        assert "registered 'hospital_b'" in capsys.readouterr().err

        stranger = generate_node_keys(tmp_path / "stranger", "hospital_x")
        port = free_port()
        node = subprocess.run(
            [sys.executable, "-m", "reportfed", "federation", "node", "--superlink",
             cluster.address, *ca, "--key", str(stranger.private), "--data", str(data),
             "--port", str(port)],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert node.returncode == 1
        assert node.stderr.strip().splitlines()[-1] == (
            f"reportfed: error: the server at {cluster.address} did not activate this node's key "
            f"{stranger.private}: either it is not registered (ask its operator to run "
            "`reportfed federation register hospital_x.pub --name NAME` with this hospital's "
            "public key) or a node with this key is online already (another `federation node` "
            "with it, or one stopped moments ago: the server forgets it after its heartbeat "
            "lapses, then start again)"
        )
        left = subprocess.run(["pgrep", "-f", f"127.0.0.1:{port}"], capture_output=True)
        assert left.stdout == b"", "a Flower process of the node outlived it"
