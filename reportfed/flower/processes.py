"""The processes behind a federation: started beside this one and stopped with it, supervised
with their output kept, their ports waited for, and what their failures mean to the person who
typed the command."""

from __future__ import annotations

import collections
import contextlib
import ctypes
import logging
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from reportfed.core.errors import ReportfedError
from reportfed.flower.launch import OPERATOR_HOST

_log = logging.getLogger(__name__)

#: what TLS and TCP failures say, and what they mean to the person who typed the command
_NOT_OUR_CA = (
    "the server's certificate was not signed by the CA of --root-certificates: use the ca.crt "
    "its operator gave"
)
_NOT_THIS_NAME = (
    "the server's certificate does not name this address: connect by a name it was made for "
    "(federation certs --host)"
)
_SPEAKS_TLS = "the server speaks TLS and this side did not (--insecure): give --root-certificates"
_CAUSES = (
    ("certificate has expired", "the server's certificate has expired: it needs a new one"),
    (
        "certificate is not yet valid",
        "the server's certificate is not valid yet: check both machines' clocks",
    ),
    ("certificate signature failure", _NOT_OUR_CA),
    ("unable to get local issuer certificate", _NOT_OUR_CA),
    ("hostname mismatch", _NOT_THIS_NAME),
    ("IP address mismatch", _NOT_THIS_NAME),
    ("wrong version number", "the server does not speak TLS: it was started with --insecure"),
    ("Server disconnected without sending a response", _SPEAKS_TLS),
    ("Connection refused", "nothing accepts connections there"),
    ("All connection attempts failed", "nothing accepts connections there"),
)
#: the other way a TLS server ends a connection that does not speak TLS (measured: the same
#: node with --insecure against a TLS server saw it once in three full test runs, where it
#: otherwise sees "Server disconnected without sending a response")
_PLAINTEXT_RESET = ("Connection reset by peer", _SPEAKS_TLS)


def connection_cause(text: str, *, insecure: bool = False) -> str | None:
    """The plain cause of a failed connection from what Flower or the TLS library said
    (``None`` where it says none of the known ones); ``insecure``: this side did not speak TLS,
    so a reset is a TLS server's answer to it."""
    for said, cause in (*_CAUSES, *([_PLAINTEXT_RESET] if insecure else [])):
        if said.lower() in text.lower():
            return cause
    return None


#: Linux's prctl option that signals a process when the one that started it dies
PR_SET_PDEATHSIG = 1


def _stop_with_parent() -> None:
    """In a child before it runs its program, on Linux: SIGTERM it when the process that
    started it dies, also by SIGKILL (the OOM killer's), which no handler of that process sees."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def end_group(group: int, grace: float = 5.0) -> None:
    """Stop process group ``group``: SIGTERM, so that each process cleans up after itself, then
    SIGKILL for whatever is left after ``grace`` seconds."""
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


#: a terminal's colour code: Flower colours its log's levels on every stream
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def supervise(cmd: Sequence[str], env: Mapping[str, str], *, keep: int = 40) -> tuple[int, str]:
    """Run ``cmd`` in a process group of its own, its output passed through to stderr (without
    Flower's colour codes where stderr is no terminal), until it ends: a SIGINT or SIGTERM to
    this process stops the whole group (Flower's processes and the children they start), and so
    does this process ending, on Linux also when it is killed. Returns the exit status (minus
    the signal's number when this process was asked to stop, whatever the group answered) and
    the last ``keep`` lines of output, for the caller to say why it ended."""
    proc = subprocess.Popen(
        list(cmd),
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
        preexec_fn=_stop_with_parent if sys.platform == "linux" else None,
    )

    asked: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        asked.append(signum)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)

    tail: collections.deque[str] = collections.deque(maxlen=keep)
    coloured = sys.stderr.isatty()

    def relay() -> None:  # until every process of the group has closed the output
        assert proc.stdout is not None
        for line in proc.stdout:
            plain = _COLOUR.sub("", line)
            sys.stderr.write(line if coloured else plain)
            sys.stderr.flush()
            tail.append(plain)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    relaying = threading.Thread(target=relay, daemon=True)
    relaying.start()
    try:
        status = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        end_group(proc.pid)  # what is left of the group: Flower's children
        proc.wait()
        relaying.join(timeout=10)
    return (-asked[0] if asked else status), "".join(tail)


@contextlib.contextmanager
def start_beside(cmd: Sequence[str], env: Mapping[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``cmd`` beside the caller's main process, for as long as the ``with`` block: in a
    process group of its own, its output on this process's stderr, stopped (SIGTERM, then
    SIGKILL after 10 s) when the block ends, and on Linux when this process dies."""
    proc = subprocess.Popen(
        list(cmd),
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=sys.stderr.fileno(),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_stop_with_parent if sys.platform == "linux" else None,
    )
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


#: what a SuperNode prints when the SuperLink refuses to activate it: a key it never registered
#: (Flower's FLEET_NODE_ACTIVATION_FAILED; a network failure reads otherwise)
KEY_REFUSED = "Failed to activate SuperNode"
#: what a SuperNode prints, the cause on the next line, when it gives up reaching the SuperLink
#: (``--max-wait-time``; Flower's exit code 305)
CONNECTION_FAILED = "Failed to initialize the connection to the SuperLink."


def check_port_free(host: str, port: int, hint: str) -> None:
    """Refuse a port another process listens on before Flower starts (and fails with a raw
    ``address already in use``); ``hint`` says what to do instead."""
    if not 0 < port < 65536:
        raise ReportfedError(f"port {port} is not a TCP port (1-65535)")
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise ReportfedError(f"{host}:{port} cannot be used ({exc.strerror}): {hint}") from None


def wait_for_server(address: str, timeout: float) -> None:
    """Wait until ``address`` (``host:port``) accepts TCP connections: a server started a moment
    ago may still be starting. Refuse a malformed address, and one that stays closed."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ReportfedError(f"--superlink must be host:port, got {address!r}")
    deadline = time.monotonic() + timeout
    said = False
    while True:
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=2.0):
                return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise ReportfedError(
                    f"no server accepts connections at {address} after {timeout:g} s "
                    f"({exc.strerror or exc}); is `reportfed federation server` running?"
                ) from None
        if not said:
            _log.info("waiting up to %g s for the server at %s", timeout, address)
            said = True
        time.sleep(0.5)


#: where :func:`free_port` looks: from here up to the ports the OS hands to outgoing connections
LOWEST_PORT = 10000
#: the OS's range of ports for outgoing connections where it does not say (IANA's)
EPHEMERAL = (49152, 65535)


def _ephemeral_ports() -> tuple[int, int]:
    """The range the OS takes local ports of outgoing connections from (Linux says)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    except (OSError, ValueError):
        return EPHEMERAL
    return int(low), int(high)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now and below the ports the OS gives outgoing
    connections, so that no connection another process opens before the port's server binds it
    (a node's gRPC channel, say) can take it."""
    below = _ephemeral_ports()[0]
    if below <= LOWEST_PORT:  # an OS that lends nearly every port: any free one
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
    choose = random.Random()
    for _ in range(200):
        port = choose.randrange(LOWEST_PORT, below)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise ReportfedError(f"no free TCP port on 127.0.0.1 between {LOWEST_PORT} and {below}")


def wait_for_port(
    port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0, host: str = OPERATOR_HOST
) -> None:
    """Wait until ``proc``, just started, accepts connections on ``host:port``; a
    ``RuntimeError`` where it exits first, a ``TimeoutError`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening")
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            if s.connect_ex((host, port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout:g} s")
