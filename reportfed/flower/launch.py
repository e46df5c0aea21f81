"""The Flower processes behind ``reportfed federation server | node | register | run``, TLS
certificates and the hospitals' node keys.

A federation is one SuperLink (the server's endpoint), one SuperNode per hospital, and a run
submitted with ``flwr run`` against the app in ``app/``. These helpers build the commands so that
users (and tests) never assemble Flower flags by hand. TLS is the default, and with it Flower's
SuperNode authentication: the SuperLink admits only the nodes whose public key was registered
(``flwr supernode register``), and each node proves its key. ``insecure=True`` turns both off,
only when asked.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

from reportfed.core.errors import ConfigError
from reportfed.core.files import atomic_write
from reportfed.flower.tls import Certificates

APP_DIR = Path(__file__).with_name("app")
#: where the operator's commands reach the server: its loopback, at ``federation server
#: --operator-port``
OPERATOR_HOST = "127.0.0.1"
OPERATOR_PORT = 9093
SUPERLINK_NAME = "reportfed"
#: environment of a SuperNode: its SuperExec looks for a message to run every 0.1 s (Flower's
#: default, 1 s, is paid by every message of every round)
SUPERNODE_ENV = {"FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "0.1"}

Value = str | int | float | bool
T = TypeVar("T")


def _toml_pairs(values: Mapping[str, Value]) -> str:
    """``key=value`` pairs in TOML syntax, as ``--node-config`` and ``--run-config`` take them."""
    parts = []
    for key, value in values.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int | float):
            text = repr(value)
        else:
            text = _basic_string(str(value))
        parts.append(f"{key}={text}")
    return " ".join(parts)


def _basic_string(value: str) -> str:
    """``value`` as a TOML basic string without a double quote inside it: Flower's parser of
    ``--run-config`` ends a value at the next ``"``, escaped or not, so a quote is written
    ``\\u0022``; the other characters are escaped as JSON escapes them, which TOML reads alike."""
    escaped = json.dumps(value, ensure_ascii=False)[1:-1].split("\\\\")
    return '"' + "\\\\".join(part.replace('\\"', "\\u0022") for part in escaped) + '"'


def _tls(insecure: bool, material: T | None) -> T | None:
    """The certificate material of a TLS connection (required), ``None`` for an insecure one."""
    if insecure:
        return None
    if material is None:
        raise ConfigError("TLS needs certificates: give them, or ask for an insecure connection")
    return material


def superlink_command(
    *,
    host: str = "127.0.0.1",
    port: int = 9092,
    certificates: Certificates | None = None,
    insecure: bool = False,
    database: Path | None = None,
) -> list[str]:
    """``flower-superlink``: the server endpoint nodes and runs connect to; with TLS it admits
    only registered nodes (Flower's SuperNode authentication)."""
    cmd = ["flower-superlink", "--disable-runtime-dependency-installation"]
    cmd += ["--host", host, "--port", str(port)]
    certs = _tls(insecure, certificates)
    if certs is None:
        cmd.append("--insecure")
    else:
        cmd += ["--ssl-ca-certfile", str(certs.ca)]
        cmd += ["--ssl-certfile", str(certs.cert), "--ssl-keyfile", str(certs.key)]
        cmd.append("--enable-supernode-auth")
    if database is not None:
        cmd += ["--database", str(database)]
    return cmd


def supernode_command(
    *,
    superlink: str,
    node_config: Mapping[str, Value],
    port: int = 9094,
    root_certificates: Path | None = None,
    key: Path | None = None,
    insecure: bool = False,
    max_wait: float | None = None,
) -> list[str]:
    """One hospital's node: ``flower-supernode`` (``node_config`` holds ``data`` etc.; with TLS
    it authenticates with its private ``key``, registered at the server) under reportfed's guard,
    which answers its messages with reportfed's ClientApp alone (:mod:`reportfed.flower.guard`);
    with ``max_wait`` it stops once it has failed to reach the server for that many seconds."""
    guard = [sys.executable, "-m", "reportfed.flower.guard"]
    guard += ["--runtime-api-address", f"127.0.0.1:{port}", "--"]
    cmd = [*guard, "flower-supernode", "--superlink", superlink, "--port", str(port)]
    cmd += ["--isolation", "process"]
    ca = _tls(insecure, root_certificates)
    if ca is None:
        cmd.append("--insecure")
    else:
        cmd += ["--root-certificates", str(ca)]
        cmd += ["--auth-supernode-private-key", str(_tls(insecure, key))]
    if max_wait is not None:  # Flower's own bound on a connection that keeps failing
        cmd += ["--max-wait-time", f"{max_wait:g}"]
    return [*cmd, "--node-config", _toml_pairs(node_config)]


def write_flwr_config(
    home: Path,
    superlink: str,
    *,
    root_certificates: Path | None = None,
    insecure: bool = False,
    num_supernodes: int | None = None,
) -> Path:
    """Write ``$FLWR_HOME/config.toml`` naming the SuperLink ``flwr run`` submits to
    (``num_supernodes`` for a SuperLink in simulation mode)."""
    lines = ["[superlink]", f'default = "{SUPERLINK_NAME}"', "", f"[superlink.{SUPERLINK_NAME}]"]
    lines.append(f"address = {json.dumps(superlink)}")
    if num_supernodes is not None:
        lines.append(f"options.num-supernodes = {int(num_supernodes)}")
    ca = _tls(insecure, root_certificates)
    if ca is None:
        lines.append("insecure = true")
    else:
        lines.append(f"root-certificates = {json.dumps(str(Path(ca).resolve()))}")
    home.mkdir(parents=True, exist_ok=True)
    return atomic_write(home / "config.toml", ("\n".join(lines) + "\n").encode())


def run_command(run_config: Mapping[str, Value], *, app_dir: Path = APP_DIR) -> list[str]:
    """``flwr run`` of the reportfed app with run-config overrides, logs streamed."""
    cmd = ["flwr", "run", str(app_dir), SUPERLINK_NAME, "--stream"]
    return [*cmd, "--run-config", _toml_pairs(run_config)] if run_config else cmd
