"""A real Flower deployment on 127.0.0.1 for tests: one SuperLink, SuperNodes, ``flwr run``.

Every process gets a temp ``FLWR_HOME`` and free ports, and is stopped (its whole process group)
when the cluster closes.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from reportfed.federation.flower.launch import (
    Certificates,
    run_command,
    superlink_command,
    supernode_command,
    write_flwr_config,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


class Cluster:
    """SuperLink + SuperNodes as separate processes; use as a context manager."""

    def __init__(self, root: Path, certificates: Certificates | None = None) -> None:
        self.root = root
        self.certificates = certificates
        self.insecure = certificates is None
        self.home = root / "flwr-home"
        self.env = {**os.environ, "FLWR_HOME": str(self.home), "PYTHONUNBUFFERED": "1"}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"

    def _spawn(self, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs[name] = proc
        return proc

    def __enter__(self) -> Cluster:
        write_flwr_config(
            self.home,
            self.address,
            insecure=self.insecure,
            root_certificates=None if self.certificates is None else self.certificates.ca,
        )
        proc = self._spawn(
            "superlink",
            superlink_command(
                port=self.port, insecure=self.insecure, certificates=self.certificates
            ),
        )
        _wait_for_port(self.port, proc)
        return self

    def add_node(self, name: str, data: Path, **node_config: Any) -> None:
        cmd = supernode_command(
            superlink=self.address,
            port=free_port(),
            node_config={"name": name, "data": str(data), **node_config},
            insecure=self.insecure,
            root_certificates=None if self.certificates is None else self.certificates.ca,
        )
        self._spawn(f"node-{name}", cmd)

    def kill_node(self, name: str) -> None:
        os.killpg(self.procs[f"node-{name}"].pid, signal.SIGKILL)

    def run(self, run_config: dict[str, Any], timeout: float = 300.0) -> str:
        """``flwr run`` to completion; returns its output (raises on failure)."""
        done = subprocess.run(
            run_command(run_config),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
        )
        output = done.stdout + done.stderr
        (self.root / "flwr-run.log").write_text(output)
        if done.returncode != 0:
            raise RuntimeError(f"flwr run failed ({done.returncode}):\n{output[-4000:]}")
        return output

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
