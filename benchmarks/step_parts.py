"""Where one n-node iteration's time goes (issue 32): the whole ``train_step`` and its parts
timed alone — forward + backward of all nodes, the optimizer direction, the gossip step
and its top-k encode — next to one model's forward + backward on the same total batch and
one ``[n, d]`` float32 copy. Engine and batch of ``benchmarks/stacking.py`` (Choco-SGD,
99 % top-k, directed ring, local Nesterov momentum). Process CPU time, medians of 5.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/step_parts.py mlp 256 layers:128

The run is built as ``decent8 train`` builds it (``stacking.make_engine``: ``build(load_config(...))``),
its ``sim.chunk`` set by the third argument. ``DECENT8_BENCH_SMOKE=1``: mlp, 4 nodes (a check that it runs).
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stacking  # noqa: E402
from decent8.models.execution import choose_chunk  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    args = ["mlp", "4", "layers:4"] if os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0") else sys.argv[1:]
    model, k = args[0], int(args[1])
    chunk = args[2] if len(args) > 2 else "auto"
    dev = torch.device("cpu")
    x, y = stacking.batch(model, k, dev)
    sm, eng = stacking.make_engine("decent8", model, k, "fp32", dev)
    print("chunk", choose_chunk(sm, eng.params(), x, y, chunk, use_cache=False).spec, "state", tuple(eng.z.shape))
    for _ in range(2):
        eng.train_step(x, y, 1e-4)
    z, algo, opt = eng.z, eng.algorithm, eng.optimizer
    _, g = sm.loss_and_grad(z, x, y)

    def t(fn, n=5):
        fn()
        ts = []
        for _ in range(n):
            t0 = time.process_time()
            fn()
            ts.append(time.process_time() - t0)
        return statistics.median(ts) * 1e3

    a, b = torch.ones_like(z), torch.empty_like(z)
    ref_sm, _ = stacking.make_engine("decent8", model, 1, "fp32", dev)
    p1 = ref_sm.flat_parameters().unsqueeze(0)
    xr, yr = x.reshape(1, -1, *x.shape[2:]), y.reshape(1, -1)
    rows = {"copy [k,d] f32": t(lambda: b.copy_(a)),
            "train_step": t(lambda: eng.train_step(x, y, 1e-4)),
            "loss_and_grad": t(lambda: sm.loss_and_grad(z, x, y)),
            "optimizer.direction": t(lambda: opt.direction(g, z)),
            "algo.step": t(lambda: algo.step(z, 0)),
            "encode": t(lambda: algo._encode(z - algo.x_hat)),
            "ref one model": t(lambda: ref_sm.loss_and_grad(p1, xr, yr))}
    print("| part | ms |\n|---|---:|")
    for name, ms in rows.items():
        print(f"| {name} | {ms:.2f} |")


if __name__ == "__main__":
    main()
