"""reportfed's public face: the names ``from reportfed import ...`` gives, held by a snapshot (a
name added or removed is a decision, made here), each one resolving, and ``import reportfed``
loading none of the heavy libraries they need."""

from __future__ import annotations

import subprocess
import sys

import reportfed

PUBLIC = [
    "__version__",
    "ReportLabeler",
    "ReportReader",
    "Annotation",
    "load_default_model",
    "FederationConfig",
    "LabelSpace",
    "combine",
    "Findings",
    "read_findings",
    "Lexicon",
    "Corrections",
    "rule_states",
    "report_mentions",
    "ReportTable",
    "read_table",
    "load_iu",
    "load_negbio",
    "load_mimic",
    "ReportfedError",
    "ConfigError",
    "InputFileError",
    "LabelError",
    "ModelFileError",
    "EmbeddingError",
    "ReportfedWarning",
]


def test_the_public_names_are_the_snapshot_and_each_resolves() -> None:
    assert reportfed.__all__ == PUBLIC
    assert dir(reportfed) == sorted(PUBLIC)
    for name in PUBLIC:
        value = getattr(reportfed, name)
        assert name == "__version__" or value.__name__ == name, name


def test_input_errors_are_value_errors_as_scikit_learn_raises() -> None:
    for error in ("ConfigError", "InputFileError", "LabelError", "ModelFileError"):
        assert issubclass(getattr(reportfed, error), ValueError), error


def test_importing_reportfed_loads_no_torch_nor_scikit_learn(processes: None) -> None:
    code = (
        "import sys, reportfed; reportfed.__version__; "
        "print(sorted(m for m in ('torch', 'sklearn', 'pandas', 'transformers') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        reportfed.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("reportfed.no_such_name resolved")


VISION = [
    "ImageTable",
    "read_image_table",
    "table_from_report_labels",
    "build_model",
    "ImageFederationConfig",
    "predict_images",
    "ImageNode",
    "run_image_federation",
    "global_image_model",
    "ImageLabeler",
    "write_synthetic_node",
]


def test_the_image_side_is_reportfed_vision_with_its_own_snapshot() -> None:
    """It installs under reportfed's name: no top-level ``vision`` package to collide with."""
    import importlib.util

    import reportfed.vision

    assert importlib.util.find_spec("vision") is None
    assert reportfed.vision.__all__ == VISION and dir(reportfed.vision) == sorted(VISION)
    if importlib.util.find_spec("monai") is not None:  # the [vision] extra
        for name in VISION:
            assert getattr(reportfed.vision, name).__name__ == name


def test_type_checkers_see_each_public_name_where_it_is_loaded_from() -> None:
    """The ``TYPE_CHECKING`` imports (for IDEs and mypy) name the same module for each public
    name as the lazy loader does, in both public packages."""
    import ast
    from pathlib import Path

    import reportfed.vision

    for package in (reportfed, reportfed.vision):
        tree = ast.parse(Path(package.__file__).read_text())
        block = next(n for n in tree.body if isinstance(n, ast.If))
        seen = {
            a.name: n.module for n in block.body if isinstance(n, ast.ImportFrom) for a in n.names
        }
        assert seen == package._PUBLIC, package.__name__


def test_no_public_name_is_also_a_module_of_its_package() -> None:
    """Importing a submodule sets it as the package's attribute of that name, which would hide
    a public name spelled the same (``reportfed.combine`` once became the module, not the
    function, after anything imported the module)."""
    import pkgutil

    import reportfed.vision

    for package in (reportfed, reportfed.vision):
        modules = {m.name for m in pkgutil.iter_modules(package.__path__)}
        assert not modules & set(package.__all__), package.__name__
