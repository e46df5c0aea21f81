"""The ``ServerApp``: registers the nodes, runs the rounds through :class:`SurgicalAggregation`
and writes the global model, for report and image nodes alike.

Run config (``app/pyproject.toml``, overridable with ``flwr run --run-config``; ``reportfed
federation run`` sets it from its flags): every field of :class:`~reportfed.core.config.RunSettings`,
dashed, and a table per modality holding its hyperparameter class's fields with that modality's
defaults (``[reports]``: :class:`~reportfed.core.config.FederationConfig`; ``[images]``:
:class:`reportfed.vision.train.ImageFederationConfig`; Flower flattens them to ``reports.rounds``...).
``modality`` (:func:`reportfed.flower.modalities.modality`) names the table a run reads; its values are sent to
the nodes with every message.

After every round the global model is written atomically to ``out/global.safetensors`` (a
model file, :mod:`reportfed.text.model_file`: ``reportfed label --model`` reads it) and the round
log to ``out/history.json``. With ``resume = true`` a restarted server continues after the last
saved round, numbering rounds on from it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import DifferentialPrivacyClientSideFixedClipping, Strategy

from reportfed import __version__
from reportfed.core import schema
from reportfed.core.aggregation import Arrays, GlobalState
from reportfed.core.config import FLOWER_DEFAULTS, RunSettings
from reportfed.core.errors import ConfigError, ReportfedError
from reportfed.core.files import atomic_write
from reportfed.core.labels import LabelSpace
from reportfed.core.limits import MAX_DIM, MAX_LABELS, MAX_REQUEST_BYTES, update_bytes
from reportfed.core.node import Modality
from reportfed.core.record import RunHistory
from reportfed.flower.exchange import Traffic, run_on_grid
from reportfed.flower.logs import through_flower
from reportfed.flower.modalities import hyperparameters
from reportfed.flower.run_checks import check_run
from reportfed.flower.secure_round import SecureAggregation
from reportfed.flower.strategy import SurgicalAggregation
from reportfed.flower.wire import config_record
from reportfed.pages.run_report import REPORT_FILE, write_report
from reportfed.text.calibration import IDENTITY
from reportfed.text.model_file import ModelFile, read_model, write_model

_log = logging.getLogger(__name__)

MODEL_FILE = "global.safetensors"
HISTORY_FILE = "history.json"
#: why a run ended without its model, one line, written beside it for ``federation run``
FAILURE_FILE = "failure.txt"


def _save(
    out: Path,
    strategy: SurgicalAggregation,
    state: GlobalState,
    round_: int,
    kind: Modality,
    config: Any,
    settings: RunSettings,
) -> None:
    registry = strategy.registry
    granularity, spec = kind.model_input(settings)
    model = ModelFile(
        state=state,
        thresholds=[strategy.thresholds.get(name, 0.5) for name in state.labels],
        calibration=[strategy.calibration.get(name, list(IDENTITY)) for name in state.labels],
        granularity=granularity,
        embedder={
            "spec": spec,
            "base_url": None,
            "fingerprint": str(registry.fingerprint),
            "dim": int(registry.dim or 0),
        },
        architecture=schema.architecture(config),
        provenance={
            "reportfed": __version__,
            "config": asdict(config),
            **({"findings": found} if (found := registry.findings_record()) else {}),
            **({"corrections": registry.corrections.record()} if registry.corrections else {}),
            "federation": {
                "engine": "flower",
                "modality": kind.name,
                "round": round_,
                "nodes": {m.name: list(m.labels) for m in registry.members.values()},
                "read": {m.name: list(m.reads) for m in registry.members.values() if m.reads},
                "node_settings": {m.name: m.settings for m in registry.members.values()},
                "excluded": {str(k): v for k, v in registry.excluded.items()},
                "lost": strategy.history.lost(
                    {m.name: list(m.labels) for m in registry.members.values()}
                ),
            },
        },
    )
    write_model(out / MODEL_FILE, model)
    strategy.history.save(out / HISTORY_FILE)
    write_report(out / REPORT_FILE, strategy.history.entries, model.provenance)


def _resume(out: Path) -> tuple[GlobalState, int, tuple[str, int], RunHistory] | None:
    """The checkpoint in ``out``: its global model, last round, vector space and history."""
    path = out / MODEL_FILE
    if not path.is_file():
        return None
    model = read_model(path)
    done = int(model.provenance.get("federation", {}).get("round", 0))
    history = RunHistory.load(out / HISTORY_FILE, up_to=done)
    space = (str(model.embedder["fingerprint"]), int(model.embedder["dim"]))
    return model.state, done, space, history


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Run the federation (:func:`_federate`); a run that fails on a :class:`ReportfedError`
    (too few nodes, bad settings) logs one line and leaves its reason in ``FAILURE_FILE`` beside
    the model, where ``reportfed federation run`` reads it, instead of a traceback."""
    through_flower()
    rc = dict(context.run_config)
    settings = schema.decode(RunSettings, rc)
    out = Path(settings.out).expanduser().resolve()
    (out / FAILURE_FILE).unlink(missing_ok=True)
    try:
        _federate(grid, rc, settings, out)
    except ReportfedError as exc:
        _log.error("the run failed: %s", exc)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write(out / FAILURE_FILE, str(exc).encode())


def _check_space(dim: int, config: Any) -> None:
    """Refuse a vector space beyond :data:`~reportfed.core.limits.MAX_DIM`, and a report
    model whose largest update would not pass the nodes' gateway
    (:data:`~reportfed.core.limits.MAX_REQUEST_BYTES`)."""
    if not 1 <= dim <= MAX_DIM:
        raise ConfigError(f"the run's input dimension must be in [1, {MAX_DIM}], got {dim}")
    hidden = getattr(config, "hidden", None)
    if hidden is None:
        return
    largest = update_bytes(dim, MAX_LABELS, hidden, skip=getattr(config, "skip", False))
    if largest > MAX_REQUEST_BYTES:
        raise ConfigError(
            f"hidden = {','.join(map(str, hidden))} at input dimension {dim} makes updates of up "
            f"to {largest / 2**20:.0f} MiB, beyond the {MAX_REQUEST_BYTES >> 20} MiB the nodes' "
            "gateway passes: choose narrower layers"
        )


def _federate(grid: Grid, rc: dict[str, Any], settings: RunSettings, out: Path) -> None:
    """Register the nodes, run the remaining rounds of run config ``rc`` (its ``settings``) and
    save the global model into ``out`` after each."""
    kind, config = hyperparameters(rc)
    for name, value in FLOWER_DEFAULTS.items():
        if getattr(config, name) != value:
            raise ConfigError(
                f"a Flower run has {schema.dashed(name)} = {value!r} (got {getattr(config, name)!r})"
            )
    check_run(config, settings)
    out.mkdir(parents=True, exist_ok=True)

    def init_fn(dim: int, labels: LabelSpace) -> tuple[Arrays, Arrays]:
        return kind.initial_arrays(config, dim, labels)

    resumed = _resume(out) if settings.resume else None
    fingerprint, dim = resumed[2] if resumed else kind.space(config, settings)
    _check_space(dim, config)
    _log.info("the nodes' vector space: %s, %d dimensions", fingerprint, dim)
    strategy = SurgicalAggregation(
        init_fn,
        fingerprint=fingerprint,
        dim=dim,
        min_nodes=settings.min_nodes,
        options=config,
        evaluate_every=settings.evaluate_every,
        join_timeout=settings.join_timeout,
        secure=settings.secure_aggregation,
    )
    if settings.findings:
        strategy.registry.require_findings(json.loads(settings.findings))
    done = resumed[1] if resumed else 0
    if done >= config.rounds:
        _log.warning(
            "%s already holds round %d of %d: nothing to do",
            out / MODEL_FILE,
            done,
            config.rounds,
        )
        return
    if resumed:
        strategy.history = resumed[3]
        _log.info("resuming after round %d with labels %s", done, list(resumed[0].labels))
    initial = strategy.register(
        grid, config.rounds, resume=resumed[0] if resumed else None, wait=settings.join_timeout
    )

    def checkpoint(round_: int, arrays: ArrayRecord, traffic: Traffic) -> None:
        members = strategy.registry.members
        strategy.history.traffic(
            round_,
            {
                members[n].name: {"down": traffic.down[n], "up": traffic.up[n]}
                for n in sorted(set(traffic.down) | set(traffic.up))
                if n in members
            },
        )
        _save(out, strategy, strategy.global_state(arrays), round_, kind, config, settings)
        _log.info("%s", strategy.history.line(round_, config.rounds, len(members)))

    runner: Strategy = strategy
    if settings.dp_noise > 0:
        runner = DifferentialPrivacyClientSideFixedClipping(
            strategy,
            noise_multiplier=settings.dp_noise,
            clipping_norm=settings.dp_clip,
            num_sampled_clients=len(strategy.registry.members),
        )
    train = None
    if settings.secure_aggregation:
        train = SecureAggregation(
            strategy, grid, config_record(config), config.clip_norm, settings.round_timeout
        )
    run_on_grid(
        runner,
        grid,
        initial,
        range(done + 1, config.rounds + 1),
        timeout=settings.round_timeout,
        config=config_record(config),
        after_round=checkpoint,
        train=train,
    )
    _log.info("global model: %s", out / MODEL_FILE)
