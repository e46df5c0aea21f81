"""``reportfed federation ...``: a Flower federation without learning Flower's commands.

* ``certs``    — a CA and server certificate for a trial (hospitals use their own PKI);
* ``server``   — the SuperLink that hospitals' nodes and runs connect to;
* ``keys``     — a hospital's key pair: the private key stays on its node, the public key goes to
  the server's operator;
* ``register`` — the operator admits a hospital by its public key;
* ``node``     — one hospital's SuperNode, training on its own reports table;
* ``run``      — submit a training run (rounds, hyperparameters) and wait for the global model;
* ``import``   — a new site takes labels from a global model without training.

TLS and node authentication (only registered hospitals join) are on unless ``--insecure`` is
given, which turns both off.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reportfed.cli.options import say, warn
from reportfed.core import schema
from reportfed.core.config import FLOWER_DEFAULTS, FederationConfig, NodeSettings, RunSettings
from reportfed.core.errors import ReportfedError, RunFailedError
from reportfed.core.metrics import FEW_POSITIVES
from reportfed.core.record import Evaluation, RunHistory

if TYPE_CHECKING:
    from reportfed.flower.tls import Certificates


def _tls(args: argparse.Namespace, option: str, *, check: bool = True) -> Path | None:
    """The TLS material an option names (a file, checked to exist unless ``check`` is false),
    ``None`` with ``--insecure``."""
    value = getattr(args, option.replace("-", "_"))
    if args.insecure:
        if value:
            raise ReportfedError(f"--{option} and --insecure exclude each other")
        return None
    if not value:
        where = "federation keys" if option == "key" else "federation certs"
        raise ReportfedError(
            f"TLS and node authentication are the default: give --{option} (see `reportfed "
            f"{where}`), or --insecure for a trial on a trusted network"
        )
    path = Path(value)
    if check and not path.is_file():
        raise ReportfedError(f"--{option}: no such file: {path}")
    if option == "root-certificates":
        from reportfed.flower.tls import check_certificate

        check_certificate(path)
    return path


def _flower_env() -> dict[str, str]:
    """This process's environment with Flower's home under reportfed's cache, so Flower writes
    nothing to ``~/.flwr``."""
    from reportfed.core.paths import flwr_home

    return {**os.environ, "FLWR_HOME": str(flwr_home())}


def _exec(cmd: list[str], env: dict[str, str]) -> None:
    say("$ " + " ".join(cmd))
    os.execvpe(cmd[0], cmd, env)


def cmd_certs(args: argparse.Namespace) -> None:
    from reportfed.flower.tls import generate_certificates

    certs = generate_certificates(args.out, hosts=args.host or ["127.0.0.1", "localhost"])
    say(f"wrote {certs.ca}, {certs.cert}, {certs.key}; give {certs.ca} to every node")


def cmd_keys(args: argparse.Namespace) -> None:
    from reportfed.flower.identity import generate_node_keys

    keys = generate_node_keys(args.out, args.name)
    say(
        f"wrote {keys.private} (stays on this hospital's node: `federation node --key`) and "
        f"{keys.public} (send it to the server's operator: `federation register`)"
    )


def cmd_register(args: argparse.Namespace) -> None:
    from reportfed.flower.identity import register_node
    from reportfed.flower.launch import write_flwr_config
    from reportfed.flower.processes import wait_for_server

    public = Path(args.public_key)
    if not public.is_file():
        raise ReportfedError(f"no such public key file: {public}")
    name = args.name or public.stem
    from reportfed.flower.identity import check_name

    check_name(name)
    ca = _tls(args, "root-certificates")
    if ca is None:
        raise ReportfedError("an --insecure server admits every node: there is nothing to register")
    env = _flower_env()
    write_flwr_config(Path(env["FLWR_HOME"]), args.superlink, root_certificates=ca)
    wait_for_server(args.superlink, args.connect_timeout)
    node_id = register_node(public, name, env)
    say(f"registered {name!r} (node {node_id}): its node may join with its private key")


def start_superlink(args: argparse.Namespace) -> None:
    """The SuperLink, with every API on the server's loopback. Nodes on other hosts reach it
    through the gateway (:mod:`reportfed.flower.gateway`), which passes their API alone; with a
    loopback ``--host`` there is no gateway and the one port serves everyone on this machine."""
    from reportfed.flower.gateway import find_nginx, is_loopback
    from reportfed.flower.launch import OPERATOR_HOST, superlink_command
    from reportfed.flower.processes import check_port_free
    from reportfed.flower.tls import Certificates

    public = not is_loopback(args.host)
    nginx = find_nginx() if public else None
    operator_port = args.operator_port if public else args.port
    if public and operator_port == args.port:
        raise ReportfedError(
            f"--operator-port {operator_port} is --port: the operator's port must differ"
        )
    check_port_free(args.host, args.port, "is a server already running? choose another --port")
    if public:
        check_port_free(
            OPERATOR_HOST,
            operator_port,
            "is a server already running? choose another --operator-port",
        )
    directory = _tls(args, "certificates", check=False)  # a directory: Certificates checks it
    try:
        certs = Certificates.in_dir(directory) if directory else None
    except FileNotFoundError as exc:
        raise ReportfedError(str(exc)) from None
    if certs is not None:
        from reportfed.flower.tls import warn_if_expiring

        for cert in (certs.cert, certs.ca):
            warn_if_expiring(cert)
    superlink = superlink_command(
        host=OPERATOR_HOST if public else args.host,
        port=operator_port,
        certificates=certs,
        insecure=args.insecure,
        database=Path(args.database) if args.database else None,
    )
    if nginx is None:
        _exec(superlink, _flower_env())
    else:
        _serve_behind_gateway(args, nginx, superlink, certs, operator_port)


def _serve_behind_gateway(
    args: argparse.Namespace,
    nginx: str,
    superlink: list[str],
    certs: Certificates | None,
    operator_port: int,
) -> None:
    """The SuperLink on the loopback and nginx on ``--host:--port`` until either ends."""
    from reportfed.core.paths import cache_dir
    from reportfed.flower.gateway import check_gateway, gateway_command, gateway_config
    from reportfed.flower.launch import OPERATOR_HOST
    from reportfed.flower.processes import start_beside, supervise, wait_for_port

    config = gateway_config(
        cache_dir() / "gateway" / str(args.port),
        host=args.host,
        port=args.port,
        upstream_port=operator_port,
        certificates=certs,
    )
    check_gateway(nginx, config)
    say(
        f"nodes connect to {args.host}:{args.port} (Flower's node API alone, through nginx); "
        f"the operator's commands use --superlink {OPERATOR_HOST}:{operator_port} on this "
        "machine (or an SSH tunnel to it)"
    )
    say("$ " + " ".join(superlink))
    with start_beside(gateway_command(nginx, config), _flower_env()) as gateway:
        listening = OPERATOR_HOST if args.host in ("0.0.0.0", "::") else args.host.strip("[]")
        try:
            wait_for_port(args.port, gateway, timeout=10.0, host=listening)
        except (RuntimeError, TimeoutError):
            raise RunFailedError(
                f"the gateway (nginx) could not serve port {args.port}: its log is above"
            ) from None
        status, _ = supervise(superlink, _flower_env())
        stopped = gateway.poll()
    if stopped is not None:
        raise RunFailedError(
            f"the gateway (nginx) stopped with exit status {stopped}: its log is above"
        )
    if status in (-signal.SIGTERM, -signal.SIGINT):
        say(f"server stopped ({signal.Signals(-status).name})")
    elif status != 0:
        raise RunFailedError(f"the server stopped with exit status {status} (its log is above)")


def _check_embedder(args: argparse.Namespace) -> None:
    """Refuse, before anything starts, a node embedder that would send text off this machine or
    download weights without ``--allow-remote-embedder`` (one line naming where)."""
    from reportfed.embed import DEFAULT_EMBEDDER
    from reportfed.embed.weights import resolve_model_path, split_spec

    spec = args.embedder or DEFAULT_EMBEDDER
    kind, model = split_spec(spec)
    if args.allow_remote_embedder:
        return
    if kind == "openai":
        from reportfed.embed import make_embedder

        make_embedder(spec, base_url=args.base_url or None, remote=False)  # raises, naming it
    if kind in ("st", "hf") and not Path(resolve_model_path(model)).is_dir():
        warn(
            f"{model!r} is no folder on this machine: the node loads it from "
            "the local Hugging Face cache alone (--allow-remote-embedder lets it download)"
        )


def start_supernode(args: argparse.Namespace) -> None:
    from reportfed.data.table import read_table
    from reportfed.flower.launch import SUPERNODE_ENV, supernode_command
    from reportfed.flower.processes import (
        CONNECTION_FAILED,
        KEY_REFUSED,
        check_port_free,
        connection_cause,
        supervise,
    )
    from reportfed.text.findings import read_findings

    check_port_free(
        "127.0.0.1", args.port, "each node on one machine needs its own --port (default 9094)"
    )
    ca = _tls(args, "root-certificates")
    key = _tls(args, "key")
    if key is not None:
        from reportfed.flower.identity import check_node_key

        check_node_key(key)
    config = node_config(args)
    findings = read_findings(args.findings) if args.findings else None
    table = read_table(  # fail here, not inside Flower
        str(config["data"]),
        aliases=findings.columns() if findings is not None else None,
        require_labels=True,
        blank=args.blank,
        uncertain=args.uncertain,
    )
    say(f"{config['data']}: {len(table)} reports, labels {list(table.label_space)}")
    _check_embedder(args)
    cmd = supernode_command(
        superlink=args.superlink,
        node_config=config,
        port=args.port,
        root_certificates=ca,
        key=key,
        insecure=args.insecure,
        max_wait=args.connect_timeout,
    )
    say("$ " + " ".join(cmd))
    status, tail = supervise(cmd, {**_flower_env(), **SUPERNODE_ENV})
    if status in (-signal.SIGTERM, -signal.SIGINT):
        say(f"node stopped ({signal.Signals(-status).name})")
        return
    if status == 0:
        return
    if KEY_REFUSED in tail and key is not None:
        public = key.with_suffix(".pub")
        raise RunFailedError(
            f"the server at {args.superlink} did not activate this node's key {key}: either it "
            f"is not registered (ask its operator to run `reportfed federation register "
            f"{public.name} --name NAME` with this hospital's public key) or a node with this "
            "key is online already (another `federation node` with it, or one stopped moments "
            "ago: the server forgets it after its heartbeat lapses, then start again)"
        )
    if CONNECTION_FAILED in tail:
        said = tail.split(CONNECTION_FAILED, 1)[1].strip().splitlines()
        reason = said[0].strip() if said else ""
        raise RunFailedError(
            f"this node could not reach the server at {args.superlink} for "
            f"{args.connect_timeout:g} s (--connect-timeout): "
            f"{connection_cause(reason, insecure=args.insecure) or reason or 'see the log above'}"
        )
    raise RunFailedError(f"the node stopped with exit status {status} (its log is above)")


def node_config(args: argparse.Namespace) -> dict[str, schema.Scalar]:
    """The node config ``flower-supernode`` gets: every :class:`NodeSettings` flag, paths made
    absolute and the name defaulting to the table's stem."""
    from reportfed.core.paths import embeddings_cache_dir

    settings = schema.from_args(NodeSettings, args)
    data = Path(settings.data).resolve()
    cache = Path(settings.cache_dir or embeddings_cache_dir()).resolve()
    named = replace(settings, data=str(data), name=settings.name or data.stem, cache_dir=str(cache))
    return schema.encode(named)


def _run_config(args: argparse.Namespace) -> dict[str, schema.Scalar]:
    """The run config of ``flwr run``: the run settings and, in the ``reports`` table, the
    hyperparameters, from the flags."""
    from reportfed.flower.run_checks import check_run

    findings = ""
    if args.findings:
        from reportfed.text.findings import read_findings

        findings = json.dumps(read_findings(args.findings).record(), sort_keys=True)
    out = str(Path(args.out).resolve())
    settings = schema.from_args(RunSettings, args, out=out, findings=findings)
    config = schema.from_args(FederationConfig, args)
    check_run(config, settings)  # here, not in the server's log
    return {**schema.in_table("reports", schema.encode(config)), **schema.encode(settings)}


def cmd_run(args: argparse.Namespace) -> None:
    from reportfed.flower.identity import registered_names
    from reportfed.flower.launch import run_command, write_flwr_config
    from reportfed.flower.processes import supervise, wait_for_server
    from reportfed.flower.server_app import FAILURE_FILE, HISTORY_FILE, MODEL_FILE
    from reportfed.flower.strategy import RELIABLE_ROWS, SECURE_MIN_NODES
    from reportfed.pages.run_report import REPORT_FILE

    ca = _tls(args, "root-certificates")
    run_config = _run_config(args)
    if args.secure_aggregation and args.min_nodes < SECURE_MIN_NODES:
        warn(
            f"--secure-aggregation with --min-nodes {args.min_nodes}: with "
            f"fewer than {SECURE_MIN_NODES} nodes each node can read the others' updates from the "
            "sum (the server warns again if fewer join)"
        )
    env = _flower_env()
    write_flwr_config(
        Path(env["FLWR_HOME"]), args.superlink, root_certificates=ca, insecure=args.insecure
    )
    wait_for_server(args.superlink, args.connect_timeout)
    registered_names(env)  # one line, here, where the server refuses this party its operator API
    cmd = run_command(run_config)
    say("$ " + " ".join(cmd))
    out = Path(args.out)
    (out / FAILURE_FILE).unlink(missing_ok=True)
    status, _ = supervise(cmd, env)  # its log on stderr, colour on a terminal only
    if (out / FAILURE_FILE).is_file():
        raise RunFailedError((out / FAILURE_FILE).read_text())
    if status in (-signal.SIGTERM, -signal.SIGINT):
        raise RunFailedError(
            f"stopped following the run ({signal.Signals(-status).name}); the server goes on "
            f"with it and writes its model to {out}"
        )
    if status != 0:
        raise RunFailedError(f"flwr run exited with {status} (its log is above)")
    if not (out / MODEL_FILE).is_file():
        raise RunFailedError(f"the run wrote no global model to {out} (its log is above)")
    history = RunHistory.load(out / HISTORY_FILE)
    if history:
        last = history[-1]
        say(
            f"round {last['round']}: accepted {last.get('accepted')}, rejected "
            f"{sorted(last.get('rejected', {}))}, failed {sorted(last.get('failed', {}))}"
        )
        say(f"{len(history)} rounds in {sum(e['seconds'] for e in history):.1f} s")
        for name, lost in _lost_nodes(out / MODEL_FILE).items():
            untrained = lost["labels-untrained"]
            warn(
                f"node {name!r} was lost from round {lost['since-round']} "
                f"({lost['reason']})"
                + (
                    f"; no other node holds {untrained}: their rows stopped learning"
                    if untrained
                    else ""
                )
            )
        if last.get("evaluation"):
            evaluation = Evaluation.from_json(last["evaluation"])
            if evaluation.macro is not None:
                say(
                    f"macro AUROC ({evaluation.statistic}: {evaluation.said}): {evaluation.macro:.4f}"
                )
            for name, value in evaluation.auroc.items():
                positives = evaluation.positives.get(name)
                line = f"  {name:<28} {value:.4f}"
                if positives is not None:
                    line += f"  ({positives} held-out positive(s)"
                    line += ": too few to measure)" if positives < FEW_POSITIVES else ")"
                say(line)
            rows = evaluation.min_rows
            if rows is not None and rows < RELIABLE_ROWS:
                warn(
                    f"some label's AUROC rests on {rows} held-out rows "
                    f"(< {RELIABLE_ROWS}): unreliable; give the nodes more rows or a larger "
                    "--val-fraction"
                )
    say(f"run report (open in a browser): {out / REPORT_FILE}")
    say(f"global model: {out / MODEL_FILE}")


def _lost_nodes(model: Path) -> dict[str, dict[str, Any]]:
    """The nodes a federation lost, as its model's provenance records them."""
    from reportfed.text.model_file import read_model

    return dict(read_model(model).provenance.get("federation", {}).get("lost", {}))


def cmd_import(args: argparse.Namespace) -> None:
    from reportfed.cli.options import check_outputs
    from reportfed.core.labels import canonical
    from reportfed.reader import ReportReader

    check_outputs([("--out", Path(args.out))], inputs=[("--model", Path(args.model))])
    labeler = ReportReader.load(args.model, progress=False)
    if args.labels:
        asked = [s.strip() for s in args.labels.split(",") if s.strip()]
        labeler = labeler.select_labels(asked)
        named = {name: canonical(name, allow_unknown=True) for name in asked}
        renamed = [f"{name} -> {model}" for name, model in named.items() if model != name]
        if renamed:
            say(f"labels named as the model names them: {', '.join(renamed)}")
    labeler.save(args.out)
    say(f"wrote {args.out} with labels {list(labeler.classes_)} (no training)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``federation`` and its subcommands to the ``reportfed`` parser."""
    from reportfed.flower.launch import OPERATOR_PORT

    fed = sub.add_parser("federation", help="federated training across processes (Flower)")
    cmds = fed.add_subparsers(dest="federation_command", required=True)

    def tls(p: argparse.ArgumentParser, option: str, what: str) -> None:
        p.add_argument(f"--{option}", default=None, help=what)
        p.add_argument(
            "--insecure",
            action="store_true",
            help="no TLS and no node authentication (trusted networks only)",
        )

    p = cmds.add_parser("certs", help="create a CA and server certificate for a trial")
    p.add_argument("--out", required=True, help="directory for ca.crt, server.pem, server.key")
    p.add_argument(
        "--host",
        action="append",
        help="server host name or IP, repeatable (default: 127.0.0.1 and localhost)",
    )
    p.set_defaults(func=cmd_certs)

    p = cmds.add_parser(
        "server",
        help="start the server endpoint (Flower SuperLink)",
        description="Start the server endpoint (Flower SuperLink). Its operator's API (register, "
        "run, list, stop) listens only on this machine's loopback, at --operator-port; nodes on "
        "other hosts reach --host:--port, where nginx passes them Flower's node API alone "
        "(docs/federation.md, 'What each party can do'). With a loopback --host there is no "
        "nginx and --port serves everyone on this machine.",
    )
    p.add_argument("--host", default="0.0.0.0", help="address the nodes connect to (0.0.0.0: all)")
    p.add_argument("--port", type=int, default=9092, help="port the nodes connect to")
    p.add_argument(
        "--operator-port",
        type=int,
        default=OPERATOR_PORT,
        help="port of the operator's commands (register, run) on 127.0.0.1, when --host is "
        "not a loopback address",
    )
    tls(p, "certificates", "directory with ca.crt, server.pem, server.key")
    p.add_argument("--database", default=None, help="persist server state in this SQLite file")
    p.set_defaults(func=start_superlink)

    p = cmds.add_parser("keys", help="make this hospital's key pair (node authentication)")
    p.add_argument("--out", required=True, help="directory for NAME.key and NAME.pub")
    p.add_argument("--name", required=True, help="the hospital's name (the node's --name)")
    p.set_defaults(func=cmd_keys)

    p = cmds.add_parser("register", help="admit a hospital by its public key (server operator)")
    p.add_argument("public_key", help="the hospital's NAME.pub from `federation keys`")
    p.add_argument("--superlink", required=True, help="server address host:port")
    p.add_argument("--name", default=None, help="the hospital's name (default: the file's stem)")
    p.add_argument(
        "--connect-timeout", type=float, default=60.0, help="seconds to wait for the server"
    )
    tls(p, "root-certificates", "CA certificate that signed the server's certificate")
    p.set_defaults(func=cmd_register)

    p = cmds.add_parser("node", help="start this hospital's node (Flower SuperNode)")
    p.add_argument("--superlink", required=True, help="server address host:port")
    p.add_argument("--port", type=int, default=9094, help="local port of the node's runtime")
    tls(p, "root-certificates", "CA certificate that signed the server's certificate")
    p.add_argument("--key", default=None, help="this hospital's private key (`federation keys`)")
    p.add_argument(
        "--connect-timeout",
        type=float,
        default=120.0,
        help="seconds the node keeps trying to reach the server before it stops with the cause",
    )
    schema.add_flags(p, NodeSettings, required=["data"])
    p.set_defaults(func=start_supernode)

    p = cmds.add_parser(
        "run",
        help="run federated training and wait for the global model",
        description="Run federated training of a report model and wait for the global model. An "
        "image federation is started with flwr run and its images.* run-config keys "
        "(docs/vision.md).",
    )
    p.add_argument("--superlink", required=True, help="server address host:port")
    tls(p, "root-certificates", "CA certificate that signed the server's certificate")
    p.add_argument(
        "--connect-timeout",
        type=float,
        default=60.0,
        help="seconds to wait for the server to accept connections (it may still be starting)",
    )
    schema.add_flags(p, FederationConfig, skip=FLOWER_DEFAULTS)  # fixed in a Flower run
    schema.add_flags(p, RunSettings, skip=("modality", "findings"))  # it trains reports
    p.add_argument(
        "--findings",
        default="",
        help="a TOML file of findings (docs/labels.md) the federation defines as this file does: "
        "a node that defines one of them otherwise is left out",
    )
    p.set_defaults(**FLOWER_DEFAULTS)
    p.set_defaults(func=cmd_run)

    p = cmds.add_parser("import", help="take labels from a global model without training")
    p.add_argument("--model", required=True, help="the federation's global model file")
    p.add_argument("--labels", default=None, help="comma-separated labels (default: all)")
    p.add_argument("--out", required=True, help="the model file written, holding only those labels")
    p.set_defaults(func=cmd_import)
