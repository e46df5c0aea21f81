"""The house's rooms: the product (``reportfed/``) imports nothing from the research
(``experiments/``), ``vision/`` imports only the product, and no arrow climbs back up the
product's layers (core and text -> node algorithms and labeler -> Flower -> command line)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .conftest import ROOT

#: the product's layers, bottom first; a module may import its own layer or lower ones
LAYERS = (
    "reportfed",  # core (the node interface too), text, data, embed: every module not named below
    ("reportfed.report_node", "reportfed.engine", "reportfed.labeler",
     "reportfed.default_model", "reportfed.combine"),
    ("reportfed.flower",),
    ("reportfed.cli", "reportfed.__main__"),
)  # fmt: skip


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(package: str) -> dict[str, set[str]]:
    """Every module of ``package`` and the absolute names it imports (at any depth)."""
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        found[_module(path)] = names
    return found


def layer(module: str) -> int:
    """The layer of a product module."""
    for level, prefixes in enumerate(LAYERS[1:], start=1):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return level
    return 0


def test_the_product_imports_nothing_from_the_research() -> None:
    product = imports("reportfed")
    assert {m: sorted(n for n in names if n.split(".")[0] == "experiments")
            for m, names in product.items() if any(n.startswith("experiments") for n in names)} == {}  # fmt: skip
    vision = imports("vision")
    assert not {n for names in vision.values() for n in names if n.startswith("experiments")}


def test_no_arrow_climbs_back_up_the_product() -> None:
    product = imports("reportfed")
    up = sorted(
        (module, name)
        for module, names in product.items()
        for name in names
        if name.startswith("reportfed.") and layer(name) > layer(module)
    )
    assert up == []


def test_every_relative_link_of_the_docs_names_a_file() -> None:
    docs = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = [
        f"{doc.name}: {target}"
        for doc in docs
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text())
        if "://" not in target and not (doc.parent / target).exists()
    ]
    assert broken == []
