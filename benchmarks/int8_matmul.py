"""Real int8 matmul (``torch._int_mm``) vs the fake-quantized float path, CPU.

For the matmul shapes of ResNet-20's convolutions (im2col, batch 32) and VGG-11's
hidden linear layer, times (process CPU time, median) of

* fake: quantize x and w to 8-bit values stored as float32, then a float32 matmul
  (what the training layers do in the forward pass);
* int8: quantize to int8 codes, ``torch._int_mm`` (int32 accumulate), rank-1
  zero-point correction back to float32 (:mod:`decent8.quant.int8_matmul`);

and the largest difference between the two results relative to the output range.

    python benchmarks/int8_matmul.py [--threads 1] [--reps 20]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from decent8.quant import fake_quantize
from decent8.quant.int8_matmul import int8_codes, int8_linear

# (name, N rows, I inner, O outputs)
SHAPES = [
    ("resnet20 stage1 conv3x3 (b=32)", 32 * 32 * 32, 16 * 9, 16),
    ("resnet20 stage2 conv3x3 (b=32)", 32 * 16 * 16, 32 * 9, 32),
    ("resnet20 stage3 conv3x3 (b=32)", 32 * 8 * 8, 64 * 9, 64),
    ("resnet20 stage3, 8 nodes stacked", 8 * 32 * 8 * 8, 64 * 9, 64),
    ("vgg11 hidden linear (b=32)", 32, 512, 512),
    ("vgg11 conv 512 @ 2x2 (b=32)", 32 * 2 * 2, 512 * 9, 512),
]


def bench(f, reps: int) -> float:
    f()
    ts = []
    for _ in range(reps):
        t0 = time.process_time()
        f()
        ts.append(time.process_time() - t0)
    return statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    shapes = SHAPES[:1] if os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0") else SHAPES  # smoke: a check that it runs
    a.reps = 2 if shapes is not SHAPES else a.reps
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {a.threads} thread(s), process CPU time, median of {a.reps}")
    print("| matmul [N×I]·[I×O] | fake ms | int8 ms | fake/int8 | mm only fp32/int | max rel diff |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, n, i, o in shapes:
        x = torch.randn(n, i).relu_()
        w = torch.randn(o, i) * 0.1
        xmn, xmx = x.min(), x.max()
        wmn, wmx = w.min(), w.max()

        def fake():
            return fake_quantize(x, xmn, xmx, 8) @ fake_quantize(w, wmn, wmx, 8).t()

        def real():
            qx, sx, zx = int8_codes(x, xmn, xmx)
            qw, sw, zw = int8_codes(w, wmn, wmx)
            return int8_linear(qx, sx, zx, qw, sw, zw)

        tf, ti = bench(fake, a.reps), bench(real, a.reps)
        xf, wf = fake_quantize(x, xmn, xmx, 8), fake_quantize(w, wmn, wmx, 8).t().contiguous()
        qx, sx, zx = int8_codes(x, xmn, xmx)
        qw, sw, zw = int8_codes(w, wmn, wmx)
        qwt = qw.t().contiguous()
        mm_f = bench(lambda: xf @ wf, a.reps)
        mm_i = bench(lambda: torch._int_mm(qx, qwt) if i % 8 == 0 and o % 8 == 0 else int8_linear(qx, sx, zx, qw, sw, zw), a.reps)
        yf, yi = fake(), real()
        rel = ((yf - yi).abs().max() / (yf.max() - yf.min())).item()
        print(f"| {name} [{n}x{i}]·[{i}x{o}] | {1e3 * tf:.2f} | {1e3 * ti:.2f} | {tf / ti:.2f}x | "
              f"{mm_f / mm_i:.2f}x | {rel:.1e} |", flush=True)


if __name__ == "__main__":
    main()
