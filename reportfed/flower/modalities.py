"""The kinds of node a Flower run serves, found by name through the ``reportfed.modalities``
entry points (``reports`` and, with ``reportfed.vision`` and its extra, ``images``), and the hyperparameters a run
config gives them; the Flower apps serve both without importing ``vision``."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from reportfed.core import schema
from reportfed.core.config import RunSettings
from reportfed.core.errors import ConfigError
from reportfed.core.node import Modality


def modality(name: str) -> Modality:
    """The modality registered under ``name`` (entry point group ``reportfed.modalities``)."""
    found = {e.name: e for e in entry_points(group="reportfed.modalities")}
    if name not in found:
        raise ConfigError(
            f"unknown modality {name!r}: installed are {sorted(found)} (images need the vision extra: pip install reportfed[vision])"
        )
    loaded: Modality = found[name].load()
    return loaded


def hyperparameters(
    run_config: Mapping[str, Any], sent: Mapping[str, Any] | None = None
) -> tuple[Modality, Any]:
    """The modality a Flower run config names and its hyperparameters: the values of the run
    config's table of that modality (``[reports]``, ``[images]``), overridden by ``sent`` (those
    the server sends with a message)."""
    name = schema.decode(RunSettings, run_config).modality
    kind = modality(name)
    return kind, schema.decode(
        kind.config_class, {**schema.scoped(run_config, name), **(sent or {})}
    )
