"""A whole federation on this machine for the tests and benchmarks: a SuperLink and SuperNodes
on loopback ports, registered keys and TLS where asked, stopped with the block."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from reportfed.flower.identity import NodeKeys, generate_node_keys, register_node
from reportfed.flower.launch import (
    SUPERNODE_ENV,
    Value,
    run_command,
    superlink_command,
    supernode_command,
    write_flwr_config,
)
from reportfed.flower.processes import free_port, wait_for_port
from reportfed.flower.tls import Certificates


class LoopbackFederation:
    """A whole federation on this machine: a SuperLink and SuperNodes as separate processes on
    127.0.0.1 (free ports, its own ``FLWR_HOME`` under ``root``), for trials, benchmarks and tests.

    ``simulation_nodes=N`` starts the SuperLink in simulation mode instead: N virtual nodes run
    by Flower's simulation engine (Ray) read the run config's ``partitions``. Use as a context
    manager; leaving it stops every process group.
    """

    def __init__(
        self,
        root: Path,
        certificates: Certificates | None = None,
        simulation_nodes: int | None = None,
    ) -> None:
        self.root = root
        self.certificates = certificates
        self.simulation_nodes = simulation_nodes
        self.insecure = certificates is None
        self.home = root / "flwr-home"
        self.env = {
            **os.environ,
            **SUPERNODE_ENV,
            "FLWR_HOME": str(self.home),
            "PYTHONUNBUFFERED": "1",
        }
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        #: each node's runtime API port, by name
        self.node_ports: dict[str, int] = {}
        #: the nodes the SuperLink should activate (``run`` waits for them)
        self.admitted: list[str] = []

    def _spawn(self, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs[name] = proc
        return proc

    def __enter__(self) -> LoopbackFederation:
        write_flwr_config(
            self.home,
            self.address,
            insecure=self.insecure,
            root_certificates=None if self.certificates is None else self.certificates.ca,
            num_supernodes=self.simulation_nodes,
        )
        cmd = superlink_command(
            port=self.port, insecure=self.insecure, certificates=self.certificates
        )
        proc = self._spawn("superlink", cmd + (["--simulation"] if self.simulation_nodes else []))
        wait_for_port(self.port, proc)
        return self

    def register(self, name: str) -> NodeKeys:
        """Make hospital ``name``'s key pair under ``root/keys`` and register its public key at
        the SuperLink (what ``reportfed federation keys`` and ``register`` do)."""
        keys = generate_node_keys(self.root / "keys", name)
        register_node(keys.public, name, self.env)
        return keys

    def add_node(
        self,
        name: str,
        data: Path,
        key: NodeKeys | None = None,
        admitted: bool = True,
        **node_config: Value,
    ) -> None:
        """Start a SuperNode reading ``data`` (more node config as keywords). With TLS it
        authenticates with ``key``; without one, a key is made and registered for it first.
        ``admitted=False``: a node the SuperLink is expected to refuse, which ``run`` does not
        wait for."""
        if not self.insecure and key is None:
            key = self.register(name)
        self.node_ports[name] = port = free_port()
        cmd = supernode_command(
            superlink=self.address,
            port=port,
            node_config={"name": name, "data": str(data), **node_config},
            insecure=self.insecure,
            root_certificates=None if self.certificates is None else self.certificates.ca,
            key=None if key is None else key.private,
        )
        self._spawn(f"node-{name}", cmd)
        if admitted:
            self.admitted.append(name)

    def wait_for_nodes(self, timeout: float = 300.0) -> None:
        """Wait until the SuperLink has activated every admitted node (its log says
        ``SuperNode ID``), so that a run registers them all, however slowly a loaded machine
        starts them; raises with the node's log if one ends or the wait runs out."""
        deadline = time.monotonic() + timeout
        for name in self.admitted:
            proc = self.procs[f"node-{name}"]
            while "SuperNode ID:" not in self.log(f"node-{name}"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    state = (
                        "ended" if proc.poll() is not None else f"not active after {timeout:g} s"
                    )
                    raise RuntimeError(
                        f"node {name!r} {state}:\n{self.log(f'node-{name}')[-4000:]}"
                    )
                time.sleep(0.5)

    def kill_node(self, name: str) -> None:
        """SIGKILL a node's process group (a hospital going dark)."""
        os.killpg(self.procs[f"node-{name}"].pid, signal.SIGKILL)

    def run(self, run_config: Mapping[str, Value], timeout: float = 3600.0) -> str:
        """``flwr run`` to completion, once every admitted node is active; returns its output,
        streamed to ``flwr-run.log`` as it comes (raises on failure or timeout)."""
        if self.simulation_nodes is None:
            self.wait_for_nodes()
        path = self.root / "flwr-run.log"
        with open(path, "wb") as log:
            done = subprocess.run(
                run_command(run_config),
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                cwd=self.root,
            )
        output = path.read_text(errors="replace")
        if done.returncode != 0:
            raise RuntimeError(f"flwr run failed ({done.returncode}):\n{output[-4000:]}")
        return output

    def log(self, name: str) -> str:
        """The output of process ``name`` (``superlink``, ``node-<name>``)."""
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
