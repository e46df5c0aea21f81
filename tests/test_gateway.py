"""The nodes' gateway's pieces (``reportfed.flower.gateway``); the gateway at work, across hosts,
is ``test_network_roles``."""

from __future__ import annotations

from pathlib import Path

import pytest

from reportfed.cli import main
from reportfed.core.errors import ReportfedError
from reportfed.flower.gateway import (
    FLEET_PATH,
    check_gateway,
    find_nginx,
    gateway_config,
    is_loopback,
)
from reportfed.flower.processes import free_port
from reportfed.flower.tls import generate_certificates


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("localhost", True), ("::1", True),
     ("[::1]", True), ("0.0.0.0", False), ("198.18.0.1", False), ("fl.example.org", False)],
)  # fmt: skip
def test_only_loopback_hosts_serve_without_a_gateway(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_the_gateway_forwards_the_node_api_alone_and_nginx_accepts_its_config(
    processes: None,
    tmp_path: Path,
) -> None:
    try:
        nginx = find_nginx()
    except ReportfedError as exc:
        pytest.skip(str(exc))
    certs = generate_certificates(tmp_path / "certs")
    config = gateway_config(
        tmp_path / "gw", host="127.0.0.1", port=free_port(), upstream_port=9093, certificates=certs
    )
    text = config.read_text()
    assert text.count("location ") == 2 and f"location {FLEET_PATH} {{" in text
    assert "proxy_pass https://127.0.0.1:9093;" in text and "deny all;" in text
    check_gateway(nginx, config)  # nginx -t
    config.write_text(text.replace("ssl_certificate ", "ssl_certificat "))
    with pytest.raises(
        ReportfedError, match=r"^nginx cannot serve the nodes' port: .*ssl_certificat"
    ):
        check_gateway(nginx, config)


@pytest.mark.parametrize("name", ["../../x", "/tmp/x", "a/b", "..", "", ".hidden", "a b"])
def test_a_hospital_name_is_a_name_not_a_path(tmp_path: Path, name: str, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "keys"
    assert main(["federation", "keys", "--out", str(out), "--name", name]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"reportfed: error: --name {name!r} is not a name") and err.count("\n") == 1
    )
    assert not out.exists() and list(tmp_path.parent.glob("x*")) == []
