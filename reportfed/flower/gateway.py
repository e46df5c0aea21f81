"""The nodes' gateway: Debian's nginx in front of the SuperLink, passing only Flower's Fleet API.

Flower 1.41's SuperLink serves the nodes' Fleet API, the operator's Control API (register, run,
list, stop) and the Runtime API of its own ServerApp processes over one HTTP listener
(``--host/--port``); the open-source distribution has no account authentication for the
Control API (its OIDC plugin ships only with Flower's enterprise package), so whoever reaches the
nodes' port could operate the server. reportfed therefore keeps the SuperLink on the server's
loopback and, when nodes connect from other hosts, puts nginx on the public address: it
terminates TLS with the server's certificate and forwards ``/v1/fleet/`` alone; every other path
is refused with 403 before it reaches Flower. Node authentication is unchanged: each Fleet call
carries the node's signed timestamp, which the SuperLink checks.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
from pathlib import Path

from reportfed.core.errors import ReportfedError
from reportfed.core.files import atomic_write
from reportfed.core.limits import MAX_REQUEST_BYTES
from reportfed.flower.launch import OPERATOR_HOST
from reportfed.flower.tls import Certificates

#: the one path prefix the gateway forwards: Flower's Fleet API, what SuperNodes call
FLEET_PATH = "/v1/fleet/"
#: Debian's package that has nginx with TLS and the proxy module
NGINX_PACKAGE = "nginx-light"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine (``localhost``, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def find_nginx() -> str:
    """The nginx binary (on ``PATH``, or Debian's ``/usr/sbin/nginx``, which a user's ``PATH``
    often lacks); refuse in one line where there is none."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise ReportfedError(
            "serving nodes on another address than the loopback needs nginx, which passes them "
            f"Flower's node API alone (Debian: apt-get install {NGINX_PACKAGE}); for a trial on "
            "this machine alone, give --host 127.0.0.1"
        )
    return found


def _listen(host: str, port: int) -> str:
    host = host.strip("[]")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def gateway_config(
    directory: Path,
    *,
    host: str,
    port: int,
    upstream_port: int,
    certificates: Certificates | None,
) -> Path:
    """Write the gateway's ``nginx.conf`` into ``directory`` (its pid file and temporary files
    stay there too): TLS with ``certificates`` on ``host:port`` (plain HTTP without them),
    ``/v1/fleet/`` forwarded to the SuperLink on the loopback's ``upstream_port``, anything
    else refused (403). The loopback hop is not verified: it never leaves this machine.

    A request body may hold :data:`~reportfed.core.limits.MAX_REQUEST_BYTES` (the largest
    update a run may produce); a larger one is answered 413 before it reaches Flower. The
    server's log names where every refused request came from: nginx logs a body too large and
    a path other than the node API (``deny all``: "access forbidden by rule, client: ..."), and
    the SuperLink, which reads the client's address from the ``X-Forwarded-For`` header nginx
    sets (uvicorn trusts it from the loopback alone), logs what it answers, a key it does not
    activate among them (412). Paths are written absolute: nginx reads relative ones against
    its own prefix, not the caller's folder."""
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o711)  # root's nginx workers run as nobody and need to enter it
    scheme = "http" if certificates is None else "https"
    tls = (
        ""
        if certificates is None
        else f"""
        ssl_certificate {certificates.cert.resolve()};
        ssl_certificate_key {certificates.key.resolve()};
        ssl_protocols TLSv1.2 TLSv1.3;"""
    )
    temp = "\n".join(
        f"    {kind}_temp_path {directory / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    text = f"""# written by `reportfed federation server`: only Flower's node API leaves this machine
worker_processes 1;
pid {directory / "nginx.pid"};
error_log stderr warn;
events {{
    worker_connections 1024;
}}
http {{
    access_log off;
    server_tokens off;
    client_max_body_size {MAX_REQUEST_BYTES};
{temp}
    server {{
        listen {_listen(host, port)}{"" if certificates is None else " ssl"};{tls}
        location {FLEET_PATH} {{
            proxy_pass {scheme}://{OPERATOR_HOST}:{upstream_port};
            proxy_http_version 1.1;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_request_buffering off;
            proxy_buffering off;
            proxy_read_timeout 3600s;
            proxy_send_timeout 3600s;
        }}
        location / {{
            deny all;
        }}
    }}
}}
"""
    return atomic_write(directory / "nginx.conf", text.encode())


def gateway_command(nginx: str, config: Path) -> list[str]:
    """nginx in the foreground on ``config``, its errors on stderr from the first line."""
    return [nginx, "-e", "stderr", "-p", str(config.parent), "-c", str(config), "-g", "daemon off;"]


def check_gateway(nginx: str, config: Path) -> None:
    """``nginx -t``: refuse a configuration nginx cannot use, in one line with its reason."""
    cmd = gateway_command(nginx, config)
    done = subprocess.run([*cmd[:-2], "-t", "-q"], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        reason = " ".join(done.stderr.split())
        raise ReportfedError(f"nginx cannot serve the nodes' port: {reason}")
