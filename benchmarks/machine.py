"""What a benchmark ran on, stored beside its results: speeds on different CPUs differ."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from reportfed.core.files import atomic_write


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor() or "unknown CPU"


def machine() -> dict[str, object]:
    """Cores, CPU model, whether it multiplies bf16 natively, torch's and OpenVINO's versions."""
    from reportfed.core.telemetry import import_openvino

    openvino = import_openvino()

    from reportfed.embed.precision import native_bf16

    return {
        "cores": os.cpu_count(),
        "cpu": cpu_model(),
        "native_bf16": native_bf16("cpu"),
        "torch": torch.__version__,
        "openvino": openvino.__version__.split("-")[0],
    }


#: the instruction-set cap under which torch and OpenVINO run as on a CPU without AVX512-BF16
AVX2_CAP = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}


def cpu_caps() -> dict[str, dict[str, str]]:
    """The ways a benchmark runs on this CPU: as it is (``native``), and, where it multiplies bf16
    natively, capped to AVX2 (``avx2``: a CPU without AVX512-BF16, emulated; on a CPU without
    native bf16 the cap changes nothing)."""
    from reportfed.embed.precision import native_bf16

    return {"native": {}, **({"avx2": AVX2_CAP} if native_bf16("cpu") else {})}


def checkout_commit(checkout: Path) -> str:
    """The commit checked out in ``checkout`` (a ``--before`` benchmark's other code)."""
    return subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def save_result(path: Path, result: object) -> None:
    """Write a benchmark's result as indented JSON, atomically, and say where."""
    atomic_write(path, (json.dumps(result, indent=1) + "\n").encode())
    print(f"written {path}")


def measured_run(
    command: Sequence[str], env: Mapping[str, str], cwd: Path | None = None
) -> dict[str, float]:
    """``command`` in its own process: wall seconds, its own peak RSS in MB (``wait4``, the
    child's alone) and the peak of its anonymous memory (``RssAnon``, sampled four times a
    second: RSS less the pages of files it maps, such as a memory-mapped dataset's, which the
    kernel drops when memory is short); a failure ends the benchmark with the end of its log."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(command), env=dict(env), stderr=subprocess.PIPE, cwd=cwd)
    assert proc.stderr is not None
    anon = [0.0]
    sampler = threading.Thread(target=_sample_anon, args=(proc.pid, anon), daemon=True)
    sampler.start()
    log = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    sampler.join()
    code = os.waitstatus_to_exitcode(status)
    if code:
        raise SystemExit(f"{' '.join(command[1:4])} failed ({code}):\n{log[-2000:]}")
    return {"wall_s": wall, "peak_rss_mb": usage.ru_maxrss / 1024, "peak_anon_mb": anon[0]}


def _sample_anon(pid: int, peak: list[float]) -> None:
    """The largest ``RssAnon`` (MB) of process ``pid`` while it runs, into ``peak[0]``."""
    status = Path(f"/proc/{pid}/status")
    while True:
        try:
            lines = status.read_text().splitlines()
        except OSError:
            return
        anon = [line.split()[1] for line in lines if line.startswith("RssAnon:")]
        if not anon:  # a zombie, waiting for wait4
            return
        peak[0] = max(peak[0], int(anon[0]) / 1024)
        time.sleep(0.25)
