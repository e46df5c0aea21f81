"""``reportfed federation ...``: certificates, clear errors before any process starts, and a new
site importing labels from a global model without training."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

import numpy as np
import pytest

from reportfed.cli import main
from reportfed.core.config import FederationConfig
from reportfed.core.labels import LabelSpace
from reportfed.labeler import ReportLabeler


def test_certs_then_server_and_node_refuse_to_start_without_tls_material(
    tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    assert main(["federation", "certs", "--out", str(tmp_path / "c")]) == 0
    assert {p.name for p in (tmp_path / "c").iterdir()} == {"ca.crt", "server.pem", "server.key"}
    assert (tmp_path / "c" / "server.key").stat().st_mode & 0o077 == 0

    assert main(["federation", "server", "--certificates", str(tmp_path / "nowhere")]) == 2
    assert "missing certificate file(s)" in capsys.readouterr().err
    data = tmp_path / "site.csv"
    data.write_text("Reports,Cardiomegaly\nHeart is enlarged.,1\n")
    assert main(["federation", "node", "--data", str(data), "--superlink", "h:1"]) == 2
    assert "TLS and node authentication are the default" in capsys.readouterr().err
    ca = ["--root-certificates", str(tmp_path / "c" / "ca.crt")]
    assert main(["federation", "node", "--data", str(data), "--superlink", "h:1", *ca]) == 2
    assert "give --key (see `reportfed federation keys`)" in capsys.readouterr().err


def test_a_hospital_key_pair_is_made_once_and_only_registered_over_tls(
    tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    assert main(["federation", "keys", "--out", str(tmp_path), "--name", "st_marys"]) == 0
    key, pub = tmp_path / "st_marys.key", tmp_path / "st_marys.pub"
    assert key.stat().st_mode & 0o077 == 0
    assert key.read_text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert pub.read_text().startswith(
        "ecdsa-sha2-nistp384 "
    )  # what `flwr supernode register` takes
    before = key.read_bytes()
    assert main(["federation", "keys", "--out", str(tmp_path), "--name", "st_marys"]) == 2
    assert "exists: a hospital keeps its key" in capsys.readouterr().err
    assert key.read_bytes() == before
    register = ["federation", "register", str(pub), "--superlink", "h:1"]
    assert main([*register, "--insecure"]) == 2
    assert "nothing to register" in capsys.readouterr().err
    assert main(["federation", "register", str(tmp_path / "none.pub"), "--superlink", "h:1"]) == 2
    assert "no such public key file" in capsys.readouterr().err
    node = ["federation", "node", "--data", str(pub), "--superlink", "h:1"]
    assert main([*node, "--insecure", "--key", str(key)]) == 2
    assert "--key and --insecure exclude each other" in capsys.readouterr().err
    nolabels = tmp_path / "nolabels.csv"
    nolabels.write_text("Reports\nHeart is enlarged.\n")
    args = ["federation", "node", "--superlink", "h:1", "--insecure", "--data", str(nolabels)]
    assert main(args) == 2
    assert "label" in capsys.readouterr().err


def test_differential_privacy_with_knowledge_transfer_or_reading_is_refused_in_one_line(
    tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    run = ["federation", "run", "--superlink", "127.0.0.1:1", "--insecure", "--out", str(tmp_path)]
    assert main([*run, "--dp-noise", "0.5"]) == 2  # knowledge transfer is on by default
    err = capsys.readouterr().err
    assert err.startswith("reportfed: error: dp-noise needs distill = 0") and err.count("\n") == 1
    assert "add --distill 0 --no-read" in err
    assert main([*run, "--dp-noise", "0.5", "--distill", "0"]) == 2  # reading is on by default
    assert "add --distill 0 --no-read" in capsys.readouterr().err


def test_federation_run_trains_reports_and_says_where_image_runs_start(capsys) -> None:  # type: ignore[no-untyped-def]
    run = ["federation", "run", "--superlink", "127.0.0.1:1", "--insecure"]
    with pytest.raises(SystemExit) as refused:  # its flags are the report model's
        main([*run, "--modality", "images"])
    err = capsys.readouterr().err
    assert refused.value.code == 2
    assert err.splitlines()[-1] == "reportfed: error: unrecognized arguments: --modality images"
    with pytest.raises(SystemExit):
        main(["federation", "run", "--help"])
    shown = capsys.readouterr().out
    assert "--modality" not in shown  # its flags are the report model's
    assert "image federation is started with flwr run" in " ".join(shown.split())


def test_federation_run_findings_reach_the_server_app_whole(tmp_path: Path) -> None:
    """``federation run --findings FILE``: the file's definitions travel in the run config as
    flwr run passes it (Flower's own parser of ``--run-config``), quotes and backslashes
    whole, and the server holds a node to them."""
    import json

    from flwr.common.config import parse_config_args

    from reportfed.cli import build_parser
    from reportfed.cli.federation import _run_config
    from reportfed.core.node import Description
    from reportfed.flower.launch import run_command
    from reportfed.flower.registry import Registry
    from reportfed.text.findings import Findings, read_findings

    from .conftest import ROOT

    example = ROOT / "examples" / "findings.toml"
    quoted = tmp_path / "quoted.toml"  # an apostrophe and a backslash in a pattern
    quoted.write_text(
        "[[finding]]\nname = \"Bochdalek's hernia\"\npatterns = ['bochdalek\\S* hernia']\n"
    )
    for path in (example, quoted):
        args = build_parser().parse_args(["federation", "run", "--superlink", "h:1", "--insecure",
                                          "--out", str(tmp_path / "o"), "--findings", str(path)])  # fmt: skip
        command = run_command(_run_config(args))
        sent = parse_config_args([command[command.index("--run-config") + 1]])
        assert Findings.from_record(json.loads(sent["findings"])) == read_findings(path)
    registry = Registry(fingerprint="f", dim=4)
    registry.require_findings(json.loads(sent["findings"]))
    other = read_findings(example).record()
    other["findings"][0]["name"] = "Bochdalek's hernia"
    described = Description(
        "n", LabelSpace(("Edema",)), "f", 4, 10, {"findings": json.dumps(other)}
    )
    registry._admit(1, described)
    assert 'defines the finding "Bochdalek\'s hernia" otherwise' in registry.excluded[1]


def test_a_port_already_in_use_is_refused_in_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "site.csv"
    data.write_text("Reports,Cardiomegaly\nHeart is enlarged.,1\n")
    with socket.socket() as taken:  # e.g. a first node on this machine, or a running server
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        node = ["federation", "node", "--data", str(data), "--superlink", "h:1", "--insecure"]
        assert main([*node, "--port", port]) == 2
        err = capsys.readouterr().err
        assert err.startswith("reportfed: error: 127.0.0.1:" + port) and "own --port" in err
        assert (
            main(["federation", "server", "--insecure", "--host", "127.0.0.1", "--port", port]) == 2
        )
        assert "choose another --port" in capsys.readouterr().err


def test_a_new_site_imports_labels_from_the_global_model(
    tmp_path: Path, iu_embedded, minilm, capsys
) -> None:  # type: ignore[no-untyped-def]
    table, x = iu_embedded
    space = LabelSpace.of(["Cardiomegaly", "Pleural Effusion", "Atelectasis"])
    y = table.select_labels(space).labels
    labeler = ReportLabeler(
        granularity="report", config=FederationConfig(rounds=2, hidden=(32,)), progress=False
    )
    labeler.fit_embeddings(x[:600], y[:600], space, fingerprint=minilm.fingerprint)
    labeler.save(tmp_path / "global.safetensors")

    out = tmp_path / "mine.safetensors"
    args = ["federation", "import", "--model", str(tmp_path / "global.safetensors")]
    assert main([*args, "--labels", "Effusion, Cardiomegaly", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "labels ['Pleural Effusion', 'Cardiomegaly'] (no training)" in err
    assert "labels named as the model names them: Effusion -> Pleural Effusion" in err
    mine = ReportLabeler.load(out, progress=False)
    full = labeler.predict_scores_embeddings(x[600:700])
    cols = [list(labeler.classes_).index(c) for c in mine.classes_]
    np.testing.assert_allclose(mine.predict_scores_embeddings(x[600:700]), full[:, cols], rtol=1e-6)
    np.testing.assert_array_equal(mine.thresholds_, labeler.thresholds_[cols])

    assert main([*args, "--labels", "Fracture", "--out", str(tmp_path / "x.safetensors")]) == 2
    assert "Fracture" in capsys.readouterr().err


def test_a_run_that_fails_says_why_in_one_line_and_exits_1(processes: None, tmp_path: Path) -> None:
    """Real processes: a SuperLink no node joins, and ``federation run`` as a user types it. The
    run fails (too few nodes): exit status 1, one ``reportfed: error:`` line last, no traceback,
    and no "global model:" line for a file that was not written."""
    import os
    import subprocess

    from tests.loopback import LoopbackFederation

    out = tmp_path / "run"
    with LoopbackFederation(tmp_path) as cluster:
        env = {**os.environ, "REPORTFED_FLWR_HOME": str(tmp_path / "flwr-home-cli")}
        cmd = ["reportfed", "federation", "run", "--superlink", cluster.address, "--insecure"]
        cmd += ["--min-nodes", "2", "--join-timeout", "1", "--rounds", "1", "--out", str(out)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1, done.stderr[-2000:]
    assert lines[-1] == (
        "reportfed: error: only 0 of 2 nodes connected after 1 s (--min-nodes, --join-timeout)"
    )
    assert "Traceback" not in done.stdout + done.stderr
    assert "\x1b[" not in done.stderr  # Flower's log, relayed, carries no colour off a terminal
    assert (
        "global model:" not in done.stdout + done.stderr
        and not (out / "global.safetensors").exists()
    )


def test_a_node_key_flower_cannot_use_is_refused_in_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    from reportfed.flower.processes import free_port

    def ssh_key(key, name: str) -> Path:  # type: ignore[no-untyped-def]
        path = tmp_path / name
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.OpenSSH,
                serialization.NoEncryption(),
            )
        )
        path.chmod(0o600)
        return path

    data = tmp_path / "site.csv"
    data.write_text("Reports,Cardiomegaly\nHeart is enlarged.,1\n")
    assert main(["federation", "keys", "--out", str(tmp_path / "keys"), "--name", "h"]) == 0
    assert main(["federation", "certs", "--out", str(tmp_path / "certs")]) == 0
    node = ["federation", "node", "--data", str(data), "--superlink", "127.0.0.1:1"]
    node += ["--root-certificates", str(tmp_path / "certs" / "ca.crt"), "--port", str(free_port())]
    wrong = {
        tmp_path / "keys" / "h.pub": "is a public key: give the private key beside it (h.key)",
        ssh_key(rsa.generate_private_key(65537, 2048), "rsa.key"): "is an RSA key; Flower's",
        ssh_key(ed25519.Ed25519PrivateKey.generate(), "ed.key"): "is an Ed25519 key; Flower's",
        ssh_key(ec.generate_private_key(ec.SECP256R1()), "p256.key"): "is an ECDSA on secp256r1",
        data: "is not an unencrypted OpenSSH private key; make one with `reportfed federation keys`",
    }
    for key, message in wrong.items():
        assert main([*node, "--key", str(key)]) == 2
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert last.startswith(f"reportfed: error: --key {key} ") and message in last
    # a CA certificate file that holds none: one line (Flower's SuperNode ended in a traceback
    # and hung on its way out)
    key = str(tmp_path / "keys" / "h.key")
    no_ca = [*node[:-4], "--root-certificates", str(data), "--key", key]
    assert main(no_ca) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"reportfed: error: {data} holds no PEM certificate: use the files " + (
        "`reportfed federation certs` wrote"
    )
    afile = tmp_path / "afile"
    afile.write_text("")
    assert main(["federation", "keys", "--out", str(afile / "keys"), "--name", "h"]) == 2
    assert "cannot make the key folder" in capsys.readouterr().err


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux's /proc")
def test_a_killed_node_command_leaves_no_supernode_behind(processes: None, tmp_path: Path) -> None:
    """SIGKILL (the OOM killer's) reaches no handler of ``federation node``; its SuperNode, which
    would retry a server forever, ends with it all the same."""
    import signal
    import subprocess
    import sys
    import time

    data = tmp_path / "site.csv"
    data.write_text("Reports,Cardiomegaly\nHeart is enlarged.,1\n")
    from reportfed.flower.processes import free_port

    port = str(free_port())
    argv = ["federation", "node", "--data", str(data), "--superlink", "127.0.0.1:1", "--insecure"]
    node = subprocess.Popen(  # a server that is not there: the SuperNode keeps retrying
        [sys.executable, "-m", "reportfed", *argv, "--port", port],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (children := _children(node.pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert children, "federation node started no SuperNode within 60 s"
        node.kill()
        node.wait()
        deadline = time.monotonic() + 15
        while any(map(_running, children)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(map(_running, children))
    finally:  # whatever the outcome, no process of this node's port lives on
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            with contextlib.suppress(OSError):
                words = cmdline.read_text(errors="replace").split("\0")
                if port in words or f"127.0.0.1:{port}" in words:
                    os.kill(int(cmdline.parent.name), signal.SIGKILL)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux's /proc")
def test_a_node_stopped_on_purpose_exits_0_and_its_log_file_has_no_colour_codes(
    processes: None,
    tmp_path: Path,
) -> None:
    """SIGTERM (systemd's stop, ``kill``) is a clean stop, not an error; a log written to a file
    holds Flower's lines without the terminal's colour codes."""
    import signal
    import subprocess
    import sys
    import time

    data = tmp_path / "site.csv"
    data.write_text("Reports,Cardiomegaly\nHeart is enlarged.,1\n")
    from reportfed.flower.processes import free_port

    argv = ["federation", "node", "--data", str(data), "--superlink", "127.0.0.1:1", "--insecure"]
    log = tmp_path / "node.log"
    with open(log, "w") as out:
        node = subprocess.Popen(  # a server that is not there: the SuperNode keeps retrying
            [sys.executable, "-m", "reportfed", *argv, "--port", str(free_port())],
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 60
            while (
                "Starting Flower SuperNode" not in log.read_text() and time.monotonic() < deadline
            ):
                time.sleep(0.2)
            node.send_signal(signal.SIGTERM)
            status = node.wait(timeout=30)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGKILL)
    text = log.read_text()
    assert "Starting Flower SuperNode" in text, text[-2000:]
    assert status == 0, text[-2000:]
    assert text.strip().splitlines()[-1] == "node stopped (SIGTERM)"
    assert "\x1b[" not in text


def test_free_ports_lie_below_the_ports_outgoing_connections_take() -> None:
    """A node's port is chosen before its process binds it; a port the OS may lend an outgoing
    connection meanwhile (another node's gRPC channel) would collide."""
    from reportfed.flower.processes import LOWEST_PORT, _ephemeral_ports, free_port

    below = _ephemeral_ports()[0]
    ports = [free_port() for _ in range(50)]
    assert all(LOWEST_PORT <= port < below for port in ports) and len(set(ports)) > 1


def test_a_reset_is_a_tls_servers_answer_only_to_a_side_that_did_not_speak_tls() -> None:
    from reportfed.flower.processes import connection_cause

    said = "Connection attempt failed: [Errno 104] Connection reset by peer"
    assert connection_cause(said, insecure=True) == connection_cause(
        "Server disconnected without sending a response"
    )
    assert connection_cause(said) is None  # over TLS a reset says nothing known


def test_a_node_that_cannot_reach_its_server_stops_in_bounded_time_naming_the_cause(
    processes: None,
    tmp_path: Path,
) -> None:
    """Real processes, as a hospital types them: a node with the wrong CA, with --insecure
    against a TLS server, against an expired certificate and at a dead port each end within
    their --connect-timeout with one line naming the address and the cause, and exit status 1."""
    import subprocess
    import time

    from reportfed.flower.identity import generate_node_keys
    from reportfed.flower.processes import free_port
    from reportfed.flower.tls import generate_certificates
    from tests.loopback import LoopbackFederation

    certs = generate_certificates(tmp_path / "certs")
    other = generate_certificates(tmp_path / "other")
    expired = generate_certificates(tmp_path / "expired", days=0)
    data = tmp_path / "site.csv"
    data.write_text("Reports,Edema\nMild edema.,1\nNo edema.,0\nClear lungs.,0\n")
    key = generate_node_keys(tmp_path / "keys", "hospital_a")

    def node(address: str, *tls: str) -> tuple[subprocess.CompletedProcess[str], float]:
        cmd = ["reportfed", "federation", "node", "--superlink", address, "--data", str(data),
               "--port", str(free_port()), "--connect-timeout", "5", *tls]  # fmt: skip
        started = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        return done, time.monotonic() - started

    with LoopbackFederation(tmp_path, certificates=certs) as cluster:
        cases = {
            "wrong CA": (
                ["--root-certificates", str(other.ca), "--key", str(key.private)],
                "the server's certificate was not signed by the CA of --root-certificates: use "
                "the ca.crt its operator gave",
            ),
            "insecure against TLS": (
                ["--insecure"],
                "the server speaks TLS and this side did not (--insecure): give "
                "--root-certificates",
            ),
        }
        for case, (tls, cause) in cases.items():
            done, seconds = node(cluster.address, *tls)
            assert done.returncode == 1, (case, done.stderr[-2000:])
            assert done.stderr.strip().splitlines()[-1] == (
                f"reportfed: error: this node could not reach the server at {cluster.address} "
                f"for 5 s (--connect-timeout): {cause}"
            ), case
            assert seconds < 120, case
        # the operator's commands with the wrong CA: one line, the address and the cause
        run = ["reportfed", "federation", "run", "--superlink", cluster.address,
               "--root-certificates", str(other.ca), "--out", str(tmp_path / "run")]  # fmt: skip
        done = subprocess.run(run, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == (
            f"reportfed: error: cannot reach the operator API of the server at {cluster.address}"
            ": the server's certificate was not signed by the CA of --root-certificates: use the "
            "ca.crt its operator gave"
        )
    time.sleep(1)  # the certificate made with days=0 has expired by now
    (tmp_path / "x").mkdir()
    with LoopbackFederation(tmp_path / "x", certificates=expired) as cluster:
        done, _ = node(cluster.address, "--root-certificates", str(expired.ca), "--key",
                       str(key.private))  # fmt: skip
        assert done.returncode == 1
        assert (
            done.stderr.strip()
            .splitlines()[-1]
            .endswith(
                "(--connect-timeout): the server's certificate has expired: it needs a new one"
            )
        )
    dead = f"127.0.0.1:{free_port()}"
    done, seconds = node(dead, "--insecure")
    assert done.returncode == 1 and seconds < 120
    assert done.stderr.strip().splitlines()[-1] == (
        f"reportfed: error: this node could not reach the server at {dead} for 5 s "
        "(--connect-timeout): nothing accepts connections there"
    )


def test_a_certificate_near_its_end_and_a_key_others_can_read_are_warned_about(
    tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    """Both warnings are ``ReportfedWarning``s from the library, pointing at the caller's line,
    which the command line prints as ``reportfed: warning:`` lines."""
    from reportfed.core.errors import ReportfedWarning
    from reportfed.flower.identity import NodeKeys, check_node_key
    from reportfed.flower.tls import generate_certificates, warn_if_expiring

    certs = generate_certificates(tmp_path / "certs", days=10)
    with pytest.warns(ReportfedWarning, match=r"expires on .* \(in 9 days\)") as said:
        warn_if_expiring(certs.ca)
    assert said[0].filename == __file__
    assert main(["federation", "keys", "--out", str(tmp_path / "keys"), "--name", "h"]) == 0
    key = NodeKeys.named(tmp_path / "keys", "h").private
    key.chmod(0o644)
    with pytest.warns(ReportfedWarning, match="can be read by other users"):
        check_node_key(key)
