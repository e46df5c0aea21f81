"""Which precision a processor computes vectors in, decided without importing torch on a CPU.

bf16 is only fast where the processor multiplies bf16 natively (AVX512-BF16 or AMX on a CPU, or a
GPU that supports it); elsewhere torch emulates it, several times slower than fp32
(``benchmarks/embedding_backends.py``), so ``auto`` never picks an emulated bf16.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Literal

from reportfed.core.errors import ConfigError

#: ``auto`` takes bf16 where the processor multiplies bf16 natively, else fp32 (:func:`precision_for`)
Precision = Literal["auto", "fp32", "bf16"]
PRECISIONS = ("fp32", "bf16")
#: CPU flags of native bf16 matrix products (AVX512-BF16, AMX)
_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
#: oneDNN instruction-set caps (``ONEDNN_MAX_CPU_ISA``, which torch and OpenVINO both obey) under
#: which bf16 is emulated
_NO_BF16_ISA = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI")


@functools.cache
def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The processor's feature flags (Linux; empty elsewhere): the first core's, read once a
    process (every core of a machine lists the same, hundreds of times on a large server)."""
    try:
        with cpuinfo.open() as lines:
            first = next((line for line in lines if line.startswith("flags")), "")
    except OSError:
        return frozenset()
    return frozenset(first.partition(":")[2].split())


def native_bf16(device: str) -> bool:
    """Whether bf16 matrix products run natively on ``device``: a CUDA GPU that supports bf16, or
    a CPU with AVX512-BF16 or AMX that the libraries are allowed to use (``ONEDNN_MAX_CPU_ISA``
    and ``ATEN_CPU_CAPABILITY`` cap them, as on a machine without)."""
    if device.startswith("cuda"):
        import torch

        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device != "cpu":
        return False
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in _NO_BF16_ISA:
        return False
    if os.environ.get("ATEN_CPU_CAPABILITY", "avx512").lower() != "avx512":
        return False
    return bool(cpu_flags() & _BF16_FLAGS)


def precision_for(precision: str, device: str) -> str:
    """The precision an embedder runs in: ``precision`` itself; for ``auto``, bf16 where
    :func:`native_bf16` holds and fp32 elsewhere (never an emulated bf16)."""
    if precision not in (*PRECISIONS, "auto"):
        raise ConfigError(f"precision must be one of auto, fp32, bf16, got {precision!r}")
    if precision != "auto":
        return precision
    return "bf16" if native_bf16(device) else "fp32"
