"""Who may do what, across hosts: a server, two hospitals and an outsider, each in its own
network namespace on one link (``netns.py``), every party running the commands the README gives
it, as real processes. The outsider holds ``ca.crt`` (every hospital is given it) and reaches
the server's public port, as any host on a hospital network would."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from reportfed.core.errors import ReportfedError
from reportfed.flower.gateway import find_nginx
from reportfed.flower.launch import write_flwr_config

from .netns import Link, can_make_namespaces

pytestmark = pytest.mark.usefixtures("processes")  # every test here: real processes, slow

#: the port the nodes reach, on every address of the server (``federation server``'s default)
PUBLIC_PORT = 9092
#: where the operator's commands reach the server: its loopback (``federation server``'s default)
OPERATOR = os.environ.get("RF_OPERATOR", "127.0.0.1:9093")
REPORTFED = [sys.executable, "-m", "reportfed"]


def _last_line(done: object) -> str:
    lines = (getattr(done, "stderr", "") or "").strip().splitlines()
    return lines[-1] if lines else ""


def _party_env(root: Path, party: str) -> dict[str, str]:
    """A party's environment: its own user cache (so its own Flower home) and HOME."""
    home = root / party
    home.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "HOME": str(home),
        "REPORTFED_CACHE_DIR": str(home / "cache"),
        "PYTHONUNBUFFERED": "1",
    }


def _wait_for(path: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise AssertionError(
        f"{path.name} never said {text!r}:\n{path.read_text(errors='replace')[-3000:]}"
    )


def test_only_the_operator_operates_and_only_registered_hospitals_join(
    tmp_path: Path, tables: dict[str, Path], embeddings_cache: Path
) -> None:
    why = can_make_namespaces()
    if why is not None:
        pytest.skip(why)
    try:
        find_nginx()
    except ReportfedError as exc:
        pytest.skip(str(exc))
    transcript: list[str] = []
    with Link(["server", "a", "b", "outsider"]) as link:
        bare_run = link.run

        def run(host: str, cmd: list[str], env: dict[str, str], timeout: float = 120.0,  # type: ignore[no-untyped-def]
                cwd: Path | None = None):  # fmt: skip
            done = bare_run(host, cmd, env, timeout, cwd)
            shown = " ".join(c if not c.startswith("/") else Path(c).name for c in cmd)
            last = (done.stderr.strip() or done.stdout.strip()).splitlines()
            transcript.append(
                f"{host}$ {shown}\n  exit {done.returncode}: {last[-1] if last else ''}"
            )
            return done

        link.run = run  # type: ignore[method-assign]
        server_ip = link.address("server")
        public = f"{server_ip}:{PUBLIC_PORT}"
        env = {p: _party_env(tmp_path, p) for p in ("server", "a", "b", "outsider")}
        certs = tmp_path / "server" / "certs"
        made = link.run(
            "server",
            [*REPORTFED, "federation", "certs", "--out", str(certs), "--host", server_ip,
             "--host", "127.0.0.1"],
            env["server"],
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        ca = certs / "ca.crt"  # what every hospital, and the outsider, holds
        # the server command as docs/federation.md writes it: the certificates' folder relative
        link.spawn(
            "server",
            [*REPORTFED, "federation", "server", "--certificates", "certs"],
            env["server"],
            tmp_path / "server.log",
            cwd=certs.parent,
        )
        deadline = time.monotonic() + 60
        while link.run("a", ["bash", "-c", f"exec 3<>/dev/tcp/{server_ip}/{PUBLIC_PORT}"],
                       env["a"]).returncode != 0:  # fmt: skip
            assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.5)
        tls = ["--root-certificates", str(ca)]

        # each hospital makes its key pair; the operator, on the server, registers both
        for hospital in ("a", "b", "outsider"):
            keys = link.run(
                hospital,
                [*REPORTFED, "federation", "keys", "--out", str(tmp_path / hospital / "keys"),
                 "--name", hospital],
                env[hospital],
            )  # fmt: skip
            assert keys.returncode == 0, keys.stderr
        for hospital in ("a", "b"):
            public_key = tmp_path / hospital / "keys" / f"{hospital}.pub"
            done = link.run(
                "server",
                [*REPORTFED, "federation", "register", str(public_key), "--superlink", OPERATOR,
                 *tls],
                env["server"],
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert f"registered '{hospital}'" in done.stderr

        # the outsider, holding ca.crt, can neither register itself ...
        mine = tmp_path / "outsider" / "keys" / "outsider.pub"
        done = link.run(
            "outsider",
            [*REPORTFED, "federation", "register", str(mine), "--superlink", public, *tls],
            env["outsider"],
        )
        assert done.returncode != 0, f"the outsider registered itself:\n{done.stderr}"
        assert _last_line(done).startswith("reportfed: error: "), done.stderr
        # ... nor list the registered nodes or the runs, with Flower's own commands
        write_flwr_config(Path(env["outsider"]["REPORTFED_CACHE_DIR"]) / "flwr-home", public,
                          root_certificates=ca)  # fmt: skip
        flwr_env = {
            **env["outsider"],
            "FLWR_HOME": str(Path(env["outsider"]["REPORTFED_CACHE_DIR"]) / "flwr-home"),
        }
        for cmd in (["flwr", "supernode", "ls", "reportfed"], ["flwr", "ls", "reportfed"]):
            done = link.run("outsider", cmd, flwr_env, timeout=60)
            assert done.returncode != 0, f"the outsider ran {cmd}:\n{done.stdout}"

        # the hospitals join over TLS, naming the server by its real address
        for hospital in ("a", "b"):
            link.spawn(
                hospital,
                [*REPORTFED, "federation", "node", "--superlink", public, *tls,
                 "--key", str(tmp_path / hospital / "keys" / f"{hospital}.key"),
                 "--data", str(tables[hospital]), "--name", hospital,
                 "--cache-dir", str(embeddings_cache)],
                env[hospital],
                tmp_path / f"node-{hospital}.log",
            )  # fmt: skip
        # the outsider's node, with its own unregistered key, is refused in one line, before
        # it reads or embeds its reports (in a fresh cache, which it would have to fill)
        started = time.monotonic()
        done = link.run(
            "outsider",
            [*REPORTFED, "federation", "node", "--superlink", public, *tls,
             "--key", str(tmp_path / "outsider" / "keys" / "outsider.key"),
             "--data", str(tables["c"]), "--name", "outsider",
             "--cache-dir", str(tmp_path / "outsider" / "embeddings")],
            env["outsider"],
            timeout=120,
        )  # fmt: skip
        refused_in = time.monotonic() - started
        transcript.append(f"  (refused in {refused_in:.1f} s)")
        assert done.returncode == 1, done.stderr[-3000:]
        assert "did not activate this node's key" in _last_line(done)
        assert "reading and embedding" not in done.stderr
        assert not (tmp_path / "outsider" / "embeddings").exists()
        # the server's log names where each refused request came from: its key ...
        outsider_ip = link.address("outsider")
        server_log = (tmp_path / "server.log").read_text(errors="replace")
        assert f'{outsider_ip}:0 - "POST /v1/fleet/activate-node HTTP/1.1" 412' in server_log
        # ... and its operator commands
        assert f"access forbidden by rule, client: {outsider_ip}" in server_log
        # a body larger than any update is refused by the gateway, before Flower reads it
        done = link.run(
            "outsider",
            ["bash", "-c", f"head -c 70000000 /dev/zero | curl -s -o /dev/null -w '%{{http_code}}' "
             f"--cacert {ca} -X POST --data-binary @- https://{public}/v1/fleet/push-object"],
            env["outsider"], timeout=120,
        )  # fmt: skip
        assert done.stdout == "413", done.stdout + done.stderr
        server_log = (tmp_path / "server.log").read_text(errors="replace")
        assert f"client intended to send too large body: 70000000 bytes, client: {outsider_ip}" in (
            server_log
        )

        # the outsider cannot start a run ...
        out = tmp_path / "outsider" / "run"
        done = link.run(
            "outsider",
            [*REPORTFED, "federation", "run", "--superlink", public, *tls, "--rounds", "1",
             "--out", str(out), "--connect-timeout", "5"],
            env["outsider"],
            timeout=120,
        )  # fmt: skip
        assert done.returncode != 0, "the outsider started a run"
        assert _last_line(done).startswith("reportfed: error: ")
        assert not (out / "global.safetensors").exists()

        # the operator runs two rounds with the two hospitals
        run_out = tmp_path / "server" / "run"
        run_log = tmp_path / "run.log"
        operator = link.spawn(
            "server",
            [*REPORTFED, "federation", "run", "--superlink", OPERATOR, *tls, "--rounds", "2",
             "--min-nodes", "2", "--out", str(run_out)],
            env["server"],
            run_log,
        )  # fmt: skip
        # the operator lists the run; the outsider cannot stop it
        server_home = Path(env["server"]["REPORTFED_CACHE_DIR"]) / "flwr-home"
        server_flwr = {**env["server"], "FLWR_HOME": str(server_home)}
        deadline = time.monotonic() + 120
        runs: list[dict[str, object]] = []
        while not runs:
            listed = link.run("server", ["flwr", "ls", "reportfed", "--format", "json"],
                              server_flwr, timeout=60)  # fmt: skip
            assert listed.returncode == 0, listed.stdout + listed.stderr
            runs = json.loads(listed.stdout[listed.stdout.find("{") :]).get("runs", [])
            assert time.monotonic() < deadline, "the operator's run never appeared"
            time.sleep(1)
        run_id = str(runs[0]["run-id"])
        done = link.run("outsider", ["flwr", "stop", run_id, "reportfed"], flwr_env, timeout=60)
        assert done.returncode != 0, f"the outsider stopped run {run_id}:\n{done.stdout}"

        assert operator.wait(timeout=600) == 0, run_log.read_text()[-4000:]
        model = run_out / "global.safetensors"
        assert model.is_file()
        history = json.loads((run_out / "history.json").read_text())
        assert len(history) == 2
        assert sorted(history[-1]["accepted"]) == ["a", "b"]
        text = run_log.read_text()
        assert "outsider" not in text
    print("\n".join(transcript))  # pytest -s shows who could do what
