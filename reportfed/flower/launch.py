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

import collections
import contextlib
import ctypes
import datetime as dt
import io
import ipaddress
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from reportfed.core.errors import ConfigError, OutputFileError, ReportfedError
from reportfed.core.files import atomic_write

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


@dataclass(frozen=True)
class Certificates:
    """A CA certificate and the server certificate/key it signed (PEM files)."""

    ca: Path
    cert: Path
    key: Path

    @classmethod
    def in_dir(cls, directory: str | Path) -> Certificates:
        """The files :func:`generate_certificates` writes into ``directory``."""
        d = Path(directory)
        certs = cls(d / "ca.crt", d / "server.pem", d / "server.key")
        missing = [str(p) for p in (certs.ca, certs.cert, certs.key) if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"missing certificate file(s): {', '.join(missing)}")
        for path in (certs.ca, certs.cert):
            check_certificate(path)
        return certs


def check_certificate(path: Path) -> None:
    """Refuse, in one line, a certificate file TLS cannot use: one holding no PEM certificate
    (Flower would end in a traceback, and a SuperNode would hang on its way out)."""
    from cryptography import x509

    try:
        x509.load_pem_x509_certificates(path.read_bytes())
    except ValueError:
        raise ReportfedError(
            f"{path} holds no PEM certificate: use the files `reportfed federation certs` wrote"
        ) from None


def expiry_warning(path: Path, *, days: int = 30) -> str | None:
    """A warning for a certificate that has expired or expires within ``days`` days (TLS
    connections to it fail once it has), ``None`` for one that stays valid longer."""
    from cryptography import x509

    cert = x509.load_pem_x509_certificates(path.read_bytes())[0]
    left = cert.not_valid_after_utc - dt.datetime.now(dt.timezone.utc)
    when = cert.not_valid_after_utc.strftime("%Y-%m-%d %H:%M UTC")
    if left.total_seconds() <= 0:
        return f"{path} expired on {when}: nodes cannot connect; make a new one"
    if left < dt.timedelta(days=days):
        return f"{path} expires on {when} (in {left.days} days): renew it before then"
    return None


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


def _toml_pairs(values: Mapping[str, Value]) -> str:
    """``key=value`` pairs in TOML syntax, as ``--node-config`` and ``--run-config`` take them."""
    parts = []
    for key, value in values.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int | float):
            text = repr(value)
        else:
            text = json.dumps(str(value))  # a TOML basic string
        parts.append(f"{key}={text}")
    return " ".join(parts)


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


def _register_command(public_key: Path, name: str) -> list[str]:
    """``flwr supernode register``: admit the node holding ``public_key``'s private key, under
    ``name``, at the SuperLink of the ``reportfed`` connection (:func:`write_flwr_config`)."""
    return [
        "flwr", "supernode", "register", str(public_key), SUPERLINK_NAME,
        "--name", name, "--format", "json",
    ]  # fmt: skip


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


def generate_certificates(
    out_dir: str | Path, hosts: Sequence[str] = ("127.0.0.1", "localhost"), days: int = 365
) -> Certificates:
    """A self-signed CA and a server certificate for ``hosts`` (for trials and tests; hospitals
    use their own PKI)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("reportfed CA"))
        .issuer_name(name("reportfed CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    alt: list[x509.GeneralName] = []
    for host in hosts:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name(hosts[0]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    certs = Certificates(out / "ca.crt", out / "server.pem", out / "server.key")
    atomic_write(certs.ca, ca.public_bytes(pem))
    atomic_write(certs.cert, cert.public_bytes(pem))
    atomic_write(
        certs.key,
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )
    certs.key.chmod(0o600)
    return certs


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


def check_node_key(path: Path) -> list[str]:
    """Refuse, in one line, a node key Flower cannot use: not a private key (the ``.pub`` given
    for the ``.key``), not OpenSSH, or not ECDSA on NIST P-384 (say which kind it is). Returns
    warnings: a key others may read."""
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
        return [f"--key {path} can be read by other users of this machine: chmod 600 {path}"]
    return []


def registered_names(env: Mapping[str, str]) -> dict[str, int]:
    """The names of the nodes registered at the SuperLink of ``env``'s ``FLWR_HOME`` connection
    (:func:`write_flwr_config`), with their node ids, from Flower's Control API (``flwr supernode
    ls`` lists the same nodes, without their names)."""
    from flwr.cli.flower_config import read_superlink_connection
    from flwr.cli.utils import init_http_client_from_connection
    from flwr.proto.control_pb2 import ListNodesRequest

    previous = os.environ.get("FLWR_HOME")
    os.environ["FLWR_HOME"] = env["FLWR_HOME"]
    address = "the server"
    try:
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
    finally:
        if previous is None:
            os.environ.pop("FLWR_HOME", None)
        else:
            os.environ["FLWR_HOME"] = previous
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


#: what TLS and TCP failures say, and what they mean to the person who typed the command
_NOT_OUR_CA = (
    "the server's certificate was not signed by the CA of --root-certificates: use the ca.crt "
    "its operator gave"
)
_NOT_THIS_NAME = (
    "the server's certificate does not name this address: connect by a name it was made for "
    "(federation certs --host)"
)
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
    (
        "Server disconnected without sending a response",
        "the server speaks TLS and this side did not (--insecure): give --root-certificates",
    ),
    ("Connection refused", "nothing accepts connections there"),
    ("All connection attempts failed", "nothing accepts connections there"),
)


def connection_cause(text: str) -> str | None:
    """The plain cause of a failed connection from what Flower or the TLS library said
    (``None`` where it says none of the known ones)."""
    for said, cause in _CAUSES:
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


def supervise(cmd: Sequence[str], env: Mapping[str, str], *, keep: int = 40) -> tuple[int, str]:
    """Run ``cmd`` in a process group of its own, its output passed through to stderr, until it
    ends: a SIGINT or SIGTERM to this process stops the whole group (Flower's processes and the
    children they start), and so does this process ending, on Linux also when it is killed.
    Returns the exit status and the last ``keep`` lines of output, for the caller to say why it
    ended."""
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

    def stop(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)

    tail: collections.deque[str] = collections.deque(maxlen=keep)

    def relay() -> None:  # until every process of the group has closed the output
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stderr.write(line)
            sys.stderr.flush()
            tail.append(line)

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
    return status, "".join(tail)


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


def wait_for_server(
    address: str, timeout: float, *, say: Callable[[str], None] | None = None
) -> None:
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
        if say is not None and not said:
            say(f"waiting up to {timeout:g} s for the server at {address}")
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
        self, name: str, data: Path, key: NodeKeys | None = None, **node_config: Value
    ) -> None:
        """Start a SuperNode reading ``data`` (more node config as keywords). With TLS it
        authenticates with ``key``; without one, a key is made and registered for it first."""
        if not self.insecure and key is None:
            key = self.register(name)
        cmd = supernode_command(
            superlink=self.address,
            port=free_port(),
            node_config={"name": name, "data": str(data), **node_config},
            insecure=self.insecure,
            root_certificates=None if self.certificates is None else self.certificates.ca,
            key=None if key is None else key.private,
        )
        self._spawn(f"node-{name}", cmd)

    def kill_node(self, name: str) -> None:
        """SIGKILL a node's process group (a hospital going dark)."""
        os.killpg(self.procs[f"node-{name}"].pid, signal.SIGKILL)

    def run(self, run_config: Mapping[str, Value], timeout: float = 3600.0) -> str:
        """``flwr run`` to completion; returns its output, streamed to ``flwr-run.log`` as it
        comes (raises on failure or timeout)."""
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
