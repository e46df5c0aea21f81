"""Shared fixtures: the data beside the project (../shared/data), the real MiniLM embedder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("REPORTFED_SHARED_DATA", ROOT.parent / "shared" / "data"))


def shared_file(*parts: str) -> Path:
    """A file under ../shared/data, or skip the test where it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not present")
    return path


@pytest.fixture(autouse=True)
def _isolated_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test gets its own user cache; the IU archive comes from ../shared when present."""
    monkeypatch.setenv("REPORTFED_CACHE_DIR", str(tmp_path_factory.mktemp("user-cache")))
    archive = SHARED / "iu" / "NLMCXR_reports.tgz"
    if archive.exists():
        monkeypatch.setenv("REPORTFED_IU_ARCHIVE", str(archive))


@pytest.fixture(scope="session")
def minilm():  # type: ignore[no-untyped-def]
    from reportfed.embed import make_embedder

    return make_embedder("minilm")


@pytest.fixture(scope="session")
def embeddings_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the whole session (so IU is embedded once)."""
    return tmp_path_factory.mktemp("embeddings")


@pytest.fixture(scope="session")
def iu_embedded(minilm, embeddings_cache):  # type: ignore[no-untyped-def]
    """IU reports with all 13 findings annotated, their labels and MiniLM embeddings."""
    from reportfed.data.iu import load_iu
    from reportfed.embed import embed_texts
    from reportfed.labels import CHEXPERT_13

    path = SHARED / "iu" / "NLMCXR_reports.tgz"
    if not path.exists():
        pytest.skip("IU archive not present")
    table = load_iu(path).select_labels(list(CHEXPERT_13))
    table = table.fully_annotated()
    x = embed_texts(table.texts, minilm, cache_dir=embeddings_cache, progress=False)
    return table, x


@pytest.fixture(scope="session")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three hospitals' reports tables (see ``flower_nodes.py``) written from IU."""
    archive = SHARED / "iu" / "NLMCXR_reports.tgz"
    if not archive.exists():
        pytest.skip("IU archive not present")
    os.environ.setdefault("REPORTFED_IU_ARCHIVE", str(archive))
    from .flower_nodes import write_node_tables

    return write_node_tables(tmp_path_factory.mktemp("nodes"))
