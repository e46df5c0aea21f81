"""Which embedding backend for which CPU: speed, closeness to fp32 and the labels' quality, in one
invocation.

Arms: torch fp32 and bf16, OpenVINO fp32 and bf16, ONNX Runtime fp32 and dynamic int8 (per channel), each
embedding the same 2,000 distinct IU report sentences (``reportfed.text.sentences.report_units``) in
a process of its own, on this CPU as it is and, on a CPU that multiplies bf16 natively, capped to
AVX2 (``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2``: torch and OpenVINO then run as on a
CPU without AVX512-BF16; ONNX Runtime chooses its kernels by itself and ignores both). Per arm: sentences/s (the median of
``--repeats`` runs, the arms interleaved) and the cosine of each vector to torch fp32's; an arm that
cannot run under a cap is recorded as ``null`` (OpenVINO bf16 under the AVX2 cap, which ``auto``
never asks for). ``auto`` is what the default embedder runs under each cap (its cache key's last
part).

With ``--quality`` each backend of ``--quality-arms`` (all but torch bf16, whose vectors are
fp32's space, by default) also trains the default recipe on IU and labels the held-out
reports (``benchmarks/labels_iu.py``, seeds ``--seeds``): macro AUROC, F1 of state 1, and the
cold labelling throughput, so int8's effect is judged on the labels, not on the cosine. With
``--quality-from REV`` the labels' quality is the one this file held at git revision ``REV``
(for a run that changed only the speed: the vectors must be those of ``REV``).

    python benchmarks/embedding_backends.py [--sentences 2000] [--quality --seeds 0 | --quality-from REV]

Writes ``benchmarks/results/embedding_backends.json`` (``--out``; ``embedding_backends_avx2.json``
holds a run on a CPU with AVX2 alone).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from machine import cpu_caps, machine, save_result

RESULTS = Path(__file__).resolve().parent / "results" / "embedding_backends.json"
HERE = Path(__file__).resolve().parent
#: arm -> (backend, precision) as make_embedder takes them
ARMS = {
    "torch-fp32": ("torch", "fp32"),
    "torch-bf16": ("torch", "bf16"),
    "openvino-fp32": ("openvino", "fp32"),
    "openvino-bf16": ("openvino", "bf16"),
    "onnx-fp32": ("onnx", None),
    "onnx-int8": ("onnx-int8", None),
}


def sentences(n: int) -> list[str]:
    """``n`` distinct IU report sentences in a fixed random order."""
    from reportfed.data.iu import load_iu
    from reportfed.text.sentences import report_units

    units = list(dict.fromkeys(u for text in load_iu().texts for u in report_units(text)))
    order = np.random.default_rng(0).permutation(len(units))[:n]
    return [units[i] for i in order]


def worker(arm: str, n: int, out: Path) -> None:
    """Embed the sentences with ``arm`` (timed after a warm-up batch); vectors to ``out``."""
    from reportfed.embed import make_embedder

    backend, precision = ARMS[arm]
    texts = sentences(n)
    embedder = make_embedder("minilm", backend=backend, precision=precision)
    embedder.embed(texts[:64])  # loads (and for onnx exports) the model
    start = time.perf_counter()
    vectors = embedder.embed(texts)
    seconds = time.perf_counter() - start
    np.save(out, vectors)
    auto = make_embedder("minilm").cache_key.rsplit(":", 1)[1]
    report = {"sentences_per_s": n / seconds, "auto": auto}
    print(json.dumps(report))


def run_arm(arm: str, cap: str, n: int, folder: Path) -> tuple[dict[str, float], np.ndarray] | None:
    """``arm``'s speed and vectors under ``cap`` (:func:`machine.cpu_caps`); None where it
    cannot run there."""
    out = folder / f"{arm}-{cap}.npy"
    env = {**os.environ, **cpu_caps()[cap]}
    env.pop("REPORTFED_BACKEND", None)
    env.pop("REPORTFED_PRECISION", None)
    cmd = [sys.executable, __file__, "--worker", arm, "--sentences", str(n), "--vectors", str(out)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        print(cap, arm, "cannot run:", done.stderr.strip().splitlines()[-1], flush=True)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1]), np.load(out)


def quality(arm: str, seeds: list[int], folder: Path) -> dict[str, object]:
    """The default recipe on IU with ``arm``'s vectors (``benchmarks/labels_iu.py``)."""
    backend, precision = ARMS[arm]
    env = {**os.environ, "REPORTFED_BACKEND": backend, "REPORTFED_PRECISION": precision or "auto"}
    out = folder / f"labels-{arm}.json"
    cmd = [sys.executable, str(HERE / "labels_iu.py"), "--out", str(out), "--seeds"]
    subprocess.run([*cmd, *map(str, seeds)], env=env, check=True, capture_output=True)
    found = json.loads(out.read_text())
    return {
        "auroc": found["mean_sd"]["auroc"][0],
        "f1_states": found["mean_sd"]["f1_states"][0],
        "cold_reports_per_s": found["throughput"]["cold_reports_per_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--quality", action="store_true", help="also the labels on IU, per arm")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument(
        "--quality-arms",
        nargs="+",
        choices=ARMS,
        default=["torch-fp32", "openvino-fp32", "openvino-bf16", "onnx-int8"],
        help="arms whose labels are measured (torch-bf16's vectors are fp32's space)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="speed runs per arm, interleaved; the median"
    )
    parser.add_argument(
        "--quality-from",
        metavar="REV",
        help="keep the labels' quality this file held at git revision REV (vectors unchanged)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--worker", choices=ARMS, help=argparse.SUPPRESS)
    parser.add_argument("--vectors", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.sentences, args.vectors)
        return
    result: dict[str, object] = {"machine": machine(), "sentences": args.sentences}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        speed: dict[str, dict[str, object]] = {}
        rates: dict[tuple[str, str], list[float]] = {}
        for repeat in range(args.repeats):  # arms interleaved: a drifting machine hits each alike
            for cap in cpu_caps():
                reference = None
                for arm in ARMS:
                    ran = run_arm(arm, cap, args.sentences, folder)
                    if ran is None:
                        speed.setdefault(cap, {})[arm] = None
                        continue
                    found, vectors = ran
                    rates.setdefault((cap, arm), []).append(found["sentences_per_s"])
                    reference = vectors if reference is None else reference
                    cosine = np.sum(vectors * reference, axis=1)
                    speed.setdefault(cap, {})["auto"] = found["auto"]
                    speed[cap][arm] = {
                        "sentences_per_s": round(float(np.median(rates[cap, arm])), 1),
                        "cosine_to_fp32_mean": round(float(cosine.mean()), 4),
                        "cosine_to_fp32_min": round(float(cosine.min()), 4),
                    }
                    print(repeat, cap, arm, speed[cap][arm], flush=True)
        result["repeats"] = args.repeats
        result["speed"] = speed
        if args.quality:
            result["quality_seeds"] = args.seeds
            result["quality"] = {arm: quality(arm, args.seeds, folder) for arm in args.quality_arms}
            print(json.dumps(result["quality"], indent=1))
        elif args.quality_from:
            earlier = json.loads(
                subprocess.run(
                    ["git", "show", f"{args.quality_from}:{RESULTS.relative_to(HERE.parent)}"],
                    cwd=HERE.parent,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            )
            result["quality_seeds"] = earlier["quality_seeds"]
            result["quality"] = earlier["quality"]
            result["quality_from"] = args.quality_from
    save_result(args.out, result)


if __name__ == "__main__":
    main()
