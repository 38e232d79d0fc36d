"""Cost of Choco-SGD's float64 consensus residual (issue 12) against the float32 running sum.

Times one gossip step (compress, exchange, update) of the simulator for ``k`` nodes
with ``d`` parameters each, median of repeated steps after warm-up, for
  * new — ``ChocoSGD``: x̂ float32, u = s − x̂ exact (float64 until issue 31, a float32
    (hi, lo) pair since issue 32), float64 mixing increment,
  * old — the pre-issue-12 form: x̂ and s = Σ_j W_ij x̂_j both float32 running sums,
and prints the ratio and the buffer bytes per node.

    python benchmarks/choco_accumulate.py [--d 270000] [--nodes 8] [--device cpu]

(CPU: process CPU time; run with OMP_NUM_THREADS=1.) Both built through
``Algorithm.from_context`` on the simulator (``decent8.experiments.problems.make``); "old" is
``RunningSumChoco`` of that module. ``DECENT8_BENCH_SMOKE=1``: d = 2,000, 3 steps (a check that it runs).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from decent8.algorithms import ChocoSGD
from decent8.compression import make_compressor
from decent8.experiments.problems import RunningSumChoco, make
from decent8.layout import ParamLayout
from decent8.topology import make_topology

SMOKE = os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0")


def time_step(cls, comp, topo, k, d, device, steps):
    # process CPU time on CPU (the machine is shared: wall time moved 2× between runs)
    clock = time.process_time if device.type == "cpu" else time.perf_counter
    algo = make(cls, topo, comp, 0.05, False, device=device)
    z = torch.randn(k, d, device=device, generator=torch.Generator(device).manual_seed(0))
    algo.init_state(z)
    times = []
    for t in range(steps + 3):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = clock()
        algo.step(z, t)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if t >= 3:
            times.append(clock() - t0)
    nbytes = sum(b.element_size() * b[0].numel() for b in algo.buffers().values())
    return statistics.median(times), nbytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=270_000)
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    if SMOKE:
        a.d, a.steps, a.device = 2000, 3, "cpu"
    device = torch.device(a.device)
    topo = make_topology("ring", a.nodes)
    layout = ParamLayout.single(a.d)
    print("| compression | k | d | old (ms) | new (ms) | new / old | buffers/node old → new (MB) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name in ("identity", "topk"):
        comp = make_compressor(name, layout, ratio=0.99)
        old, ob = time_step(RunningSumChoco, comp, topo, a.nodes, a.d, device, a.steps)
        new, nb = time_step(ChocoSGD, comp, topo, a.nodes, a.d, device, a.steps)
        print(f"| {name} | {a.nodes} | {a.d} | {old * 1e3:.2f} | {new * 1e3:.2f} | {new / old:.2f} | "
              f"{ob / 1e6:.2f} → {nb / 1e6:.2f} |", flush=True)


if __name__ == "__main__":
    main()
