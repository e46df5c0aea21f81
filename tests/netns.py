"""Hosts for tests across a network: Linux network namespaces on this machine, each with one
address from the benchmark-testing range 198.18.0.0/24, joined by veth pairs to a bridge in a
namespace of the test's own. The addresses exist only on that link, so no packet leaves it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

#: the link's prefix (RFC 2544's benchmark-testing range); host k gets .k+1
PREFIX = "198.18.0"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def can_make_namespaces() -> str | None:
    """``None`` where this process may build namespaces, else why not (to skip with)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"rfprobe{os.getpid()}"
    try:
        _ip("netns", "add", probe)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the kernel or sandbox refuses `ip netns add`: {exc}"
    _ip("netns", "del", probe)
    return None


class Link:
    """``hosts`` on one bridged link: ``address(host)``, ``run`` and ``spawn`` inside a host's
    namespace. Use as a context manager; leaving it kills what was spawned and removes every
    namespace (their veth ends go with them)."""

    def __init__(self, hosts: Sequence[str]) -> None:
        tag = f"rf{os.getpid() % 100000}"
        self.bridge_ns = f"{tag}-link"
        self.namespaces = {host: f"{tag}-{host}" for host in hosts}
        self.addresses = {host: f"{PREFIX}.{k + 1}" for k, host in enumerate(hosts)}
        self.procs: list[subprocess.Popen[bytes]] = []

    def address(self, host: str) -> str:
        return self.addresses[host]

    def __enter__(self) -> Link:
        try:
            _ip("netns", "add", self.bridge_ns)
            _ip("-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.bridge_ns, "link", "set", "br0", "up")
            for k, (host, ns) in enumerate(self.namespaces.items()):
                _ip("netns", "add", ns)
                _ip("-n", ns, "link", "set", "lo", "up")
                # the pair is made inside the host's namespace, one end moved to the bridge's
                _ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", f"port{k}")
                _ip("-n", ns, "link", "set", f"port{k}", "netns", self.bridge_ns)
                _ip("-n", self.bridge_ns, "link", "set", f"port{k}", "master", "br0", "up")
                _ip("-n", ns, "addr", "add", f"{self.addresses[host]}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
        except BaseException:
            self._remove()
            raise
        return self

    def _command(self, host: str, cmd: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.namespaces[host], *cmd]

    def run(
        self,
        host: str,
        cmd: Sequence[str],
        env: Mapping[str, str],
        timeout: float = 120.0,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """``cmd`` in ``host``'s namespace to its end (stdout and stderr captured), in folder
        ``cwd``."""
        return subprocess.run(
            self._command(host, cmd),
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
        )

    def spawn(
        self,
        host: str,
        cmd: Sequence[str],
        env: Mapping[str, str],
        log: Path,
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        """``cmd`` in ``host``'s namespace in the background, its output in ``log``, in folder
        ``cwd``."""
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                self._command(host, cmd),
                env=dict(env),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd,
            )
        self.procs.append(proc)
        return proc

    def _remove(self) -> None:
        for ns in [*self.namespaces.values(), self.bridge_ns]:
            pids = subprocess.run(
                ["ip", "netns", "pids", ns], capture_output=True, text=True
            ).stdout.split()
            for pid in pids:
                subprocess.run(["kill", "-KILL", pid], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._remove()
