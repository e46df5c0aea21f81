"""A hospital's node runs only reportfed's ClientApp, whatever app a run names.

A Flower run carries an app bundle (FAB) built by whoever submits it; Flower's SuperNode hands
each message to a fresh ``flwr-clientapp`` process that unpacks the bundle, puts its folder first
on ``sys.path`` and imports the ClientApp its ``pyproject.toml`` names, so a bundle with code of
its own would run it on the hospital's machine. Flower's own check, ``--trusted-entities``, takes
only bundles signed through Flower's hub (the SuperLink must fetch their signatures online; a
bundle ``flwr run`` submits from a folder carries none, and every run is then refused).

So reportfed's node starts its SuperNode with ``--isolation process`` and answers the
SuperNode's tasks itself, here: it pulls each task's message and bundle with Flower's runtime
client, refuses a bundle that holds anything but reportfed's ``pyproject.toml`` (and Flower's
``.info/CONTENT`` listing) or names another ClientApp, and runs the installed
``reportfed.flower.client_app.app`` on the others. A bundle is never unpacked, and nothing of it
is imported. A refused run gets an error reply naming why, and the node's log says so.

The SuperNode's runtime API (``127.0.0.1:PORT``, plain HTTP) would hand its tasks, and with
them the global model and the right to answer as the node, to any process on the machine that
asks. So the guard starts the SuperNode with Flower's SuperExec authentication: a random secret,
in a file only this user can read, that the SuperNode requires of every request for a task
(an HMAC over the request), which only the guard signs.

The guard also waits for the SuperLink to activate the node (its key registered, no node with
that key online) before it warms the node up, so a node that is refused learns it before it
reads and embeds anything.

``python -m reportfed.flower.guard --runtime-api-address HOST:PORT -- flower-supernode ...``
starts the SuperNode as its child (one process group: stopping the node stops both) and serves
its tasks until it ends; :func:`reportfed.flower.launch.supernode_command` builds that command.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import tomllib
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reportfed.core.errors import without_paths
from reportfed.flower.warm import prestart, private_root, remove_places, write_secret

#: the files of reportfed's app bundle (``flower/app/``, as ``flwr run`` builds it)
BUNDLE_FILES = frozenset({"pyproject.toml", ".info/CONTENT"})
#: the one ClientApp a reportfed node runs
CLIENTAPP = "reportfed.flower.client_app:app"
#: seconds between asking the SuperNode for a task (Flower's SuperExec polls every second)
POLL_S = 0.1
#: what a SuperNode prints once the SuperLink has activated it
ACTIVATED = "SuperNode ID:"
#: the one runtime call that hands out tasks, which the SuperNode authenticates
_ACQUIRE = "/flwr.proto.Runtime/AcquireTask"

log = logging.getLogger("reportfed.node")


def check_bundle(content: bytes) -> str | None:
    """Why a run's app bundle is not reportfed's (``None`` when it is): files beside the app
    descriptor, or a ClientApp other than :data:`CLIENTAPP`. Reads the zip's names and the
    descriptor's TOML; never extracts or imports anything."""
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as bundle:
            names = set(bundle.namelist())
            extra = sorted(names - BUNDLE_FILES)
            if extra:
                shown = ", ".join(extra[:5]) + (" ..." if len(extra) > 5 else "")
                return f"its app bundle carries files of its own ({shown})"
            if "pyproject.toml" not in names:
                return "its app bundle has no pyproject.toml"
            config = tomllib.loads(bundle.read("pyproject.toml").decode("utf-8"))
    except (zipfile.BadZipFile, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return f"its app bundle cannot be read ({exc})"
    named = config.get("tool", {}).get("flwr", {}).get("app", {}).get("components", {})
    clientapp = named.get("clientapp") if isinstance(named, dict) else None
    if clientapp != CLIENTAPP:
        return f"its app names the ClientApp {clientapp!r}, not reportfed's {CLIENTAPP!r}"
    return None


def _runtime_client(
    address: str,
    component: str,
    *,
    token: str | None = None,
    tries: int | None = None,
    secret: bytes | None = None,
) -> Any:
    """Flower's client of the SuperNode's runtime API at ``address`` (this machine's loopback,
    plain HTTP) as ``component``: with ``token``, a task's; with ``secret``, the SuperExec's,
    signing its requests for tasks; ``tries`` bounds each call's retries (Flower's default:
    none)."""
    from flwr.supercore.interceptors import (
        RuntimeTokenHttpInterceptor,
        RuntimeVersionHttpInterceptor,
    )
    from flwr.supercore.interceptors.http.superexec_auth import SuperExecAuthHttpInterceptor
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient

    retry = make_simple_http_retry_invoker()
    retry.max_tries = tries
    interceptors: list[Any] = [RuntimeVersionHttpInterceptor(component_name=component)]
    if token is not None:
        interceptors.append(RuntimeTokenHttpInterceptor(token))
    if secret is not None:
        interceptors.append(
            SuperExecAuthHttpInterceptor(master_secret=secret, protected_methods=[_ACQUIRE])
        )
    return RuntimeHttpClient.from_server_address(
        server_address=address, insecure=True, root_certificates=None,
        interceptors=interceptors, retry_invoker=retry,
    )  # fmt: skip


def answer_task(address: str, token: str) -> None:
    """Answer one task of the SuperNode at ``address``: pull its message and the run's bundle,
    then reply with reportfed's ClientApp, or with an error where the bundle is not reportfed's
    or the ClientApp fails. Flower's own runtime calls throughout (those ``flwr-clientapp``
    makes), without unpacking the bundle or importing from it."""
    from flwr.app import Message
    from flwr.app.error import Error
    from flwr.common.constant import ErrorCode, SubStatus
    from flwr.supercore.heartbeat import HeartbeatSender, make_task_heartbeat_fn_http
    from flwr.supernode.runtime.run_clientapp import (
        pull_task_input,
        push_message,
        push_task_output,
    )

    client = _runtime_client(address, "flwr-clientapp", token=token)
    heartbeat = HeartbeatSender(make_task_heartbeat_fn_http(client))
    heartbeat.start()
    context = None
    status, details = SubStatus.FAILED, "the task ended before its message was read"
    try:
        message, context, run, fab = pull_task_input(client)
        refused = check_bundle(fab.content)
        if refused is not None:
            details = f"reportfed's node refused run {run.run_id}: {refused}"
            log.error(details)
            reply = Message(Error(code=ErrorCode.LOAD_CLIENT_APP_EXCEPTION, reason=details),
                            reply_to=message)  # fmt: skip
        else:
            from reportfed.flower.client_app import app

            started = time.monotonic()
            kind = message.metadata.message_type
            try:
                reply = app(message=message, context=context)
                status, details = SubStatus.COMPLETED, ""
                seconds = time.monotonic() - started
                if reply.has_error():
                    log.error("run %s: answered its %s message with an error in %.1f s: %s",
                              run.run_id, kind, seconds, reply.error.reason)  # fmt: skip
                else:
                    log.info("run %s: answered its %s message in %.1f s", run.run_id, kind,
                             seconds)  # fmt: skip
            except Exception as exc:  # the ClientApp's failure goes back as Flower's would
                details = without_paths(f"{type(exc).__name__}: {exc}")
                log.exception("the ClientApp raised an exception")
                reply = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=details),
                                reply_to=message)  # fmt: skip
        push_message(client, reply, context)
    finally:
        push_task_output(client=client, context=context, sub_status=status, details=details)
        heartbeat.stop()
        client.close()


def serve(address: str, supernode: subprocess.Popen[str], secret: bytes) -> int:
    """Answer the tasks of the SuperNode at ``address`` one at a time until it ends, asking
    for them with the SuperExec ``secret`` it was started with; returns its exit status."""
    from flwr.proto.runtime_pb2 import AcquireTaskRequest
    from flwr.supercore.constant import TaskType

    # one try a call: this loop asks again, and stops when the SuperNode has ended
    client = _runtime_client(address, "SuperExec", tries=1, secret=secret)
    request = AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP])
    try:
        while supernode.poll() is None:
            try:
                acquired = client.AcquireTask(request)
            except Exception:  # the SuperNode is starting, or ending: ask again
                time.sleep(1.0)
                continue
            if acquired.HasField("task") and acquired.token:
                try:
                    answer_task(address, acquired.token)
                except Exception:  # one task's failure is logged; the node goes on
                    log.exception("a task could not be answered")
            else:
                time.sleep(POLL_S)
    finally:
        client.close()
    return int(supernode.wait())


def _node_config(command: Sequence[str]) -> dict[str, object] | None:
    """The node config the SuperNode gives its ClientApp, parsed from its ``--node-config`` as
    Flower parses it (``None`` where the command has none)."""
    from flwr.common.config import parse_config_args

    if "--node-config" not in command:
        return None
    return dict(parse_config_args([command[list(command).index("--node-config") + 1]]))


def _prestart(node_config: dict[str, object], activated: threading.Event) -> None:
    """Warm the node up (:func:`~reportfed.flower.warm.prestart`: read and embed its table)
    once the SuperLink has activated it, never before."""
    activated.wait()
    log.info("the server accepted this node; reading and embedding its reports")
    try:
        prestart(node_config)
    except Exception as exc:  # the run's first message tries again and says why
        log.warning("could not warm the node up before a run: %s", " ".join(str(exc).split()))
    else:
        log.info("ready for a run")


def _relay(supernode: subprocess.Popen[str], activated: threading.Event) -> None:
    """Pass the SuperNode's output on, line by line, and set ``activated`` when it says the
    SuperLink activated it."""
    assert supernode.stdout is not None
    for line in supernode.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        if ACTIVATED in line:
            activated.set()


def _secret_file() -> Path:
    """A new random SuperExec secret in a file only this user can read, in this user's folder
    of node files (:func:`~reportfed.flower.warm.private_root`)."""
    path = private_root() / f"guard-{os.getpid()}.secret"
    write_secret(path, secrets.token_bytes(32))
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reportfed.flower.guard")
    parser.add_argument("--runtime-api-address", required=True)
    parser.add_argument("supernode", nargs=argparse.REMAINDER, help="-- flower-supernode ...")
    args = parser.parse_args(argv)
    command = args.supernode[1:] if args.supernode[:1] == ["--"] else args.supernode
    said = logging.StreamHandler()
    said.setFormatter(logging.Formatter("reportfed node: %(message)s"))
    log.addHandler(said)
    log.setLevel(logging.INFO)

    def end(signum: int, _frame: object) -> None:  # first what this node leaves in /tmp
        remove_places(os.getpgrp())
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, end)
    remove_places()  # what nodes killed before they could clean up left
    secret = _secret_file()
    command = [*command, "--superexec-auth-secret-file", str(secret)]
    supernode = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    )
    activated = threading.Event()
    threading.Thread(target=_relay, args=(supernode, activated), daemon=True).start()
    node_config = _node_config(command)
    if node_config is not None:  # warm the node up while it waits for a run
        threading.Thread(target=_prestart, args=(node_config, activated), daemon=True).start()
    try:
        return serve(args.runtime_api_address, supernode, secret.read_bytes())
    finally:
        if supernode.poll() is None:
            supernode.terminate()
            supernode.wait()
        secret.unlink(missing_ok=True)
        remove_places(os.getpgrp())


if __name__ == "__main__":
    sys.exit(main())
