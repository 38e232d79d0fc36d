"""Layer-wise top-k: the batched selection (one top-k per distinct slot size) vs a
Python loop over layers (one top-k per slot), CPU.

Times ``TopKCompressor.encode`` against :func:`encode_loop`, a per-layer loop producing
the same payload (checked), for the digits CNN at k = 64 and 256 nodes and ResNet-20
at k = 8 (ratio 0.99, fp32 and 8-bit values). Median process CPU time of interleaved
repetitions.

    python benchmarks/topk_layers.py [--threads 1] [--reps 30]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from decent8.compression import TopKCompressor
from decent8.compression.payload import Payload
from decent8.layout import ParamLayout
from decent8.models import make_model

CASES = [("digits cnn", "cnn", (1, 8, 8), 64), ("digits cnn", "cnn", (1, 8, 8), 256),
         ("resnet20", "resnet20", (3, 32, 32), 8)]


def encode_loop(comp: TopKCompressor, x: torch.Tensor) -> Payload:
    """The fp32 top-k payload with one ``torch.topk`` per layer (the former code path)."""
    k = x.shape[0]
    values = torch.empty(k, comp.num_kept)
    local = torch.empty(k, comp.num_kept, dtype=torch.int64)
    for slot, c, start in zip(comp.layout, comp.keep, comp.kept_starts):
        xs = x[:, slot.offset:slot.end]
        idx = torch.arange(c).expand(k, c) if c == slot.numel else torch.topk(xs.abs(), c, dim=1, sorted=False).indices
        local[:, start:start + c] = idx
        values[:, start:start + c] = xs.gather(1, idx)
    return Payload({"values": values, "indices": comp._encode_indices(local)})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--ratio", type=float, default=0.99)
    a = ap.parse_args()
    cases = CASES[:1] if os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0") else CASES  # smoke: a check that it runs
    a.reps = 2 if cases is not CASES else a.reps
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {a.threads} thread(s), ratio {a.ratio}, process CPU time, median of {a.reps}")
    print("| model | k | slots | sizes | loop ms | batched ms | loop/batched |\n|---|---:|---:|---:|---:|---:|---:|")
    for label, model, shape, k in cases:
        layout = ParamLayout.from_module(make_model(model, shape, 10))
        comp = TopKCompressor(layout, a.ratio)
        x = torch.randn(k, layout.dim)
        ref, got = encode_loop(comp, x), comp.encode(x)
        assert torch.equal(comp.decode(ref), comp.decode(got)), "messages differ"  # same entries (order may differ)
        times: dict[str, list[float]] = {"loop": [], "batched": []}
        for _ in range(a.reps):
            for name, f in (("loop", lambda: encode_loop(comp, x)), ("batched", lambda: comp.encode(x))):
                t0 = time.process_time()
                f()
                times[name].append(time.process_time() - t0)
        tl, tb = (statistics.median(times[n]) for n in ("loop", "batched"))
        ratio = statistics.median(p / q for p, q in zip(times["loop"], times["batched"]))
        print(f"| {label} | {k} | {len(layout)} | {len(comp.size_groups)} | {1e3 * tl:.2f} | {1e3 * tb:.2f} | "
              f"{ratio:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
