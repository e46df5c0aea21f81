"""reportfed.vision: MONAI image classifiers on the aggregation core, image tables, synthetic images, and
combining report and image models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

pytest.importorskip("monai")

from reportfed.combined import combine
from reportfed.core.config import FederationConfig
from reportfed.core.errors import ConfigError, InputFileError
from reportfed.core.labels import LabelSpace
from reportfed.core.metrics import auroc
from reportfed.labeler import ReportLabeler
from reportfed.nn.arrays import to_arrays
from reportfed.vision.data import (
    ImageDataset,
    augment,
    read_image_table,
    table_from_report_labels,
)
from reportfed.vision.federation import (
    ImageFederationConfig,
    ImageLabeler,
    ImageNode,
    global_image_model,
    predict_images,
    run_image_federation,
)
from reportfed.vision.models import build_model, load_representation, norm_keys
from reportfed.vision.synthetic import LABELS, write_synthetic_node

SITES = {
    "a": ["Cardiomegaly", "Pleural Effusion", "Lung Lesion"],
    "b": ["Cardiomegaly", "Pneumothorax", "Support Devices"],
    "c": ["Effusion", "Pneumothorax", "Lung Lesion"],  # NIH spelling
}
SMALL = ImageFederationConfig(arch="densenet121", image_size=64, batch_size=16, lr=1e-3)
TINY_VIT = {"patch_size": 8, "hidden_size": 48, "mlp_dim": 96, "num_layers": 2, "num_heads": 4}


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("images")
    nodes = [
        ImageNode(name, read_image_table(write_synthetic_node(root / name, 150, labels, seed=k)))
        for k, (name, labels) in enumerate(SITES.items())
    ]
    test = read_image_table(write_synthetic_node(root / "test", 200, list(LABELS), seed=99))
    config = ImageFederationConfig(**{**SMALL.__dict__, "rounds": 4, "norm": "fedbn"})
    return nodes, test, config, run_image_federation(nodes, config, progress=False)


def test_three_site_image_federation_learns_every_label(federation) -> None:  # type: ignore[no-untyped-def]
    _, test, config, result = federation
    assert list(result.state.labels) == [
        "Cardiomegaly", "Lung Lesion", "Pneumothorax", "Pleural Effusion", "Support Devices",
    ]  # fmt: skip
    model = global_image_model(result.state, config, local_from=result.node_models["a"])
    p = predict_images(model, test, config)
    aucs = auroc(test.labels[:, test.label_space.indices(result.state.labels)], p)
    assert aucs.min() > 0.75, dict(zip(result.state.labels, aucs, strict=True))
    assert set(result.history[-1]["images_per_s"]) == {"a", "b", "c"}


def test_fedbn_keeps_norm_layers_local_and_fedbn_plus_freezes_statistics(
    federation, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    nodes, _, _, result = federation
    bn = "0.norm0.running_mean"
    assert bn not in result.state.shared and "0.norm0.weight" not in result.state.shared
    a, b = (result.node_models[n].representation.state_dict()[bn] for n in "ab")
    assert not torch.equal(a, b)  # each site's own BatchNorm statistics

    small = [ImageNode(n.name, n.table.subset(range(16))) for n in nodes[:2]]
    plus = ImageFederationConfig(**{**SMALL.__dict__, "rounds": 1, "norm": "fedbn+"})
    start = build_model("densenet121", 1, image_size=64).representation.state_dict()[bn]
    res = run_image_federation(small, plus, progress=False)
    for model in res.node_models.values():
        assert torch.equal(model.representation.state_dict()[bn], start)
    assert "0.norm0.weight" in res.state.shared and bn not in res.state.shared


def test_vit_split_fedbn_keeps_layernorm_local_and_warmup_freezes_the_backbone(
    federation,
) -> None:  # type: ignore[no-untyped-def]
    nodes, _, _, _ = federation
    vit = build_model("vit", 3, image_size=64, **TINY_VIT)
    keys = norm_keys(vit)
    assert keys and all(".norm" in k for k in keys)
    shared, task = to_arrays(vit, skip=keys)
    assert not set(keys) & set(shared) and task["weight"].shape == (3, 48)
    config = ImageFederationConfig(
        arch="vit", image_size=64, batch_size=8, rounds=1, norm="fedbn", warmup_rounds=1,
        vit_options=TINY_VIT,
    )  # fmt: skip
    small = [ImageNode(n.name, n.table.subset(range(8))) for n in nodes[:2]]
    res = run_image_federation(small, config, progress=False)
    torch.manual_seed(config.seed)
    initial, _ = to_arrays(build_model("vit", 5, image_size=64, **TINY_VIT), skip=keys)
    for key, value in res.state.shared.items():  # warm-up: only the heads trained
        np.testing.assert_array_equal(value, initial[key])


def test_image_tables_layouts_loading_and_augmentation(tmp_path: Path) -> None:
    csv = write_synthetic_node(tmp_path / "t", 4, ["Effusion", "Cardiomegaly"], seed=1)
    frame = pd.read_csv(csv)
    frame.loc[0, "Cardiomegaly"] = None
    frame.to_csv(csv, index=False)
    table = read_image_table(csv)
    assert list(table.label_space) == ["Pleural Effusion", "Cardiomegaly"]
    # one default for blank cells in report and image tables: not mentioned, a negative
    assert table.labels[0, 1] == 0 and table.paths[0].is_file()
    table = read_image_table(csv, blank="ignore")
    assert np.isnan(table.labels[0, 1])

    nih = tmp_path / "Data_Entry_2017.csv"
    pd.DataFrame({"Image Index": ["img00000.png", "img00001.png"],
                  "Finding Labels": ["Effusion|Mass", "No Finding"]}).to_csv(nih, index=False)  # fmt: skip
    t = read_image_table(nih, image_root=tmp_path / "t", layout="nih")
    assert len(t.label_space) == 14 and t.labels.sum() == 2
    assert t.labels[0, t.label_space.index("Pleural Effusion")] == 1

    meta = tmp_path / "mimic-cxr-2.0.0-metadata.csv"
    pd.DataFrame({"dicom_id": ["d1"], "subject_id": ["10000032"], "study_id": ["50414267"]}).to_csv(meta, index=False)  # fmt: skip
    pd.DataFrame({"subject_id": ["10000032"], "study_id": ["50414267"], "Edema": ["-1.0"],
                  "Pneumonia": [""]}).to_csv(tmp_path / "mimic-cxr-2.0.0-chexpert.csv", index=False)  # fmt: skip
    m = read_image_table(meta, layout="mimic", uncertain="ones")
    assert m.paths[0].as_posix().endswith("files/p10/p10000032/s50414267/d1.jpg")
    assert m.labels[0, 0] == 1 and m.labels[0, 1] == 0  # blank in chexpert.csv: not mentioned
    # the official split, as `reportfed corpus mimic --split` reads it: by image here
    with pytest.raises(InputFileError, match=r"split\.csv"):
        read_image_table(meta, layout="mimic", split="test")
    import gzip

    with gzip.open(tmp_path / "mimic-cxr-2.0.0-split.csv.gz", "wt") as f:
        f.write("dicom_id,study_id,subject_id,split\nd1,50414267,10000032,test\n")
    assert len(read_image_table(meta, layout="mimic", split="test")) == 1
    assert len(read_image_table(meta, layout="mimic", split="train")) == 0
    with pytest.raises(ConfigError, match="mimic layout only"):
        read_image_table(nih, layout="nih", split="test")

    x, y = ImageDataset(table, image_size=32, channels=3, train=True)[1]
    assert x.shape == (3, 32, 32) and y.shape == (2,)
    img = torch.rand(1, 32, 32)
    out = augment(img, torch.Generator().manual_seed(0))
    assert out.shape == img.shape and out.min() >= 0 and out.max() <= 1

    (tmp_path / "broken.png").write_bytes(b"not a png")
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"Path": ["broken.png"], "Edema": [1]}).to_csv(bad, index=False)
    with pytest.raises(InputFileError, match="not a readable image"):
        ImageDataset(read_image_table(bad))[0]
    with pytest.raises(InputFileError, match="no image path column"):
        read_image_table(tmp_path / "mimic-cxr-2.0.0-chexpert.csv")


def test_an_image_table_is_read_as_a_reports_table_is(tmp_path: Path) -> None:
    """One frame reader for both modalities: a semicolon-separated, gzipped table reads; a
    spreadsheet, a file that is not UTF-8 and a row that does not fit the header are refused in
    the reports table's words, each naming what to do or where."""
    import gzip

    table = tmp_path / "images.csv.gz"
    with gzip.open(table, "wt") as f:
        f.write("Path;Edema\na.png;1\nb.png;0\n")
    read = read_image_table(table)
    assert [p.name for p in read.paths] == ["a.png", "b.png"]
    assert read.labels[:, 0].tolist() == [1, 0]
    sheet = tmp_path / "images.xlsx"
    pd.DataFrame({"Path": ["a.png"], "Edema": [1]}).to_excel(sheet, index=False)
    with pytest.raises(InputFileError, match="is a spreadsheet; reportfed reads CSV or Parquet"):
        read_image_table(sheet)
    latin = tmp_path / "latin.csv"
    latin.write_bytes("Path,Edema\nr\xf6ntgen.png,1\n".encode("latin-1"))
    with pytest.raises(InputFileError, match=r"not UTF-8 text \(byte 0xf6 at line 2\)"):
        read_image_table(latin)
    short = tmp_path / "short.csv"
    short.write_text("Path,Edema\na.png,1,0\n")
    with pytest.raises(InputFileError, match="row 2 has 3 fields but the header has 2"):
        read_image_table(short)
    with pytest.raises(InputFileError, match="is a directory, not an image table"):
        read_image_table(tmp_path)


def test_pretrained_checkpoint_loads_into_the_representation(tmp_path: Path) -> None:
    source = build_model("densenet121", 4, image_size=64)
    torch.save(source.state_dict(), tmp_path / "ckpt.pt")
    model = build_model("densenet121", 2, image_size=64, checkpoint=tmp_path / "ckpt.pt")
    for key, value in source.representation.state_dict().items():
        assert torch.equal(model.representation.state_dict()[key], value)
    torch.save({"something": torch.zeros(1)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a densenet121 representation checkpoint"):
        load_representation(model, tmp_path / "other.pt")


def test_combine_report_and_image_models_and_label_images_from_reports(
    federation, iu_embedded, minilm, embeddings_cache, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("REPORTFED_EMBEDDINGS_CACHE", str(embeddings_cache))
    _, test, config, result = federation
    table, x = iu_embedded
    report_labels = LabelSpace.of(["Cardiomegaly", "Edema"])  # Edema: only the report model
    reports = ReportLabeler(
        granularity="report", config=FederationConfig(rounds=3, hidden=(32,)), progress=False
    )
    reports.fit_embeddings(
        x[:800], table.select_labels(report_labels).labels[:800], report_labels,
        fingerprint=minilm.fingerprint,
    )  # fmt: skip
    image_model = global_image_model(result.state, config, local_from=result.node_models["a"])
    images = ImageLabeler(image_model, result.state.labels, config)  # Pneumothorax etc: image only

    both = combine(reports, images)
    assert set(both.classes_) == {"Edema", *result.state.labels}
    assert both.shared_labels == ["Cardiomegaly"]
    texts = table.texts[800:806]
    paths: list[object] = [str(p) for p in test.paths[:6]]
    study_reports: list[str | None] = [*texts[:4], None, None]
    study_images = [*paths[:2], None, None, *paths[4:]]
    out = both.predict_proba(study_reports, study_images)
    src, proba = out.source, out.probabilities
    assert list(src["Cardiomegaly"]) == ["fused", "fused", "report", "report", "image", "image"]
    assert list(src["Edema"]) == ["report"] * 4 + ["", ""]
    assert list(src["Pneumothorax"]) == ["image", "image", "", "", "image", "image"]
    pr = reports.predict_proba(texts[:2])[:, 0]
    pi = images.predict_proba(paths[:2])[:, list(images.classes_).index("Cardiomegaly")]
    np.testing.assert_allclose(proba["Cardiomegaly"][:2], (pr + pi) / 2, rtol=1e-5)
    assert proba["Edema"][4:].isna().all()

    # a per-label weight fitted on validation studies where the report is the truth
    val_texts, val_paths = table.texts[900:960], [str(p) for p in test.paths[:60]]
    truth = reports.predict(val_texts)[:, :1]
    both.fit_weights(val_texts, val_paths, truth, ["Cardiomegaly"])
    assert both.weights["Cardiomegaly"] >= 0.5

    # the usual pipeline: the report model labels the studies an image model will train on
    labelled = table_from_report_labels(reports, val_texts, val_paths)
    assert list(labelled.label_space) == ["Cardiomegaly", "Edema"]
    np.testing.assert_array_equal(labelled.labels, reports.predict(val_texts))


def serve_images(nodes: list[ImageNode], out: Path, **run: Any) -> Any:
    """The ServerApp over the image ``nodes`` (DenseNet121 at 64 px, FedBN) through DirectGrid,
    with ``run`` overriding the run config; returns the grid."""
    pytest.importorskip("flwr")
    from flwr.app import Context, RecordDict

    from reportfed.flower.client_app import app as client_app
    from reportfed.flower.server_app import app as server_app

    from .direct_grid import DirectGrid
    from .flower_nodes import run_config

    config = run_config(modality="images", arch="densenet121", **{"image-size": 64}, lr=1e-3,
                        norm="fedbn", **{"min-nodes": 3}, out=str(out), **run)  # fmt: skip
    grid = DirectGrid(client_app, config)
    for k, node in enumerate(nodes):
        csv = node.table.paths[0].parent / "labels.csv"
        grid.add_node(10 + k, {"data": str(csv), "name": node.name, "val-fraction": 0.3})
    context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=config)
    server_app(grid, context)
    return grid


def test_image_federation_through_the_flower_strategy_with_fedbn(federation, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from reportfed.text.model_file import read_model

    nodes, _, _, _ = federation
    grid = serve_images(nodes, tmp_path, rounds=4, **{"evaluate-every": 4})
    model = read_model(tmp_path / "global.safetensors")
    assert model.granularity == "image" and model.architecture["image_size"] == 64
    assert model.provenance["federation"]["modality"] == "images"
    assert not any("norm" in k for k in model.state.shared)  # FedBN layers stay on the nodes
    evaluation = json.loads((tmp_path / "history.json").read_text())[-1]["evaluation"]
    assert evaluation["macro-auroc"] > 0.75
    assert min(v for k, v in evaluation.items() if k.startswith("auroc/")) > 0.6
    assert all("local" in ctx.state.array_records for ctx in grid.nodes.values())


def test_secure_image_federation_equals_the_plain_one(federation, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """SecAgg+ sums the image nodes' changes too (FedBN's layers stay local either way). After one
    round the model differs from the plain run's by SecAgg+'s rounding, at most 2 x 8 / 2**30 =
    1.5e-8 per weight, and where that moves a weight across float32's rounding, a unit in its
    last place (measured 1.5e-8 at most). Later rounds train from those weights, and Adam
    magnifies the difference, as any perturbation of the weights would."""
    from reportfed.text.model_file import read_model

    nodes, _, _, _ = federation
    states = {}
    for secure in (False, True):
        out = tmp_path / str(secure)
        serve_images(nodes, out, rounds=1, **{"evaluate-every": 0, "secure-aggregation": secure})
        states[secure] = read_model(out / "global.safetensors").state
    plain, masked = states[False], states[True]
    assert list(masked.labels) == list(plain.labels)
    for block in ("shared", "task"):
        for key, value in getattr(plain, block).items():
            np.testing.assert_allclose(
                getattr(masked, block)[key], value, atol=2 * 8 / 2**30, rtol=2**-23
            )
