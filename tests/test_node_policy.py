"""A node owns every setting that touches its data: what it embeds with (and so where its text
may go), whether it trains without secure aggregation, and beside how many other members.

The node's real ClientApp answers the server's real messages (``DirectGrid``); the places
report text could go to are stand-ins on this machine's loopback, which count what reaches
them."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

pytest.importorskip("flwr")

from reportfed.cli import main
from reportfed.flower import client_app

from .direct_grid import DirectGrid
from .flower_nodes import run_config
from .test_flower import run_strategy


class _Counting(BaseHTTPRequestHandler):
    """Answers every request 404 and counts it: a stand-in for an embedding API or the hub."""

    seen: ClassVar[list[str]] = []

    def _any(self) -> None:
        self.seen.append(f"{self.command} {self.path}")
        self.send_response(404)
        self.end_headers()

    do_GET = do_POST = do_HEAD = _any

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A loopback server standing in for OpenAI's API and the Hugging Face hub (the node is
    pointed at it by the variables a user would set); the requests it saw."""
    _Counting.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("OPENAI_BASE_URL", f"{address}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    monkeypatch.setenv("HF_ENDPOINT", address)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    try:
        yield _Counting.seen
    finally:
        server.shutdown()


def _grid(tables: dict[str, Path], cache: Path, **run: Any) -> DirectGrid:
    grid = DirectGrid(client_app.app, run_config(hidden="32,16", seed=0, **run))
    for k, name in enumerate("ab"):
        grid.add_node(100 + k, {"name": name, "data": str(tables[name]), "cache-dir": str(cache)})
    return grid


def _refusals(grid: DirectGrid) -> dict[int, str]:
    return {r.metadata.src_node_id: r.error.reason for r in grid.received if r.has_error()}


@pytest.mark.parametrize(
    "declared", ["openai:text-embedding-3-small", "st:sentence-transformers/all-mpnet-base-v2"]
)
def test_a_run_cannot_choose_where_a_nodes_text_goes(
    declared: str, stand_in: list[str], tables: dict[str, Path], embeddings_cache: Path
) -> None:
    """A run that declares an API embedder, or a model the node would have to download, is
    refused by every node before the node builds any embedder: the stand-ins for the API and
    the hub see nothing."""
    grid = _grid(tables, embeddings_cache, embedder=declared, fingerprint="x", dim=384)
    with pytest.raises(Exception, match="0 node\\(s\\) registered, 2 needed"):
        run_strategy(grid, 1)
    refused = _refusals(grid)
    assert set(refused) == {100, 101}
    assert all(
        reason == f"this node embeds with 'minilm' and the run declares {declared!r}: a node "
        "embeds only with its own embedder (federation node --embedder), so it refuses the run"
        for reason in refused.values()
    )
    assert stand_in == []


def test_a_nodes_own_remote_embedder_needs_its_own_explicit_option(
    processes: None,
    stand_in: list[str],
    tables: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A node started with an API embedder, or a hub model not on its disk, sends nothing
    without --allow-remote-embedder: the API one is refused before the node starts, the hub one
    loads from the local cache alone and fails there."""
    node = ["federation", "node", "--data", str(tables["a"]), "--insecure",
            "--superlink", "127.0.0.1:1", "--connect-timeout", "1"]  # fmt: skip
    assert main([*node, "--embedder", "openai:text-embedding-3-small"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"reportfed: error: 'openai:text-embedding-3-small' would send this hospital's sentences "
        f"to {os.environ['OPENAI_BASE_URL']}: a node does so only when started with "
        "--allow-remote-embedder"
    )
    # the hub: in a process of its own, which reads HF_ENDPOINT (the stand-in) as it starts
    config = {"data": str(tables["a"]), "embedder": "st:acme/report-encoder",
              "cache-dir": str(tmp_path / "cache"), "warm": False}  # fmt: skip
    run = run_config(hidden="32,16", embedder="st:acme/report-encoder")
    script = (
        "import sys\n"
        "from reportfed.core.errors import EmbeddingError\n"
        "from reportfed.flower.node_service import IN_PROCESS, Request\n"
        f"try: IN_PROCESS.answer(Request('query', {config!r}, {run!r}))\n"
        "except EmbeddingError as exc: sys.exit(str(exc))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ))  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().endswith(
        "'acme/report-encoder' is neither a folder on this machine nor in its Hugging Face cache, "
        "and this node downloads weights only when started with --allow-remote-embedder"
    )
    assert stand_in == []


def test_a_node_that_requires_secure_aggregation_refuses_a_plain_run(
    tables: dict[str, Path], embeddings_cache: Path
) -> None:
    grid = _grid(tables, embeddings_cache)
    grid.nodes[101].node_config["require-secure-aggregation"] = True
    with pytest.raises(Exception, match="1 node\\(s\\) registered, 2 needed"):
        run_strategy(grid, 1)
    assert _refusals(grid)[101] == (
        "this node requires secure aggregation (--require-secure-aggregation) and the run does "
        "not sum the nodes' updates under SecAgg+ masks: it refuses the run"
    )


def test_a_node_trains_only_beside_as_many_members_as_it_requires(
    tables: dict[str, Path], embeddings_cache: Path
) -> None:
    grid = _grid(tables, embeddings_cache)
    grid.nodes[101].node_config["min-others"] = 2  # there is one other member
    strategy, _ = run_strategy(grid, 1, min_nodes=1)
    assert _refusals(grid)[101] == (
        "this node trains only beside 2 other members (--min-others) and the server counts 1: "
        "it sends no update"
    )
    assert strategy.history.entries[0]["accepted"] == ["a"]
