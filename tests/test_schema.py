"""One config schema: flags, run-config and wire keys, and the Flower app's defaults all come
from the config dataclasses' fields."""

from __future__ import annotations

import argparse
import dataclasses
import tomllib

import pytest

from reportfed.cli import build_parser
from reportfed.core import schema
from reportfed.core.config import (
    FLOWER_DEFAULTS,
    FederationConfig,
    NodeSettings,
    RunSettings,
    SiteSettings,
)
from reportfed.flower.launch import APP_DIR
from reportfed.flower.modalities import hyperparameters


def _subparser(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _app_config() -> dict[str, object]:
    with open(APP_DIR / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["flwr"]["app"]["config"]  # type: ignore[no-any-return]


def test_the_flower_app_defaults_are_the_schema_defaults() -> None:
    app = _app_config()
    # every key `federation run` sends must be declared, or Flower refuses the run (code 15)
    flower = FederationConfig(**FLOWER_DEFAULTS)  # type: ignore[arg-type]
    assert app["reports"] == schema.encode(flower)
    run = {k: v for k, v in app.items() if not isinstance(v, dict) and k != "partitions"}
    assert run == schema.encode(RunSettings())
    assert set(app) - set(run) == {"partitions", "reports", "images"}


def test_an_image_run_has_the_image_models_defaults() -> None:
    pytest.importorskip("monai")
    from reportfed.vision.train import ImageFederationConfig

    flower = ImageFederationConfig(**FLOWER_DEFAULTS)  # type: ignore[arg-type]
    assert _app_config()["images"] == schema.encode(flower)
    # what the SuperLink makes of `flwr run --run-config ...`: Flower's own parser and merge,
    # which refuse a key the app does not declare
    from flwr.common.config import get_fused_config_from_dir, parse_config_args

    given = parse_config_args(['modality="images" images.arch="vit" images.image-size=96'])
    rc = get_fused_config_from_dir(APP_DIR, given)
    kind, config = hyperparameters(rc)
    assert kind.config_class is ImageFederationConfig and config == ImageFederationConfig(
        arch="vit", image_size=96, on_invalid="drop"
    )
    with pytest.raises(ValueError, match="image-size"):
        get_fused_config_from_dir(APP_DIR, parse_config_args(["image-size=96"]))


REQUIRED = {"train": ["--node", "a.csv"], "run": ["--superlink", "h:1"],
            "node": ["--superlink", "h:1", "--data", "a.csv"]}  # fmt: skip


@pytest.mark.parametrize(("command", "config"), [(["train"], FederationConfig),
                                                 (["train"], SiteSettings),
                                                 (["federation", "run"], RunSettings),
                                                 (["federation", "node"], NodeSettings)])  # fmt: skip
def test_every_setting_has_a_flag_with_help_and_its_default(
    command: list[str], config: type
) -> None:
    parser = _subparser(build_parser(), *command)
    actions = {a.dest: a for a in parser._actions}
    given = parser.parse_args(REQUIRED[command[-1]])
    for field, _ in schema.fields(config):
        if command[-1] == "run" and field.name == "modality":  # federation run trains reports
            assert field.name not in actions and not hasattr(given, field.name)
            continue
        action = actions[field.name]
        assert action.help, f"--{schema.dashed(field.name)} has no help"
        if field.name != "data":
            assert getattr(given, field.name) == field.default, field.name


def test_flags_reach_the_run_config_and_come_back_from_it() -> None:
    from reportfed.cli.federation import _run_config

    argv = ["federation", "run", "--superlink", "h:1", "--insecure", "--hidden", "64,32",
            "--server-lr", "0.5", "--balance", "--no-resume", "--granularity", "report"]  # fmt: skip
    rc = _run_config(build_parser().parse_args(argv))
    assert rc["reports.hidden"] == "64,32" and rc["modality"] == "reports"
    config = schema.decode(FederationConfig, schema.scoped(rc, "reports"))
    assert config == FederationConfig(
        hidden=(64, 32), server_lr=0.5, balance=True, on_invalid="drop"
    )
    settings = schema.decode(RunSettings, rc)
    assert settings.resume is False and settings.granularity == "report"
    with pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "--hidden", "wide"])


def test_image_configs_share_the_server_options_and_the_codec() -> None:
    pytest.importorskip("monai")
    from reportfed.vision.federation import ImageFederationConfig

    config = ImageFederationConfig(norm="fedbn", image_size=96, server_momentum=0.5)
    assert schema.decode(ImageFederationConfig, schema.encode(config)) == config
    server = {f.name for f in dataclasses.fields(FederationConfig)} & {
        f.name for f in dataclasses.fields(ImageFederationConfig)
    }
    assert {"weighting", "on_invalid", "server_momentum", "server_lr"} <= server
