"""Shared fixtures: the data beside the project (../shared/data), the real MiniLM embedder."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from reportfed.core.environment import setting

pytest_plugins = ["pytester"]  # tests of this file's own hooks (tests/test_layout.py)

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(setting("REPORTFED_SHARED_DATA") or ROOT.parent / "shared" / "data")


def shared_file(*parts: str) -> Path:
    """A file under ../shared/data, or skip the test where it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not present")
    return path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that starts real processes (it asks for :func:`processes`) is slow: the fast run,
    ``-m "not slow"``, leaves it out."""
    for item in items:
        if "processes" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def processes() -> None:
    """Ask for this to start real processes (Flower's, a browser, ``python -m reportfed``...):
    the test is then marked slow (:func:`pytest_collection_modifyitems`)."""


@pytest.fixture(autouse=True)
def _no_process_unless_asked(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test that did not ask for :func:`processes` cannot start one, so the fast run starts
    none and every test that does is marked slow."""
    if "processes" in request.fixturenames:
        return
    test = request.node.nodeid

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError(f"{test} starts a process: ask for the `processes` fixture")

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)
    monkeypatch.setattr(os, "fork", refuse)


#: how pytest.importorskip says a module did not import
_NOT_IMPORTED = re.compile(r"could not import '([\w.]+)'")


@pytest.hookimpl(hookwrapper=True)
def pytest_collectreport(report: pytest.CollectReport):  # type: ignore[no-untyped-def]
    """A test file skipped because its extra's module did not import fails instead where that
    module is installed (a broken extra never hides as a skip)."""
    yield
    _fail_a_broken_extra(report)


def _fail_a_broken_extra(report: pytest.CollectReport | pytest.TestReport) -> None:
    if not report.skipped:
        return
    found = _NOT_IMPORTED.search(str(report.longrepr))
    if found and importlib.util.find_spec(found.group(1).split(".")[0]) is not None:
        report.outcome = "failed"
        report.longrepr = f"{found.group(0)}, though it is installed: {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """A failed test that ran processes (``LoopbackFederation``: SuperLink, SuperNodes, ``flwr
    run``, which ServerApp logs through) shows the end of each process's log in its report."""
    outcome = yield
    report = outcome.get_result()
    _fail_a_broken_extra(report)
    tmp = getattr(item, "funcargs", {}).get("tmp_path")
    if report.when == "call" and report.failed and tmp is not None:
        for log in sorted(Path(tmp).glob("*.log")):
            text = log.read_text(errors="replace")
            report.sections.append((f"process log {log.name} (last 6000 chars)", text[-6000:]))


@pytest.fixture(scope="session")
def iu_archive_or_none(pytestconfig: pytest.Config) -> Path | None:
    """The IU archive: ../shared's copy, else fetched once the way the product fetches it (the
    torchxrayvision wheel from PyPI, sha256-verified) into pytest's cache; ``None`` where it
    cannot be had (offline)."""
    shared = SHARED / "iu" / "NLMCXR_reports.tgz"
    if shared.exists():
        return shared
    from reportfed.core.errors import ArchiveError
    from reportfed.data import iu

    previous = os.environ.get("REPORTFED_CACHE_DIR")
    os.environ["REPORTFED_CACHE_DIR"] = str(pytestconfig.cache.mkdir("reportfed-iu"))
    try:
        return iu.resolve_archive()
    except ArchiveError:
        return None
    finally:
        if previous is None:
            del os.environ["REPORTFED_CACHE_DIR"]
        else:
            os.environ["REPORTFED_CACHE_DIR"] = previous


@pytest.fixture
def iu_archive(iu_archive_or_none: Path | None) -> Path:
    """The IU archive, or skip (it could neither be found nor fetched)."""
    if iu_archive_or_none is None:
        pytest.skip("the IU archive is not in ../shared and could not be fetched from PyPI")
    return iu_archive_or_none


@pytest.fixture(autouse=True)
def _isolated_cache(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    iu_archive_or_none: Path | None,
) -> None:
    """Each test gets its own user cache; the IU archive is the one found or fetched once."""
    monkeypatch.setenv("REPORTFED_CACHE_DIR", str(tmp_path_factory.mktemp("user-cache")))
    if iu_archive_or_none is not None:
        monkeypatch.setenv("REPORTFED_IU_ARCHIVE", str(iu_archive_or_none))


@pytest.fixture(scope="session")
def minilm():  # type: ignore[no-untyped-def]
    from reportfed.embed import make_embedder

    return make_embedder("minilm")


@pytest.fixture(scope="session")
def embeddings_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the whole session (so IU is embedded once)."""
    return tmp_path_factory.mktemp("embeddings")


@pytest.fixture(scope="session")
def iu_embedded(minilm, embeddings_cache, iu_archive_or_none):  # type: ignore[no-untyped-def]
    """IU reports with all 13 findings annotated, their labels and MiniLM embeddings."""
    from reportfed.core.labels import CHEXPERT_13
    from reportfed.data.iu import load_iu
    from reportfed.embed import embed_texts

    path = iu_archive_or_none
    if path is None:
        pytest.skip("the IU archive could not be found or fetched")
    table = load_iu(path).select_labels(list(CHEXPERT_13))
    table = table.fully_annotated()
    x = embed_texts(table.texts, minilm, cache_dir=embeddings_cache, progress=False)
    return table, x


@pytest.fixture(scope="session")
def tables(
    tmp_path_factory: pytest.TempPathFactory, iu_archive_or_none: Path | None
) -> dict[str, Path]:
    """Three hospitals' reports tables (see ``flower_nodes.py``) written from IU."""
    if iu_archive_or_none is None:
        pytest.skip("the IU archive could not be found or fetched")
    os.environ.setdefault("REPORTFED_IU_ARCHIVE", str(iu_archive_or_none))
    from .flower_nodes import write_node_tables

    return write_node_tables(tmp_path_factory.mktemp("nodes"))


@pytest.fixture(scope="session")
def default_model_built(
    tmp_path_factory: pytest.TempPathFactory,
    embeddings_cache: Path,
    iu_archive_or_none: Path | None,
) -> Path:
    """The default model's file, built once a session the way its first use builds it (the
    README's first command and test_cli's first-use test still build it from nothing)."""
    if iu_archive_or_none is None:
        pytest.skip("the IU archive could not be found or fetched")
    from reportfed.default_model import default_model_file

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REPORTFED_CACHE_DIR", str(tmp_path_factory.mktemp("default-model")))
        patch.setenv("REPORTFED_IU_ARCHIVE", str(iu_archive_or_none))
        return default_model_file(cache_dir=embeddings_cache)


@pytest.fixture(scope="module")
def default_labeler(default_model_built: Path, embeddings_cache: Path):  # type: ignore[no-untyped-def]
    """The default model as a labeler, built by this code into a cache of its own (never the
    user's), without progress bars: what the suites hold to their floors."""
    from reportfed.labeler import ReportLabeler

    labeler = ReportLabeler.load(default_model_built, cache_dir=embeddings_cache)
    labeler.progress = False
    return labeler


@pytest.fixture
def default_model(default_model_built: Path) -> Path:
    """The session's default model, copied into this test's user cache, where ``reportfed
    label`` (in process or not) finds it."""
    from reportfed.default_model import default_model_path

    path = default_model_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(default_model_built, path)
    return path
