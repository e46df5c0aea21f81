"""Train-step throughput of the image classifiers (DenseNet121, ViT-B/16) on this machine's device.

    python benchmarks/vision_steps.py [--sizes 64 224] [--batch 8] [--steps 5]

Prints seconds per step and images per second (after one warm-up step); CUDA uses bf16 autocast
and channels-last, as in :func:`reportfed.vision.federation.train_images`.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from reportfed.core.files import atomic_write
from reportfed.nn.loss import masked_bce
from reportfed.vision.models import build_model
from reportfed.vision.train import ImageFederationConfig, device_of


def step_time(arch: str, size: int, batch: int, steps: int, device: torch.device) -> float:
    """Mean seconds per optimizer step on random inputs (one warm-up step not counted)."""
    torch.manual_seed(0)
    model = build_model(arch, 14, image_size=size).to(device)  # type: ignore[arg-type]
    model = model.to(memory_format=torch.channels_last).train()  # type: ignore[call-overload]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, 1, size, size, device=device).contiguous(
        memory_format=torch.channels_last
    )
    y = (torch.rand(batch, 14, device=device) < 0.3).float()
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits = model(x)
        loss = masked_bce(logits.float(), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return sum(times[1:]) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 224])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--out", default="benchmarks/results/vision_steps.json")
    args = parser.parse_args()
    device = device_of(ImageFederationConfig())
    rows = []
    for arch in ("densenet121", "vit"):
        for size in args.sizes:
            secs = step_time(arch, size, args.batch, args.steps, device)
            rows.append({"device": str(device), "arch": arch, "image_size": size,
                         "batch": args.batch, "s_per_step": secs,
                         "images_per_s": args.batch / secs})  # fmt: skip
            print(f"{device} {arch:<12} {size:>4}px batch {args.batch}: "
                  f"{secs:.3f} s/step, {args.batch / secs:.1f} images/s", flush=True)  # fmt: skip
    atomic_write(args.out, json.dumps(rows, indent=1).encode())


if __name__ == "__main__":
    main()
