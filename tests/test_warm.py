"""A node's warm process (reportfed.flower.warm) answers as the ClientApp's own process does, fails
in one line when the node's table is gone, and stops with the SuperNode's process group."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")

ROOT = Path(__file__).resolve().parents[1]


def _warm_pids() -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"reportfed.flower.warm" in cmdline:
                pids.add(int(entry.name))
    return pids


def serve_as_a_supernode(table: str, cache: str) -> None:
    """What the test's child process does, as a SuperNode's ClientApps would: ask each kind of
    message of the warm process and of this process, print whether they agree, the warm
    process's id, and what the warm process answers once the table is gone."""
    from reportfed.core.errors import ReportfedError
    from reportfed.core.labels import LabelSpace
    from reportfed.flower.node_service import IN_PROCESS, Request, answer
    from reportfed.reports.node import initial_state

    from .flower_nodes import CONFIG, run_config

    run = run_config(rounds=3, hidden="32,16")
    node = {"data": table, "name": "a", "cache-dir": cache}
    before = _warm_pids()
    found = {}
    for kind in ("query", "train", "evaluate"):
        state = initial_state(384, LabelSpace.of(["Cardiomegaly", "Edema"]), CONFIG)
        meta = {"round": 1, "node-index": 0, "evaluate": True}
        args = (run, meta, None if kind == "query" else state)
        warm, own = (
            answer(Request(kind, {**node, "warm": True}, *args)),
            IN_PROCESS.answer(Request(kind, node, *args)),
        )
        same = warm.description == own.description and json.dumps(warm.evaluation) == json.dumps(
            own.evaluation
        )
        if own.update is not None:
            assert warm.update is not None
            pairs = [(warm.update.shared, own.update.shared), (warm.update.task, own.update.task)]
            same &= all(np.array_equal(w[k], o[k]) for w, o in pairs for k in o)
            same &= warm.metrics == own.metrics
        found[kind] = bool(same)
    found["pid"] = sorted(_warm_pids() - before)
    Path(table).unlink()
    try:
        answer(Request("train", {**node, "warm": True}, run, {"round": 2, "node-index": 0}, state))
    except ReportfedError as exc:
        found["gone"] = str(exc)
    print(json.dumps(found))


def test_the_warm_process_answers_as_the_clientapp_and_stops_with_the_node(
    processes: None, tmp_path, iu_archive
) -> None:  # type: ignore[no-untyped-def]
    from .flower_nodes import write_node_tables

    table = write_node_tables(tmp_path, rows=60)["a"]
    code = (
        "import sys; from tests.test_warm import serve_as_a_supernode as s; "
        "s(sys.argv[1], sys.argv[2])"
    )
    log = tmp_path / "child.log"  # a file: the warm process inherits the child's output
    with open(log, "w") as output:
        done = subprocess.run(
            [sys.executable, "-c", code, str(table), str(tmp_path / "cache")],
            cwd=ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=600,
            start_new_session=True,  # the child leads its group, as a SuperNode does
        )
    text = log.read_text()
    assert done.returncode == 0, text[-3000:]
    found = json.loads(text.strip().splitlines()[-1])
    assert found["query"] and found["train"] and found["evaluate"], found
    assert found["gone"] == f"{table}: no such file"
    assert len(found["pid"]) == 1
    pid = found["pid"][0]
    deadline = time.monotonic() + 30
    while pid in _warm_pids() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert pid not in _warm_pids(), "the warm process outlived its group's leader"
