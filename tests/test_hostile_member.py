"""One registered member that lies cannot exclude, crash or poison the others.

The real ServerApp and two honest ClientApps run in this process (``DirectGrid``); a third
node's replies are rewritten by a harness before the server reads them, as a member that runs
its own code would send them. Each kind of lie is refused in one line that names the liar, the
honest nodes finish the run, and the model it writes is one ``reportfed label`` reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")

from flwr.app import Array, Context, Message, RecordDict

from reportfed.core.limits import MAX_HANDSHAKE_CHARS
from reportfed.flower import client_app, server_app
from reportfed.flower.wire import ARRAYS, EVALUATION, META, METRICS

from .direct_grid import DirectGrid
from .flower_nodes import run_config

FLOWER = {"hidden": "32,16", "seed": 0, "rounds": 2, "min-nodes": 2, "evaluate-every": 1}
#: the liar's node id and name: a name that sorts before the honest nodes' (the first node
#: admitted used to set the federation's input dimension)
LIAR, LIAR_NAME = 90, "0-liar"


def _on(kind: str, change: Callable[[Message], None]) -> Callable[[Message], Message]:
    """A harness that rewrites the liar's replies to ``kind`` messages with ``change``."""

    def tamper(reply: Message) -> Message:
        if reply.metadata.message_type == kind and not reply.has_error():
            change(reply)
        return reply

    return tamper


def _handshake(key: str, value: object) -> Callable[[Message], Message]:
    def change(reply: Message) -> None:
        reply.content.config_records[META][key] = value  # type: ignore[assignment]

    return _on("query", change)


def _definitions(findings: list[dict[str, object]]) -> Callable[[Message], Message]:
    sent = json.dumps({"checksum": "0" * 64, "findings": findings})
    return _handshake("setting.findings", sent)


def _train(change: Callable[[Message], None]) -> Callable[[Message], Message]:
    return _on("train", change)


def _huge_wrong_shape(reply: Message) -> None:  # 100 MB of float32 in place of a weight
    reply.content[ARRAYS]["shared.0.weight"] = Array(np.zeros((5_000, 5_000), np.float32))


def _nan(reply: Message) -> None:
    arrays = reply.content[ARRAYS]
    key = next(iter(arrays))
    value = arrays[key].numpy().copy()
    value.flat[0] = np.nan
    arrays[key] = Array(value)


def _claims_examples(reply: Message) -> None:
    reply.content.metric_records[METRICS]["num-examples"] = 10**12


def _claims_evaluation(reply: Message) -> None:
    if EVALUATION in reply.content:
        evaluation = reply.content.metric_records[EVALUATION]
        evaluation["n"] = [10**12] * len(list(evaluation["n"]))  # type: ignore[arg-type]
        evaluation["threshold"] = [7.0] * len(list(evaluation["threshold"]))  # type: ignore[arg-type]


def _claims_positives(count: int) -> Callable[[Message], None]:
    """A reply whose evaluation says each threshold rests on ``count`` positives."""

    def tamper(reply: Message) -> None:
        if EVALUATION in reply.content:
            evaluation = reply.content.metric_records[EVALUATION]
            evaluation["threshold-positives"] = [count] * len(list(evaluation["n"]))  # type: ignore[arg-type]

    return tamper


#: each lie, what the server says of it (in its exclusion, rejection or log line)
LIES: dict[str, tuple[Callable[[Message], Message], str]] = {
    "another dimension": (
        _handshake("dim", 385),
        "node '0-liar' says its input dimension is 385, but the run's embedder",
    ),
    "a huge dimension": (
        _handshake("dim", 10**10),
        "malformed query reply (its input dimension must be in [1, 4096], got 10000000000)",
    ),
    "another embedder": (
        _handshake("fingerprint", "openai:https://api.openai.com/v1:text-embedding-3-small"),
        "node '0-liar' embeds with openai:",
    ),
    "a definition of a name alone": (
        _definitions([{"name": "Bochdalek hernia"}]),
        "node '0-liar' sent malformed finding definitions (its definitions, finding 1 "
        "('Bochdalek hernia'): 'Bochdalek hernia' has no phrases (or patterns) naming it)",
    ),
    "a definition that matches everything": (
        _definitions([{"name": "Everything", "patterns": [".{0,}"]}]),
        "'.{0,}' matches everything: it names no finding",
    ),
    "a backreference": (
        _definitions([{"name": "Echo", "patterns": [r"(\w+) \1"]}]),
        "is not a regular expression of RE2's syntax",
    ),
    "a megabyte of settings": (
        _handshake("setting.name-of-a-setting", "x" * MAX_HANDSHAKE_CHARS),
        f"malformed query reply (its settings hold more than {MAX_HANDSHAKE_CHARS} characters)",
    ),
    "a thousand labels": (
        _handshake("labels", [f"Finding {k}" for k in range(1000)]),
        "malformed query reply (labels must be a list of at most 256 names)",
    ),
    "a 100 MB update of the wrong shape": (
        _train(_huge_wrong_shape),
        "differ from the federation's",
    ),
    "a NaN update": (_train(_nan), "NaN or Inf"),
    "a trillion examples": (
        _train(_claims_examples),
        "malformed reply (num-examples must be in [0, 1000000000], got 1000000000000)",
    ),
    "a trillion held-out rows": (
        _train(_claims_evaluation),
        "malformed evaluation from '0-liar': held-out rows outside [0, 1000000000]",
    ),
    "a trillion positives behind a threshold": (
        _train(_claims_positives(10**12)),
        "malformed evaluation from '0-liar': threshold positives outside [0, 1000000000]",
    ),
    "more positives behind a threshold than its rows": (
        _train(_claims_positives(10**8)),
        "malformed evaluation from '0-liar': threshold positives beyond its rows",
    ),
}


def _label(model: Path, reports: Path, labels: Path, embeddings_cache: Path) -> None:
    """``reportfed label --model`` in its own process, as a hospital labels with the model."""
    done = subprocess.run(
        [sys.executable, "-m", "reportfed", "label", "--model", str(model), "--reports",
         str(reports), "--out", str(labels)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "REPORTFED_EMBEDDINGS_CACHE": str(embeddings_cache)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("lie", list(LIES))
def test_one_lying_member_is_refused_in_one_line_and_the_others_finish(
    processes: None,
    lie: str,
    tables: dict[str, Path],
    embeddings_cache: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    tamper, said = LIES[lie]
    out = tmp_path / "server"
    rc = run_config(**FLOWER, out=str(out))
    grid = DirectGrid(client_app.app, rc)
    for node_id, name in ((100, "a"), (101, "b"), (LIAR, "c")):
        config = {"name": name, "data": str(tables[name]), "cache-dir": str(embeddings_cache)}
        grid.add_node(node_id, config)
    grid.nodes[LIAR].node_config["name"] = LIAR_NAME
    grid.tamper[LIAR] = tamper
    server_app.app(grid, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                                 run_config=rc))  # fmt: skip
    lines = [r.getMessage() for r in caplog.records if said in r.getMessage()]
    assert lines and all("\n" not in line for line in lines), caplog.text[-3000:]
    assert not (out / server_app.FAILURE_FILE).exists()
    model = json.loads(_provenance(out / server_app.MODEL_FILE))
    federation = model["federation"]
    assert {"a", "b"} <= set(federation["nodes"])  # the honest nodes are members to the end
    history = json.loads((out / server_app.HISTORY_FILE).read_text())
    for entry in history:
        assert {"a", "b"} <= set(entry["accepted"]), entry
    # the model a lying member helped to make is one every hospital can use
    reports = tmp_path / "reports.csv"
    pd.DataFrame({"Reports": ["Mild cardiomegaly. No pleural effusion.", "a" * 30 + "!"]}).to_csv(
        reports, index=False
    )
    _label(out / server_app.MODEL_FILE, reports, tmp_path / "labels.csv", embeddings_cache)
    assert pd.read_csv(tmp_path / "labels.csv")["Cardiomegaly"].tolist()[0] == 1.0


def test_a_definition_that_backtracks_forever_is_read_in_linear_time(
    processes: None, tables: dict[str, Path], embeddings_cache: Path, tmp_path: Path
) -> None:
    """A pattern that a backtracking engine runs in exponential time on a line of 'a's (Python's
    ``re`` takes longer than the age of the universe on 100 of them) is admitted, since it is
    a regular expression RE2 runs in linear time: every hospital that labels with the model
    reads such a line at once. The bound below is the test's guard against a hang, not a
    speed measurement."""
    out = tmp_path / "server"
    rc = run_config(**FLOWER, out=str(out))
    grid = DirectGrid(client_app.app, rc)
    for node_id, name in ((100, "a"), (101, "b")):
        config = {"name": name, "data": str(tables[name]), "cache-dir": str(embeddings_cache)}
        grid.add_node(node_id, config)
    defined = _definitions([{"name": "Echo", "patterns": ["(a+)+$"]}])

    def defines_and_annotates(reply: Message) -> Message:  # the model then labels Echo
        if reply.metadata.message_type == "query":
            meta = reply.content.config_records[META]
            meta["labels"] = [*list(meta["labels"]), "Echo"]  # type: ignore[arg-type]
        return defined(reply)

    grid.tamper[101] = defines_and_annotates
    server_app.app(grid, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                                 run_config=rc))  # fmt: skip
    provenance = json.loads(_provenance(out / server_app.MODEL_FILE))
    assert provenance["findings"]["findings"][0]["patterns"] == ["(a+)+$"]
    reports = tmp_path / "reports.csv"
    lines = ["There is " + "a" * 100 + "!", "There is " + "a" * 10_000]
    pd.DataFrame({"Reports": lines}).to_csv(reports, index=False)
    _label(out / server_app.MODEL_FILE, reports, tmp_path / "labels.csv", embeddings_cache)
    echo = pd.read_csv(tmp_path / "labels.csv")["Echo"].tolist()
    assert np.isnan(echo[0]) and echo[1] == 1.0


def _provenance(path: Path) -> str:
    from reportfed.text.model_file import read_model

    return json.dumps(read_model(path).provenance)
