"""The README's code blocks run as written: every ```bash block in its own fresh folder with
``examples/`` beside it (as from the checkout's root), the ```python blocks in order in one
namespace (later snippets use earlier ones' results), and the output a block shows in the comment
lines after a ``print(...)`` is what it prints. A README edit that breaks a command fails here; a
block in another language fails until this file knows how to run it.

The commands that install reportfed or run this suite (``pip install ...``, ``python3 -m pytest``)
are what CI's ``.ci/run`` runs on a clean clone; here they are checked against that script.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from .conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CI = (ROOT / ".ci" / "run").read_text()


@dataclass(frozen=True)
class Block:
    """One fenced code block of a document."""

    path: Path
    line: int  #: the line of the opening fence
    language: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.path.name}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, in order."""
    found, lines = [], path.read_text().splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if fence:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            found.append(Block(path, i + 1, fence.group(1), "\n".join(lines[i + 1 : end]) + "\n"))
            i = end
        i += 1
    return found


def shown_output(code: str) -> list[str]:
    """The lines a block shows as printed: the comment lines right after a ``print(...)`` line,
    without their ``# ``."""
    shown, lines = [], code.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("print("):
            for after in lines[i + 1 :]:
                if not after.startswith("# "):
                    break
                shown.append(after[2:])
    return shown


ALL = [b for doc in DOCS for b in blocks(doc)]
BASH = [b for b in ALL if b.language == "bash"]
PYTHON = [b for b in ALL if b.language == "python"]


def test_every_block_is_bash_or_python() -> None:
    assert [b.id for b in ALL if b.language not in ("bash", "python")] == []
    assert len(BASH) >= 2 and len(PYTHON) >= 3
    assert any(shown_output(b.code) for b in PYTHON)  # the README's first snippet shows its output


def _ci_command(segment: str) -> bool:
    """A command that installs reportfed or runs the test suite: CI runs it."""
    return segment.startswith("pip install") or segment == "python3 -m pytest -q"


def _split(code: str) -> tuple[str, list[str]]:
    """The script to run, and the install / test commands taken out of it (``&&`` chains are
    split so that the rest of a chain runs)."""
    joined = code.replace("\\\n", " ")
    script, ci = [], []
    for line in joined.splitlines():
        parts = [p.strip() for p in line.split("&&")] if not line.lstrip().startswith("#") else []
        ci += [p for p in parts if _ci_command(p)]
        rest = [p for p in parts if p and not _ci_command(p)]
        script.append(" && ".join(rest) if parts else line)
    return "\n".join(script) + "\n", ci


def test_the_readmes_inline_federation_commands_run_in_a_tested_block() -> None:
    """The README walks a new hospital through federation commands in its prose; each is a line
    of a bash block that runs here (docs/federation.md's trial), as written."""
    spans = re.findall(
        r"`(reportfed federation \w+ [^`]*--[^`]*)`", (ROOT / "README.md").read_text()
    )
    tested = {line.strip().removesuffix("&").strip() for b in BASH for line in b.code.splitlines()}
    assert len(spans) >= 3 and [s for s in spans if s not in tested] == []


def test_the_install_and_test_commands_are_what_ci_runs() -> None:
    ci = [
        shlex.split(line.replace("python3 -m pip", "pip").replace(" --quiet", ""))
        for line in CI.splitlines()
        if line.startswith(("python3 -m pip install", "python3 -m pytest"))
    ]
    taken = [c for b in BASH for c in _split(b.code)[1]]
    assert taken, "the README's first block installs reportfed and runs the tests"
    for command in taken:
        argv = shlex.split(command)
        if argv[:2] == ["pip", "install"] and "-e" in argv:
            # `pip install -e .` is contained in CI's `pip install -e ".[test,flower,vision]"`
            assert any("-e" in c and c[c.index("-e") + 1].startswith(".") for c in ci), command
        else:
            assert argv in ci or argv == ["python3", "-m", "pytest", "-q"], command
    assert CI.rstrip().endswith("python3 -m pytest -q")


@pytest.fixture()
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embeddings_cache: Path) -> Path:
    """A fresh folder with a copy of ``examples/``; the session's embedding cache, so IU's
    sentences are embedded once per test session."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.setenv("REPORTFED_EMBEDDINGS_CACHE", str(embeddings_cache))
    return tmp_path


def _run_bash(script: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with ``bash -euo pipefail`` in its own session; whatever it left running in
    the background (servers, nodes) is stopped when it ends. Its output goes to ``block.log``
    (attached to the report of a failing test)."""
    bindir = str(Path(sys.executable).parent)  # the `reportfed` of this interpreter
    env = {
        **os.environ,
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
        # the Quickstarts run from the checkout's root, where `python -m experiments` finds the
        # research package (the wheel ships only reportfed and vision); ``cwd`` stands in for it
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    log = cwd / "block.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:
            _stop_group(proc.pid)
    text = log.read_text(errors="replace")
    if proc.returncode is None:
        pytest.fail(f"timed out after {timeout} s:\n{text[-6000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, text)


def _stop_group(pgid: int) -> None:
    """SIGTERM a process group, then SIGKILL what is left of it."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(50):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.killpg(pgid, signal.SIGKILL)


@pytest.mark.parametrize("block", BASH, ids=[b.id for b in BASH])
def test_bash_block_runs_as_written(
    processes: None, block: Block, workspace: Path, iu_archive: Path, request: pytest.FixtureRequest
) -> None:
    pytest.importorskip("flwr")
    if block is not BASH[0]:  # the first command builds the default model from nothing
        request.getfixturevalue("default_model")
    script, _ = _split(block.code)
    done = _run_bash(script, workspace, timeout=540)
    assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{done.stdout[-6000:]}"
    assert "Traceback" not in done.stdout
    if "reportfed label --reports examples/reports.csv\n" in script:
        # the first command: the README's table of the example reports, written by the product
        expected = pd.read_csv(ROOT / "examples" / "labeled_reports.csv")
        pd.testing.assert_frame_equal(pd.read_csv(workspace / "labeled_reports.csv"), expected)
    if "--findings examples/findings.toml" in script:
        # docs/labels.md: the model reads the example's findings in four states, with evidence
        states = pd.read_csv(workspace / "my_labels.csv").set_index("id")
        assert states["Hiatal hernia"].tolist() == [1.0, 0.0, -1.0, 1.0]
        assert states["Aortic calcification"].tolist() == [0.0, 1.0, -1.0, 1.0]
        evidence = pd.read_csv(workspace / "my_evidence.csv", keep_default_na=False)
        assert {"Hiatal hernia", "Aortic calcification"} <= set(evidence["label"])
    if "reportfed federation run" in script:
        assert (workspace / "federation" / "global.safetensors").is_file()
        labeled = pd.read_csv(workspace / "federated_labels.csv")
        assert len(labeled) == 6 and "Cardiomegaly" in labeled.columns
        assert "round 2: accepted ['hospital_a', 'hospital_b']" in done.stdout


def test_python_blocks_run_as_files_in_order(
    processes: None, workspace: Path, iu_archive: Path, default_model: Path
) -> None:
    """Each Python block is saved as a file and run with ``python file.py``, as a user runs it,
    one after the other in one folder (a later block reads what an earlier one wrote); what a
    block shows as printed is printed."""
    pytest.importorskip("monai")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    for block in PYTHON:
        script = workspace / f"{block.path.stem}_{block.line}.py"
        script.write_text(block.code)
        done = subprocess.run(
            [sys.executable, script.name], cwd=workspace, env=env, capture_output=True,
            text=True, timeout=900,
        )  # fmt: skip
        assert done.returncode == 0, f"{block.id}:\n{done.stderr[-6000:]}"
        printed = done.stdout.splitlines()
        assert [line for line in shown_output(block.code) if line not in printed] == [], block.id
    # labelling on a Dask cluster gives one process's states (docs/labels.md)
    from reportfed.data.iu import load_iu
    from reportfed.labeler import ReportLabeler

    labeler = ReportLabeler.load(workspace / "model.safetensors")
    texts = load_iu().fully_annotated().texts[600:1000]
    one_process = pd.DataFrame(labeler.predict_states(texts), columns=list(labeler.classes_))
    dask_states = pd.read_csv(workspace / "dask_states.csv")
    pd.testing.assert_frame_equal(dask_states, one_process, check_dtype=False)
