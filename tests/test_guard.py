"""A hospital's node runs only reportfed's ClientApp (``reportfed.flower.guard``): a run whose
app bundle carries code of its own, or names another ClientApp, is refused at every node before
anything of the bundle is imported."""

from __future__ import annotations

import io
import subprocess
import zipfile
from pathlib import Path

from reportfed.flower.guard import check_bundle
from reportfed.flower.launch import APP_DIR, run_command
from tests.loopback import LoopbackFederation


def _bundle(app: Path) -> bytes:
    """The bundle ``flwr run`` would submit for ``app`` (Flower's own build)."""
    from flwr.cli.build import build_fab_from_disk

    return build_fab_from_disk(app)


def _hostile_app(folder: Path, marker: Path, clientapp: str = "evil:app") -> Path:
    """reportfed's app descriptor naming ``clientapp``, beside a module that writes ``marker``
    when it is imported."""
    folder.mkdir(parents=True)
    text = (APP_DIR / "pyproject.toml").read_text()
    text = text.replace(
        'clientapp = "reportfed.flower.client_app:app"', f'clientapp = "{clientapp}"'
    )
    (folder / "pyproject.toml").write_text(text)
    (folder / "evil.py").write_text(
        "from pathlib import Path\n"
        f"Path({str(marker)!r}).write_text('the bundle ran on a hospital node')\n"
        "from reportfed.flower.client_app import app as reportfeds\n"
        "app = reportfeds\n"
    )
    return folder


def test_reportfeds_own_bundle_passes_and_any_other_is_refused_with_its_reason(
    tmp_path: Path,
) -> None:
    assert check_bundle(_bundle(APP_DIR)) is None
    marker = tmp_path / "ran"
    hostile = _bundle(_hostile_app(tmp_path / "a", marker))
    assert check_bundle(hostile) == "its app bundle carries files of its own (evil.py)"
    # the same bundle naming reportfed's ClientApp still carries a module that would shadow
    shadow = _bundle(_hostile_app(tmp_path / "b", marker, "reportfed.flower.client_app:app"))
    assert check_bundle(shadow) == "its app bundle carries files of its own (evil.py)"
    # no file of its own, but another ClientApp (one installed on the node, say)
    other = tmp_path / "c"
    other.mkdir()
    (other / "pyproject.toml").write_text(
        (APP_DIR / "pyproject.toml")
        .read_text()
        .replace("reportfed.flower.client_app:app", "flwr.clientapp:ClientApp")
    )
    assert check_bundle(_bundle(other)) == (
        "its app names the ClientApp 'flwr.clientapp:ClientApp', not reportfed's "
        "'reportfed.flower.client_app:app'"
    )
    assert check_bundle(b"not a zip").startswith("its app bundle cannot be read")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr(".info/CONTENT", "")
    assert check_bundle(buffer.getvalue()) == "its app bundle has no pyproject.toml"
    assert not marker.exists()


def test_a_run_whose_bundle_carries_code_is_refused_at_every_node(
    processes: None, tmp_path: Path, tables: dict[str, Path], embeddings_cache: Path
) -> None:
    """Real processes: two reportfed nodes, and a run submitted with a bundle whose module
    would write a file on import. Neither node imports it; each answers with the reason, and
    the nodes go on to serve reportfed's own run."""
    marker = tmp_path / "ran"
    hostile = _hostile_app(tmp_path / "hostile", marker)
    # what a node killed with SIGKILL leaves: the files of a process group that has ended
    gone = subprocess.Popen(["true"])
    gone.wait()
    _warm_files().mkdir(mode=0o700, exist_ok=True)
    stale = [_warm_files() / f"node-{gone.pid}-0123456789abcdef{s}" for s in (".key", ".lock")]
    for path in stale:
        path.write_bytes(b"")
    with LoopbackFederation(tmp_path) as cluster:
        for name in ("a", "b"):
            cluster.add_node(name, tables[name], **{"cache-dir": str(embeddings_cache)})
        cluster.wait_for_nodes()
        config = {"min-nodes": 2, "reports.rounds": 1, "out": str(tmp_path / "hostile-run")}
        done = subprocess.run(
            run_command(config, app_dir=hostile), env=cluster.env, cwd=tmp_path,
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert not marker.exists(), "a node imported the bundle's code"
        assert not any(p.exists() for p in stale), "a starting node sweeps what dead nodes left"
        for name in ("a", "b"):
            assert cluster.log(f"node-{name}"), done.stdout[-3000:] + done.stderr[-3000:]
            assert "reportfed's node refused run" in cluster.log(f"node-{name}")
            assert "its app bundle carries files of its own (evil.py)" in cluster.log(
                f"node-{name}"
            )
        assert (
            done.returncode != 0 or not (tmp_path / "hostile-run" / "global.safetensors").exists()
        )
        cluster.run({"min-nodes": 2, "reports.rounds": 1, "out": str(tmp_path / "run")})
        assert (tmp_path / "run" / "global.safetensors").is_file()
        groups = [cluster.procs[f"node-{name}"].pid for name in ("a", "b")]
        left = [p for g in groups for p in _warm_files().glob(f"node-{g}-*")]
        assert left, "the nodes' warm processes keep their sockets here while they run"
    assert not marker.exists()
    # stopped nodes leave nothing in /tmp: their warm processes' sockets, keys and locks
    assert [p for g in groups for p in _warm_files().glob(f"node-{g}-*")] == []


_ASK_FOR_A_TASK = """
import sys
from pathlib import Path
from flwr.proto.runtime_pb2 import AcquireTaskRequest
from flwr.supercore.constant import TaskType
from reportfed.flower.guard import _runtime_client
secret = Path(sys.argv[2]).read_bytes() if len(sys.argv) > 2 else None
client = _runtime_client(sys.argv[1], "SuperExec", tries=1, secret=secret)
try:
    client.AcquireTask(AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP]))
except BaseException as exc:  # Flower's client interrupts itself on a 401
    print("refused:", exc.__context__ or exc)
else:
    print("answered")
"""


def test_another_process_on_the_nodes_machine_cannot_take_its_tasks(
    processes: None, tmp_path: Path, tables: dict[str, Path], embeddings_cache: Path
) -> None:
    """The SuperNode's runtime API hands out the node's tasks only to a request signed with the
    secret its guard holds (Flower's SuperExec authentication): a second local process that
    asks for a task, as Flower's own SuperExec would, is refused; the guard's signature is
    answered."""
    import sys

    with LoopbackFederation(tmp_path) as cluster:
        cluster.add_node("a", tables["a"], **{"cache-dir": str(embeddings_cache)})
        cluster.wait_for_nodes(timeout=120)
        address = f"127.0.0.1:{cluster.node_ports['a']}"
        asked = subprocess.run([sys.executable, "-c", _ASK_FOR_A_TASK, address],
                               capture_output=True, text=True, timeout=60)  # fmt: skip
        assert asked.stdout.startswith("refused:"), asked.stdout + asked.stderr
        assert "401 Unauthorized" in asked.stdout
        group = cluster.procs["node-a"].pid
        secrets = [p for p in _warm_files().glob("guard-*.secret") if _in_group(p, group)]
        assert len(secrets) == 1 and secrets[0].stat().st_mode & 0o077 == 0
        signed = subprocess.run([sys.executable, "-c", _ASK_FOR_A_TASK, address,
                                 str(secrets[0])], capture_output=True, text=True, timeout=60)  # fmt: skip
        assert signed.stdout.strip() == "answered", signed.stdout + signed.stderr
    assert not secrets[0].exists(), "a stopped node leaves no secret behind"


def _in_group(path: Path, group: int) -> bool:
    import os

    pid = int(path.stem.split("-")[1])
    try:
        return os.getpgid(pid) == group
    except ProcessLookupError:
        return False


def _warm_files() -> Path:
    import os
    import tempfile

    return Path(tempfile.gettempdir()) / f"reportfed-{os.getuid()}"
