"""A node's warm process: one process beside a SuperNode that answers its messages
(:class:`~reportfed.flower.node_service.NodeService`) with torch imported and the node's data
loaded once, so that a round costs its computation.

Flower 1.41's SuperExec starts a fresh ClientApp process for every message; its warm executor
pools serve only Kubernetes and the agent, connector and model apps, not ClientApps. So the
ClientApp of a node with the ``warm`` setting (the default, under ``reportfed federation node``
and a bare ``flower-supernode`` alike) stays a thin process that imports Flower and numpy, and
forwards each message here:

* the first message starts the warm process (``python -m reportfed.flower.warm``) in the
  SuperNode's process group, so that stopping the node stops it too; it also exits when that
  group's leader is gone or after :data:`IDLE_S` seconds without a message;
* requests travel over a Unix socket in a directory only this user can open, and the two sides
  authenticate with a random key (``multiprocessing.connection``'s HMAC handshake);
* an error of the node's own (:class:`~reportfed.core.errors.ReportfedError`: its table gone or
  unreadable) comes back as that error; anything else as the warm process's traceback.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path

from filelock import FileLock

from reportfed.core.errors import ReportfedError
from reportfed.flower.node_service import Answer, NodeService, Request

#: seconds without a message after which a warm process exits
IDLE_S = 3600.0
#: seconds a ClientApp waits for a warm process it started to accept connections (it imports
#: torch and scikit-learn first; it reads the node's table on its first request, not here)
READY_S = 120.0


def _root() -> Path:
    """This user's folder of warm processes' sockets and keys (mode 700)."""
    return Path(tempfile.gettempdir()) / f"reportfed-{os.getuid()}"


def private_root() -> Path:
    """This user's folder of node files (warm processes' sockets and keys, the guard's secret),
    made with mode 700 and refused where anyone else could open it."""
    root = _root()
    root.mkdir(mode=0o700, exist_ok=True)
    info = root.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ReportfedError(f"{root}: must be a directory only this user can open (mode 700)")
    return root


def write_secret(path: Path, secret: bytes) -> None:
    """Write ``secret`` to a new file ``path`` in :func:`private_root` that only this user can
    read (replacing one of that name), making the folder again if a node that stopped meanwhile
    removed it as empty."""
    for _ in range(3):
        private_root()
        path.unlink(missing_ok=True)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileNotFoundError:
            continue
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(secret)
        return
    raise ReportfedError(f"{path.parent}: removed each time it was made (another node stopping?)")


def _place(node_config: dict[str, object]) -> Path:
    """Where the warm process of this node config in this process group keeps its socket and
    key (``.sock``, ``.key``, ``.lock`` beside this stem): a new SuperNode gets a new process."""
    root = private_root()
    config = json.dumps(sorted(node_config.items()), default=str).encode()
    return root / f"node-{os.getpgrp()}-{hashlib.sha256(config).hexdigest()[:16]}"


def remove_places(group: int | None = None) -> None:
    """Remove the sockets, keys and locks of process group ``group``'s warm processes (with
    ``None``: of every group that no longer runs, which a killed node leaves), and the user's
    folder of them once it is empty: what a node leaves when it stops."""
    root = _root()
    for path in root.glob("node-*-*"):
        owner = int(path.name.split("-")[1]) if path.name.split("-")[1].isdigit() else None
        if owner == group or (group is None and owner is not None and not _leader_alive(owner)):
            path.unlink(missing_ok=True)
    for path in root.glob("guard-*.secret"):  # a guard's, left when it was killed
        pid = path.stem.split("-")[1]
        if group is None and pid.isdigit() and not _leader_alive(int(pid)):
            path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        root.rmdir()  # only when no other node of this user has files there


def _locked(path: Path) -> FileLock:
    """An exclusive lock on ``path`` (one ClientApp starts the warm process, not two)."""
    return FileLock(path)


def _connect(place: Path, key: bytes) -> Connection | None:
    try:
        return Client(str(place.with_suffix(".sock")), family="AF_UNIX", authkey=key)
    except (FileNotFoundError, ConnectionRefusedError):
        return None


def _start(place: Path) -> Connection:
    """Start the warm process of ``place`` and connect to it once it listens."""
    key = secrets.token_bytes(32)
    write_secret(place.with_suffix(".key"), key)
    place.with_suffix(".sock").unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "reportfed.flower.warm", str(place)], stdin=subprocess.DEVNULL
    )
    deadline = time.monotonic() + READY_S
    while (conn := _connect(place, key)) is None:
        if proc.poll() is not None:
            raise RuntimeError(f"the node's warm process exited with status {proc.returncode}")
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"the node's warm process did not start in {READY_S:g} s")
        time.sleep(0.05)
    return conn


def answer(request: Request) -> Answer:
    """``request`` answered by this node's warm process, started first if none runs."""
    place = _place(request.node_config)
    with _locked(place.with_suffix(".lock")):
        key_file = place.with_suffix(".key")
        conn = _connect(place, key_file.read_bytes()) if key_file.is_file() else None
        if conn is None:
            conn = _start(place)
    with conn:
        conn.send(request)
        ok, own, value = conn.recv()
    if ok:
        return value
    if own:
        raise ReportfedError(value)
    raise RuntimeError(f"the node's warm process failed:\n{value}")


def prestart(node_config: dict[str, object]) -> None:
    """Start this node's warm process now and have it read the node under the default run
    settings, so that a run's first message finds torch imported, the embedder loaded and the
    node's vectors read (measured: the first message of a run took 16 s, most of it this)."""
    from reportfed.core import schema
    from reportfed.core.config import FederationConfig, NodeSettings, RunSettings

    if not schema.decode(NodeSettings, node_config).warm:
        return
    run = {
        **schema.in_table("reports", schema.encode(FederationConfig())),
        **schema.encode(RunSettings()),
    }
    answer(Request("query", dict(node_config), run, {}, None, {}))


def _leader_alive(group: int) -> bool:
    try:
        os.kill(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _warm_up() -> None:
    """Import what a round needs before the first message (torch, the torch._dynamo that
    torch's optimizers import on first use, scikit-learn's metrics and logistic regression), so
    that the first round costs what the later ones do; the handshake waits for it instead."""
    import sklearn.linear_model
    import sklearn.metrics  # noqa: F401
    import torch

    torch.optim.Adam([torch.zeros(1, requires_grad=True)])


def serve(place: Path) -> None:
    """Answer requests on ``place``'s socket until the process group's leader is gone or no
    request came for :data:`IDLE_S` seconds."""
    key = place.with_suffix(".key").read_bytes()
    sock = place.with_suffix(".sock")
    listener = Listener(str(sock), family="AF_UNIX", authkey=key)
    _warm_up()  # a ClientApp that connects meanwhile waits for the key handshake
    service = NodeService()
    group = os.getpgrp()
    last = [time.monotonic()]

    def watch() -> None:
        while _leader_alive(group) and time.monotonic() - last[0] < IDLE_S:
            time.sleep(2.0)
        for suffix in (".sock", ".key", ".lock"):  # nothing of this process stays behind
            place.with_suffix(suffix).unlink(missing_ok=True)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
    while True:
        try:
            conn = listener.accept()
        except (OSError, EOFError, AuthenticationError):  # a client without the key
            continue
        with conn:
            try:
                request = conn.recv()
                reply: tuple[bool, bool, object] = (True, False, service.answer(request))
            except ReportfedError as exc:
                reply = (False, True, str(exc))
            except Exception:  # the ClientApp raises it, as Flower's ClientApp errors are
                reply = (False, False, traceback.format_exc())
            with contextlib.suppress(OSError):
                conn.send(reply)
        last[0] = time.monotonic()


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
