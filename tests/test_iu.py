import hashlib
import shutil

import numpy as np
import pytest

from reportfed.core.errors import ArchiveError
from reportfed.core.labels import CHEXPERT_14
from reportfed.data import iu

from .conftest import shared_file


def test_sha256_mismatch_is_a_clear_error(tmp_path) -> None:
    bad = tmp_path / "NLMCXR_reports.tgz"
    bad.write_bytes(b"not the archive")
    with pytest.raises(ArchiveError, match=r"sha256 .* expected 8fb6de7e"):
        iu.resolve_archive(bad)
    with pytest.raises(ArchiveError, match="not found"):
        iu.resolve_archive(tmp_path / "missing.tgz")


def test_env_var_and_user_cache_routes(tmp_path, monkeypatch, iu_archive) -> None:
    archive = iu_archive
    monkeypatch.setenv(iu.ENV_VAR, str(archive))
    assert iu.resolve_archive() == archive
    monkeypatch.delenv(iu.ENV_VAR)
    cache = tmp_path / "cache"
    monkeypatch.setenv("REPORTFED_CACHE_DIR", str(cache))
    with pytest.raises(ArchiveError, match="downloads are disabled"):
        iu.resolve_archive(download=False)
    cache.mkdir(exist_ok=True)
    shutil.copyfile(archive, cache / iu.IU_FILENAME)
    assert iu.resolve_archive(download=False) == cache / iu.IU_FILENAME


def test_corrupted_cached_copy_is_discarded(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(iu.ENV_VAR, raising=False)
    monkeypatch.setenv("REPORTFED_CACHE_DIR", str(tmp_path))
    (tmp_path / iu.IU_FILENAME).write_bytes(b"truncated")
    with pytest.raises(ArchiveError, match="downloads are disabled"):
        iu.resolve_archive(download=False)
    assert not (tmp_path / iu.IU_FILENAME).exists()


def test_wheel_route_on_a_fresh_cache(processes: None, tmp_path, monkeypatch) -> None:
    """Fetches torchxrayvision's wheel from PyPI (no install) and reads the archive out of it."""
    monkeypatch.delenv(iu.ENV_VAR, raising=False)
    monkeypatch.setenv("REPORTFED_CACHE_DIR", str(tmp_path))
    path = iu.resolve_archive()
    assert path == tmp_path / iu.IU_FILENAME
    assert hashlib.sha256(path.read_bytes()).hexdigest() == iu.IU_SHA256


def test_full_corpus_counts_in_the_documented_ranges(iu_archive) -> None:
    frame = iu.load_iu_frame(iu_archive)
    assert len(frame) == 3955
    table = iu.load_iu()
    assert len(table) == 3927
    counts = dict(zip(CHEXPERT_14, np.nansum(table.labels, axis=0).astype(int), strict=True))
    ranges = {
        "No Finding": (1300, 1400),
        "Cardiomegaly": (360, 420),
        # 683: crowded bronchovascular markings are no opacity (reportfed/data/mesh.py)
        "Lung Opacity": (650, 900),
        "Atelectasis": (320, 350),
        "Pleural Effusion": (160, 210),
        "Pneumothorax": (20, 30),
        # 46: pulmonary congestion names Edema hedged (reportfed/data/mesh.py); NIH's gold has 42
        "Edema": (40, 55),
        "Consolidation": (25, 35),
        "Pneumonia": (38, 46),
        "Fracture": (80, 90),
        "Support Devices": (350, 400),
        "Lung Lesion": (130, 200),
    }
    for name, (lo, hi) in ranges.items():
        assert lo <= counts[name] <= hi, (name, counts[name])
    assert np.isnan(table.labels).all(axis=1).sum() == 95  # "No Indexing" reports
    findings = iu.load_iu(section="findings")
    assert 0 < len(findings) < len(table)


def test_mesh_labels_agree_with_negbio_on_shared_findings() -> None:
    negbio = iu.load_negbio(shared_file("negbio", "openi_gld_std14.csv"))
    frame = iu.load_iu_frame().set_index("uid")
    common = negbio.index.intersection(frame.index)
    assert len(common) > 3800
    for name in ("Cardiomegaly", "Pleural Effusion", "Atelectasis", "Pneumothorax", "Edema"):
        ours, theirs = frame.loc[common, name], negbio.loc[common, name]
        keep = ours.notna()
        agreement = float((ours[keep] == theirs[keep]).mean())
        assert agreement > 0.93, (name, agreement)
