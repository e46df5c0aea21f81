"""The hospitals' node keys: a name, a key pair that proves it (Flower's SuperNode
authentication), and the SuperLink's register of the keys it admits."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from reportfed.core.errors import OutputFileError, ReportfedError, warn
from reportfed.core.files import atomic_write
from reportfed.flower.launch import OPERATOR_HOST, OPERATOR_PORT, SUPERLINK_NAME
from reportfed.flower.processes import connection_cause


@dataclass(frozen=True)
class NodeKeys:
    """A hospital's key pair for SuperNode authentication (OpenSSH files, ECDSA on NIST P-384):
    the private key stays on the node, the public key goes to the server's operator."""

    private: Path
    public: Path

    @classmethod
    def named(cls, directory: str | Path, name: str) -> NodeKeys:
        """The files :func:`generate_node_keys` writes for ``name`` into ``directory``."""
        d = Path(directory)
        return cls(d / f"{name}.key", d / f"{name}.pub")


def _register_command(public_key: Path, name: str) -> list[str]:
    """``flwr supernode register``: admit the node holding ``public_key``'s private key, under
    ``name``, at the SuperLink of the ``reportfed`` connection (:func:`write_flwr_config`)."""
    return [
        "flwr", "supernode", "register", str(public_key), SUPERLINK_NAME,
        "--name", name, "--format", "json",
    ]  # fmt: skip


#: what a hospital's name may be: it names its key files and its node at the server
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_name(name: str) -> None:
    """Refuse, in one line, a hospital name that is not a simple name (a path, say, which
    would put its key files outside the folder asked for)."""
    if not NAME.fullmatch(name) or ".." in name:
        raise ReportfedError(
            f"--name {name!r} is not a name: use letters, digits, '_', '-' or '.', "
            "starting with a letter or digit (at most 64)"
        )


def generate_node_keys(out_dir: str | Path, name: str) -> NodeKeys:
    """A new key pair for the hospital ``name`` (:class:`NodeKeys`); an existing pair is never
    overwritten (its public key may be registered already)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    check_name(name)
    keys = NodeKeys.named(out_dir, name)
    for path in (keys.private, keys.public):
        if path.exists():
            raise ReportfedError(
                f"{path} exists: a hospital keeps its key (delete it to make anew)"
            )
    try:
        keys.private.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputFileError(
            f"cannot make the key folder {keys.private.parent}: {exc.strerror}"
        ) from None
    key = ec.generate_private_key(ec.SECP384R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    atomic_write(keys.private, private)
    keys.private.chmod(0o600)
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    atomic_write(keys.public, public + f" {name}\n".encode())
    return keys


def check_node_key(path: Path) -> None:
    """Refuse, in one line, a node key Flower cannot use: not a private key (the ``.pub`` given
    for the ``.key``), not OpenSSH, or not ECDSA on NIST P-384 (say which kind it is); warn
    (:class:`~reportfed.core.errors.ReportfedWarning`) about a key others may read."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    data = path.read_bytes()
    make = "make one with `reportfed federation keys`"
    if data.lstrip().startswith((b"ecdsa-", b"ssh-")):
        raise ReportfedError(
            f"--key {path} is a public key: give the private key beside it ({path.stem}.key), "
            "the one that never leaves this node"
        )
    try:
        key = serialization.load_ssh_private_key(data, password=None)
    except Exception:
        raise ReportfedError(
            f"--key {path} is not an unencrypted OpenSSH private key; {make}"
        ) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp384r1":
        kind = type(key).__name__.removeprefix("_").replace("PrivateKey", "")
        if isinstance(key, ec.EllipticCurvePrivateKey):
            kind = f"ECDSA on {key.curve.name}"
        raise ReportfedError(
            f"--key {path} is an {kind} key; Flower's node authentication takes ECDSA on NIST "
            f"P-384: {make}"
        )
    if path.stat().st_mode & 0o077:
        warn(f"--key {path} can be read by other users of this machine: chmod 600 {path}")


#: one thread at a time reads Flower's configuration under a home of reportfed's choosing
_FLOWER_HOME = threading.Lock()


@contextlib.contextmanager
def _flower_home(home: str) -> Iterator[None]:
    """Flower's CLI helpers read their configuration from ``$FLWR_HOME`` alone: point it at
    ``home`` for the block (one thread at a time), then put back what was there."""
    with _FLOWER_HOME:
        previous = os.environ.get("FLWR_HOME")
        os.environ["FLWR_HOME"] = home
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop("FLWR_HOME", None)
            else:
                os.environ["FLWR_HOME"] = previous


def registered_names(env: Mapping[str, str]) -> dict[str, int]:
    """The names of the nodes registered at the SuperLink of ``env``'s ``FLWR_HOME`` connection
    (:func:`write_flwr_config`), with their node ids, from Flower's Control API (``flwr supernode
    ls`` lists the same nodes, without their names)."""
    from flwr.cli.flower_config import read_superlink_connection
    from flwr.cli.utils import init_http_client_from_connection
    from flwr.proto.control_pb2 import ListNodesRequest

    address = "the server"
    try:
        with _flower_home(env["FLWR_HOME"]):
            with contextlib.redirect_stdout(io.StringIO()):  # "Using SuperLink: ..."
                connection = read_superlink_connection(SUPERLINK_NAME)
            address = f"the server at {connection.address}"
            client = init_http_client_from_connection(connection)
            try:
                nodes = client.ListNodes(ListNodesRequest()).nodes_info
            finally:
                client.close()
    except Exception as exc:  # Flower raises click, gRPC and HTTP errors alike
        reason = " ".join(str(exc).split())
        reason = connection_cause(reason) or reason
        if "403" in reason:
            raise ReportfedError(
                f"{address} takes no operator commands (only hospitals' nodes connect there): run "
                f"them on the server against {OPERATOR_HOST}:{OPERATOR_PORT} (its --operator-port), or "
                "through an SSH tunnel to that port"
            ) from None
        raise ReportfedError(f"cannot reach the operator API of {address}: {reason}") from None
    return {n.name: int(n.node_id) for n in nodes if n.name and n.status != "unregistered"}


def register_node(public_key: Path, name: str, env: Mapping[str, str]) -> int:
    """Register a hospital's public key at the SuperLink named in ``env``'s ``FLWR_HOME``
    (:func:`write_flwr_config`); returns the node id Flower gives it (``ReportfedError`` with
    Flower's reason when it refuses). A name another registered node has is refused: the
    SuperLink keeps names but would register a second node under one."""
    taken = registered_names(env)
    if name in taken:
        raise ReportfedError(
            f"a node named {name!r} is already registered (node {taken[name]}): give this "
            "hospital another --name"
        )
    done = subprocess.run(
        _register_command(public_key, name), env=dict(env), capture_output=True, text=True
    )
    start = done.stdout.find("{")
    try:
        answer = json.loads(done.stdout[start:]) if start >= 0 else {}
    except json.JSONDecodeError:
        answer = {}
    if done.returncode != 0 or not answer.get("success"):
        reason = str(answer.get("error-message") or done.stderr or done.stdout)
        reason = " ".join(line for line in reason.splitlines() if not line.startswith("Using "))
        raise ReportfedError(f"the server did not register {public_key}: {reason}")
    return int(answer["node-id"])
