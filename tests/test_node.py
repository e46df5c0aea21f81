"""One node algorithm for reports and images: the same round through one interface, and node
settings declared once (a flag, a node-config key and a handshake key from one field)."""

from __future__ import annotations

import argparse
from dataclasses import make_dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reportfed.core import schema
from reportfed.core.aggregation import GlobalState
from reportfed.core.config import NodeSettings
from reportfed.core.labels import LabelSpace
from reportfed.core.node import NodeAlgorithm
from reportfed.core.rounds import run_rounds
from reportfed.core.server import SurgicalServer
from reportfed.flower.modalities import modality

REPORTS = [
    ("Heart size is enlarged. No pleural effusion.", 1, 0),
    ("Small right pleural effusion. Normal heart size.", 0, 1),
    ("Cardiomegaly with bilateral pleural effusions.", 1, 1),
    ("The lungs are clear. Heart size normal. No effusion.", 0, 0),
] * 6
EDEMA = LabelSpace(("Edema",))


def _report_table(tmp_path: Path) -> Path:
    path = tmp_path / "reports.csv"
    frame = pd.DataFrame(REPORTS, columns=["Reports", "Cardiomegaly", "Pleural Effusion"])
    frame.to_csv(path, index=False)
    return path


def _image_table(tmp_path: Path) -> Path:
    pytest.importorskip("monai")
    from reportfed.vision.synthetic import write_synthetic_node

    return write_synthetic_node(tmp_path / "images", 24, ["Cardiomegaly", "Effusion"], seed=0)


@pytest.mark.parametrize("kind", ["reports", "images"])
def test_text_and_image_nodes_run_the_same_round_through_one_interface(
    kind: str, tmp_path: Path, embeddings_cache: Path
) -> None:
    data = _report_table(tmp_path) if kind == "reports" else _image_table(tmp_path)
    algorithms = modality(kind)
    run = {"rounds": 1, "hidden": "16", "image-size": 32, "batch-size": 8, "seed": 3}
    config = schema.decode(algorithms.config_class, run)
    settings = NodeSettings(data=str(data), val_fraction=0.25, cache_dir=str(embeddings_cache))
    node = algorithms.node(settings, config, run)
    assert isinstance(node, NodeAlgorithm)

    described = node.describe()
    assert set(described.labels) == {"Cardiomegaly", "Pleural Effusion"} and described.rows == 18
    read = {"blank": "negative", "uncertain": "zeros", "val-fraction": 0.25}
    assert read.items() <= described.settings.items() and "data" not in described.settings
    labels = described.labels
    start = GlobalState(labels, *algorithms.initial_arrays(config, described.dim, labels))
    server = SurgicalServer(start, config)
    history = run_rounds(server, [node], 1, progress=False)
    assert np.isfinite(history[0]["loss"][described.name])
    assert any(not np.array_equal(start.task[k], server.state.task[k]) for k in start.task)

    evaluation = node.evaluate(server.state)
    assert evaluation.labels == list(labels) and evaluation.y.shape == (6, 2)
    assert evaluation.p.shape == (6, 2) and ((evaluation.p >= 0) & (evaluation.p <= 1)).all()


def test_a_node_setting_declared_once_is_a_flag_a_node_config_key_and_a_handshake_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("flwr")
    from flwr.app import Context, RecordDict

    import reportfed.cli.federation as commands
    from reportfed.cli import build_parser
    from reportfed.flower import node_service
    from reportfed.flower.wire import description_records, read_description
    from reportfed.reports.node import Node, ReportAlgorithm

    extended = make_dataclass(
        "Extended",
        [("contrast", float, schema.setting(1.0, "a setting added once"))],
        bases=(NodeSettings,),
        frozen=True,
    )
    monkeypatch.setattr(commands, "NodeSettings", extended)
    monkeypatch.setattr(node_service, "NodeSettings", extended)

    argv = ["federation", "node", "--superlink", "h:1", "--insecure", "--data", "a.csv"]
    args = build_parser().parse_args([*argv, "--contrast", "2.5"])
    assert isinstance(args, argparse.Namespace) and args.contrast == 2.5
    config = commands.node_config(args)  # what flower-supernode --node-config gets
    assert config["contrast"] == 2.5 and config["data"] == str(Path("a.csv").resolve())

    context = Context(run_id=1, node_id=1, node_config=config, state=RecordDict(), run_config={})
    settings = node_service.node_settings(dict(context.node_config), dict(context.run_config))
    assert settings.contrast == 2.5  # type: ignore[attr-defined]

    # the handshake carries the node's public settings (no paths on its disk)
    node = Node("a", np.zeros((2, 4), np.float32), np.zeros((2, 1), np.float32), EDEMA)
    sent = ReportAlgorithm(node, settings=settings).describe()
    received = read_description(RecordDict(description_records(sent)))
    assert received == sent and received.settings["contrast"] == 2.5
    assert "data" not in received.settings and "cache-dir" not in received.settings
