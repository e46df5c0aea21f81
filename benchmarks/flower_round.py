"""Where a Flower deployment round's seconds go on a node, message by message.

Flower's SuperExec starts a fresh ClientApp process for every message a node receives, so each
message pays a process start, Flower's runtime imports, reportfed's imports, the node's table
and vectors, and only then the round's own work. This script times each of those in fresh
processes, as Flower runs them, for the messages of a plain round: ``query`` (the handshake),
``train`` with the previous round's evaluation riding along (every round under the default
``evaluate-every = 1``), ``train`` alone, and ``evaluate`` (the final model's). The node is
site 0 of the three IID IU nodes of ``benchmarks/flower_engines.py`` (its vectors cached first,
as a node's are after it starts).

Each phase is the median of ``--repeats`` fresh processes:

* ``start``: from launching the interpreter to its first line;
* ``flower``: importing Flower's ClientApp runtime (what ``flwr-clientapp`` imports before ours);
* ``reportfed``: importing ``reportfed.flower.client_app``;
* ``message``: the ClientApp answering the message (mods included), which reads the node's data.

The messages are timed twice on this checkout: answered in the ClientApp's own process (a bare
``flower-supernode``), and forwarded to the node's warm process (``reportfed federation node``,
:mod:`reportfed.flower.warm`), which is started and loads the node's data on the first message.

``--before DIR`` runs the same processes with the reportfed of another checkout (``git worktree
add DIR <commit>``) in the same invocation, for a before/after ratio.

    python benchmarks/flower_round.py [--before DIR] [--repeats 5]

The whole round also waits on Flower's own polling, which this script does not include: a
SuperNode that pulled no message sleeps 3 s before pulling again (a constant in
``flwr.supernode.start_client_internal``), and SuperExec looks for new tasks every
``FLWR_SUPEREXEC_TASK_POLL_INTERVAL`` seconds (``reportfed federation node`` sets 0.1).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

MESSAGES = ("query", "train+evaluate", "train", "evaluate")
PHASES = ("start", "flower", "reportfed", "message")
APP = Path(__file__).resolve().parent.parent / "reportfed" / "flower" / "app" / "pyproject.toml"


def run_config() -> dict[str, object]:
    """The app's run config as Flower hands it to a ClientApp: nested tables flattened."""
    config = tomllib.loads(APP.read_text())["tool"]["flwr"]["app"]["config"]
    flat: dict[str, object] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def prepare(work: Path) -> Path:
    """Site 0's table, its vectors cached, and the four messages (Flower's serialized objects)."""
    from flower_engines import node_tables
    from flwr.app import ConfigRecord, Message, RecordDict
    from flwr.common.constant import SUPERLINK_NODE_ID
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
    from flwr.supercore.task_identity import TaskIdentity

    from reportfed.core.aggregation import node_arrays
    from reportfed.core.config import FederationConfig, NodeSettings
    from reportfed.core.paths import embeddings_cache_dir
    from reportfed.flower.wire import ARRAYS, META, to_record
    from reportfed.reports.node import initial_state, load_report_node

    TaskIdentity.run_id = 1  # what a ServerApp process is told by the SuperLink
    TaskIdentity.node_id = SUPERLINK_NODE_ID
    TaskIdentity.task_id = 1
    table = node_tables(work, 3)[0]
    cache = str(embeddings_cache_dir().resolve())
    node = load_report_node(NodeSettings(data=str(table), cache_dir=cache), FederationConfig())
    config = run_config()
    state = initial_state(node.dim, node.node.labels, FederationConfig())
    messages = {}
    for name in MESSAGES:
        kind = name.split("+")[0]
        meta = ConfigRecord({k[len("reports.") :]: v for k, v in config.items() if "." in k})
        meta.update({"labels": list(state.labels), "round": 2, "node-index": 0})
        meta["evaluate"] = name.endswith("evaluate")
        content = RecordDict(
            {ARRAYS: to_record(*node_arrays(state, list(state.labels))), META: meta}
        )
        if kind == "query":
            content = RecordDict()
        msg = Message(content, dst_node_id=1, message_type=kind)
        contents = {k: obj.deflate() for k, obj in get_all_nested_objects(msg).items()}
        messages[name] = (msg.object_id, contents)
    setup = work / "setup.pickle"
    node_config = {"data": str(table), "cache-dir": cache, "name": "site0"}
    setup.write_bytes(pickle.dumps({"messages": messages, "node": node_config, "run": config}))
    return setup


def child(setup: Path, name: str, launched: float, warm: bool) -> None:
    """One ClientApp process: print the seconds of each phase as JSON."""
    times = {"start": time.time() - launched}
    t = time.perf_counter()
    import flwr.supernode.runtime.run_clientapp  # noqa: F401  what flwr-clientapp imports
    from flwr.app import Context, Message, RecordDict
    from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents

    times["flower"] = time.perf_counter() - t
    t = time.perf_counter()
    from reportfed.flower.client_app import app

    times["reportfed"] = time.perf_counter() - t
    given = pickle.loads(setup.read_bytes())
    object_id, contents = given["messages"][name]
    msg = inflate_object_from_contents(object_id, contents)
    assert isinstance(msg, Message)
    msg.metadata.__dict__["_message_id"] = object_id
    node_config = {**given["node"], "warm": warm}
    context = Context(
        run_id=1, node_id=1, node_config=node_config, state=RecordDict(), run_config=given["run"]
    )
    t = time.perf_counter()
    reply = app(msg, context)
    times["message"] = time.perf_counter() - t
    if reply.has_error():
        raise SystemExit(f"{name}: {reply.error.reason}")
    print(json.dumps(times))


def measure(
    setup: Path, repeats: int, pythonpath: str | None, warm: bool = False
) -> dict[str, dict[str, float]]:
    """Median seconds of each phase of each message, ``repeats`` fresh processes each after one
    untimed (which, with ``warm``, starts the node's warm process and loads its data)."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    out: dict[str, dict[str, float]] = {}
    for name in MESSAGES:
        runs = []
        for _ in range(repeats + 1):
            cmd = [sys.executable, __file__, "--child", name, "--setup", str(setup)]
            cmd += ["--warm"] if warm else []
            cmd += ["--launched", repr(time.time())]
            # into a file, not a pipe: a warm process started by the child keeps its output open
            with tempfile.TemporaryFile("w+") as output:
                done = subprocess.run(cmd, env=env, cwd=setup.parent, stdout=output, stderr=output)
                output.seek(0)
                text = output.read()
            if done.returncode:
                raise SystemExit(text[-3000:])
            runs.append(json.loads(text.strip().splitlines()[-1]))
        runs = runs[1:]
        out[name] = {p: statistics.median(r[p] for r in runs) for p in PHASES}
        out[name]["total"] = sum(out[name][p] for p in PHASES)
        print(f"{name:15s}", "  ".join(f"{p} {out[name][p]:.2f}" for p in (*PHASES, "total")))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="another checkout's root, run in the same invocation")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="benchmarks/results/flower_round.json")
    parser.add_argument("--child", choices=MESSAGES, help=argparse.SUPPRESS)
    parser.add_argument("--setup", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--launched", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.setup, args.child, args.launched, args.warm)
        return
    os.setpgrp()  # the warm process exits with its group's leader: this process
    from machine import machine

    from reportfed.core.files import atomic_write

    with tempfile.TemporaryDirectory() as tmp:
        setup = prepare(Path(tmp))
        result: dict[str, object] = {"machine": machine(), "repeats": args.repeats}
        if args.before:
            print(f"before ({args.before}):")
            result["before"] = measure(setup, args.repeats, str(Path(args.before).resolve()))
            print("after, a fresh process per message:")
        result["after"] = measure(setup, args.repeats, None)
        print("after, the node's warm process (reportfed federation node):")
        result["after_warm"] = measure(setup, args.repeats, None, warm=True)
    atomic_write(args.out, json.dumps(result, indent=1).encode())


if __name__ == "__main__":
    main()
