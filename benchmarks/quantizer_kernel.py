"""The 8-bit quantizer alone: the eager passes against the CPU's C loop (and, with
``--compiled``, the ``torch.compile`` kernel), per tensor shape, deterministic and stochastic
rounding, one range and per-node ranges drawing from node streams.

Each row quantizes a tensor the way the 8-bit layers do (:func:`quantize_per_node`: the
range, then Q_b), process CPU time, one thread, median of ``--reps`` calls, the modes
interleaved call by call; the last column checks that the modes agree bit for bit.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/quantizer_kernel.py [--reps 41] [--compiled]

``--steps resnet20:8:16 cnn:64 --rounds 15`` times whole 8-bit training steps instead (the run
``decent8 train`` builds, as ``benchmarks/lowprec_step.py`` builds it: one Choco-SGD iteration
at the eager ``sim.chunk`` that ``auto`` picks), the eager passes against the C loop, step by
step interleaved.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from decent8 import streams
from decent8.quant import fused
from decent8.quant.quantizer import quantize_per_node

#: (label, shape, node dim): activations of ResNet-20 (batch 32, 32 px), its largest weight,
#: the digits CNN's activation at 64 nodes under vmap, an MLP layer's gradient at 256 nodes
CASES = [
    ("resnet20 activation [32,16,32,32]", (32, 16, 32, 32), None),
    ("resnet20 weight [64,64,3,3]", (64, 64, 3, 3), None),
    ("cnn activation, 64 nodes [64,16,8,6,6]", (64, 16, 8, 6, 6), 0),
    ("mlp gradient, 256 nodes [256,128,64]", (256, 128, 64), 0),
]


def _time(fn, mode: str) -> float:
    previous = fused.set_fused(mode)
    try:
        t0 = time.process_time()
        fn()
        return time.process_time() - t0
    finally:
        fused.set_fused(previous)


def steps(cases: list[str], rounds: int) -> None:
    """Whole 8-bit steps, the eager passes (mode off) against the C loop (on), interleaved."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from lowprec_step import SHAPES, build_variant
    print(f"torch {torch.__version__}, process CPU time, one thread, median of {rounds} interleaved steps (ms)")
    print("| case | eager passes | C loop | eager / C loop |")
    print("|---|---:|---:|---:|")
    for case in cases:
        parts = case.split(":")
        model, k = parts[0], int(parts[1])
        px = int(parts[2]) if len(parts) > 2 else SHAPES[model][1]
        eng, x, y = build_variant(model, k, px, "int8", "cpu", "auto", False)
        times: dict[str, list[float]] = {"off": [], "on": []}
        for r in range(rounds + 1):
            for m in times:
                dt = _time(lambda: eng.train_step(x, y, 1e-4), m)
                if r:                     # (the first round warms up)
                    times[m].append(dt)
        med = {m: 1e3 * statistics.median(v) for m, v in times.items()}
        print(f"| {model}, {k} nodes, {px} px | {med['off']:.1f} | {med['on']:.1f} | {med['off'] / med['on']:.2f}× |",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=41)
    ap.add_argument("--compiled", action="store_true", help="also the torch.compile kernel (compiles first)")
    ap.add_argument("--steps", nargs="+", metavar="MODEL:NODES[:PX]", help="time whole 8-bit steps instead")
    ap.add_argument("--rounds", type=int, default=15, help="steps per mode with --steps")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.steps:
        steps(a.steps, a.rounds)
        return
    cases = CASES
    if os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0"):
        a.reps, cases = 3, [(label, tuple(min(s, 4) for s in shape), nd) for label, shape, nd in CASES[2:3]]
    torch.set_num_threads(1)
    modes = ["off", "on"] + (["compiled"] if a.compiled else [])
    names = {"off": "eager passes", "on": "C loop", "compiled": "torch.compile"}
    print(f"torch {torch.__version__}, process CPU time, one thread, median of {a.reps} calls (µs)")
    print("| tensor | rounding | " + " | ".join(names[m] for m in modes) + " | eager / C loop | same bits |")
    print("|---|---|" + "---:|" * len(modes) + "---:|---|")
    for label, shape, node_dim in cases:
        x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
        for stochastic in (False, True):
            keys = streams.node_keys(0, range(shape[0] if node_dim is not None else 1), 1)

            def call(x=x, keys=keys, stochastic=stochastic, node_dim=node_dim) -> torch.Tensor:  # noqa: ANN001
                with streams.node_streams(keys if stochastic else None):
                    return quantize_per_node(x, 8, stochastic, node_dim)

            outs = {}
            for m in modes:  # warm up (builds the C loop, compiles) and record each mode's result
                previous = fused.set_fused(m)
                try:
                    outs[m] = call()
                finally:
                    fused.set_fused(previous)
            same = all(torch.equal(outs["off"].view(torch.int32), o.view(torch.int32)) for o in outs.values())
            times: dict[str, list[float]] = {m: [] for m in modes}
            for _ in range(a.reps):
                for m in modes:
                    times[m].append(_time(call, m))
            med = {m: 1e6 * statistics.median(v) for m, v in times.items()}
            print(f"| {label} | {'stochastic' if stochastic else 'deterministic'} | "
                  + " | ".join(f"{med[m]:.0f}" for m in modes) + f" | {med['off'] / med['on']:.2f}× | "
                  + ("yes" if same else "**no**") + " |", flush=True)


if __name__ == "__main__":
    main()
