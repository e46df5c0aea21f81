"""The house's rooms: the product (``reportfed/``) imports nothing from the research
(``experiments/``), and no arrow climbs back up the product's layers. A module's layer is its
folder: ``reportfed/core/`` at the bottom, then the folders of each layer below, the public
modules at ``reportfed/``'s top (the labeler, the default model, ``combine``), then ``flower/``,
then ``cli/``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from .conftest import ROOT

#: the product's folders by layer, bottom first; a module may import its own layer or lower ones
LAYERS = (
    ("core",),  # pure NumPy: errors, labels, settings, aggregation, server, rounds, node interface
    ("nn", "data"),  # torch pieces both modalities share; corpora and tables
    ("text",),  # sentences, assertions, states, calibration, templates, the report model
    ("embed",),  # embedders and the cache
    ("reports", "vision", "pages"),  # the two modalities' node algorithms and engines; pages
    (None,),  # the public modules at the package's top: labeler, default_model, combine
    ("flower",),
    ("cli", "__main__"),
)


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(package: str) -> dict[str, set[str]]:
    """Every module of ``package`` and the absolute names it imports (at any depth)."""
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names = set()
        tree = ast.parse(path.read_text())
        if path == ROOT / "reportfed" / "__init__.py":  # the public face re-exports every layer
            tree.body = [n for n in tree.body if not _typing_only(n)]  # lazily, at first use
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        found[_module(path)] = names
    return found


def _typing_only(node: ast.stmt) -> bool:
    """An ``if TYPE_CHECKING:`` block: imports for type checkers, none at run time."""
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    )


def layer(module: str) -> int:
    """The layer of a product module (or a name in one), from its folder
    (``reportfed.<folder>.<module>``): a module directly in ``reportfed/`` is a public module, and
    the package itself (``__version__``, nothing imported) is at the bottom."""
    parts = module.split(".")
    if len(parts) == 1 or (parts[1].startswith("__") and parts[1] != "__main__"):
        return 0
    for level, folders in enumerate(LAYERS):
        if parts[1] in folders:
            return level
    if (ROOT / "reportfed" / f"{parts[1]}.py").is_file():
        return LAYERS.index((None,))
    raise AssertionError(f"{module} is in no layer: add its folder to LAYERS")


def test_every_product_module_is_in_a_layer() -> None:
    placed = {m: layer(m) for m in imports("reportfed")}  # raises for a module outside them
    # and every layer holds modules: a folder renamed away from LAYERS leaves one empty
    assert sorted(set(placed.values())) == list(range(len(LAYERS))), placed


def test_the_product_imports_nothing_from_the_research() -> None:
    product = imports("reportfed")
    assert {m: sorted(n for n in names if n.split(".")[0] == "experiments")
            for m, names in product.items() if any(n.startswith("experiments") for n in names)} == {}  # fmt: skip


def test_no_arrow_climbs_back_up_the_product() -> None:
    product = imports("reportfed")
    up = sorted(
        (module, name)
        for module, names in product.items()
        for name in names
        if name.startswith("reportfed.") and layer(name) > layer(module)
    )
    assert up == []


def test_the_core_imports_no_torch() -> None:
    core = {m: names for m, names in imports("reportfed").items() if m.startswith("reportfed.core")}
    assert {
        m: sorted(n for n in names if n.split(".")[0] == "torch") for m, names in core.items()
    } == {m: [] for m in core}


def test_every_relative_link_of_the_docs_names_a_file() -> None:
    docs = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = [
        f"{doc.name}: {target}"
        for doc in docs
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text())
        if "://" not in target and not (doc.parent / target).exists()
    ]
    assert broken == []


def test_every_environment_variable_is_declared_once_and_read_through_it() -> None:
    """``REPORTFED_*`` variables are declared in ``core/environment.py`` and read there alone;
    every one a page, a module or a test names is declared."""
    from reportfed.core.environment import VARIABLES

    declared = {v.name for v in VARIABLES}
    named: set[str] = set()
    for path in [*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md")] + [
        p
        for folder in ("reportfed", "experiments", "benchmarks", "tests")
        for p in (ROOT / folder).rglob("*.py")
    ]:
        text = path.read_text()
        named |= set(re.findall(r"\bREPORTFED_[A-Z_]+\b", text))
        if path.suffix == ".py" and path.name != "environment.py":
            read = re.findall(r"environ(?:\.get\(|\[)\s*[\"']REPORTFED_", text)
            assert not read or path.parent.name == "tests", f"{path} reads os.environ itself"
    assert named <= declared, sorted(named - declared)


def test_every_file_the_package_reads_is_in_its_wheel() -> None:
    """Each file under ``reportfed/`` that is not Python is named by pyproject.toml's
    package-data (a non-editable install carries only those: the lexicon once was not)."""
    import fnmatch
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = data["package-data"]
    missing = []
    for path in sorted((ROOT / "reportfed").rglob("*")):
        if not path.is_file() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
            continue
        inside = path.relative_to(ROOT)
        held = any(
            fnmatch.fnmatch(str(inside.relative_to(package.replace(".", "/"))), pattern)
            for package, globs in patterns.items()
            if inside.is_relative_to(package.replace(".", "/"))
            for pattern in globs
        )
        if not held:
            missing.append(str(inside))
    assert missing == []


def test_a_test_that_starts_a_process_without_asking_fails_and_one_that_asks_is_slow(
    pytester: pytest.Pytester, processes: None
) -> None:
    """The fast run starts no process: starting one needs the ``processes`` fixture, which marks
    the test slow; a skip for an installed module that does not import is a failure."""
    hooks = "_no_process_unless_asked, processes, pytest_collection_modifyitems"
    pytester.makeconftest(f"from tests.conftest import {hooks}, pytest_runtest_makereport")
    pytester.makepyfile(
        test_inner="""
        import subprocess, sys
        import pytest

        def test_unasked():
            subprocess.run([sys.executable, "-c", "pass"])

        def test_asked(processes):
            subprocess.run([sys.executable, "-c", "pass"], check=True)

        def test_broken_extra():
            pytest.importorskip("json.no_such_module")

        def test_missing_extra():
            pytest.importorskip("no_such_distribution_at_all")
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:benchmark", "-rA")
    result.assert_outcomes(passed=1, failed=2, skipped=1)
    result.stdout.fnmatch_lines(["*test_unasked*starts a process*processes*"])
    slow = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-p", "no:benchmark", "-m", "slow"
    )
    slow.assert_outcomes(passed=1, deselected=3)


#: the product modules no test imports by name, each with the test file that reaches it and a
#: word of that file that shows how (a command, a flag, a file it writes); every other module
#: is imported by some test
REACHED_THROUGH = {
    "reportfed.__main__": ("test_cli.py", '"-m", "reportfed"'),
    "reportfed.cli.data": ("test_cli.py", '["corpus"'),
    "reportfed.cli.label": ("test_cli.py", '"label"'),
    "reportfed.cli.options": ("test_cli.py", "reportfed: warning:"),
    "reportfed.cli.train": ("test_cli.py", '"train"'),
    "reportfed.core.characters": ("test_behaviour.py", "invisible characters"),
    "reportfed.core.public": ("test_public_api.py", "__all__"),
    "reportfed.core.telemetry": ("test_cli.py", "telemetry"),
    "reportfed.embed.base": ("test_embed.py", "minilm"),
    "reportfed.embed.local": ("test_embed.py", "minilm"),
    "reportfed.embed.onnx": ("test_embed.py", "onnx-int8"),
    "reportfed.embed.openai_api": ("test_embed.py", "api_server"),
    "reportfed.flower.logs": ("test_flower_deployment.py", "this node cannot answer"),
    "reportfed.flower.run_checks": ("test_federation_cli.py", "dp-noise"),
    "reportfed.flower.secure": ("test_secure.py", "secure"),
    "reportfed.flower.secure_round": ("test_secure.py", "secure"),
    "reportfed.flower.warm": ("test_warm.py", "warm"),
    "reportfed.nn": ("test_vision.py", "to_arrays"),
    "reportfed.pages": ("test_pages.py", "review"),
    "reportfed.text": ("test_states.py", "reportfed.text"),
    "reportfed.text.language": ("test_behaviour.py", "bilingual"),
    "reportfed.vision.node": ("test_node.py", "images"),
}


def test_every_product_module_is_tested_by_name_or_through_a_named_test() -> None:
    """The tests do not mirror the package folder by folder; instead each module is imported by
    some test, or :data:`REACHED_THROUGH` names the test file that reaches it and how."""
    tests = {path.name: path.read_text() for path in (ROOT / "tests").rglob("*.py")}
    imported = {name for module in imports("tests").values() for name in module}
    for module in imports("reportfed"):
        if module in imported:
            assert module not in REACHED_THROUGH, f"{module} is imported by a test: unlist it"
            continue
        assert module in REACHED_THROUGH, f"no test imports {module}: test it, or map it here"
        file, word = REACHED_THROUGH[module]
        assert word in tests.get(file, ""), f"{file} does not show how it reaches {module}"
