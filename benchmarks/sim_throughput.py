"""Simulator throughput: one n-node training step vs one model on the same total batch.

For each model and node count n, times (median of repeated steps, after warm-up)
  * single  — one ordinary nn.Module trained with torch.optim.SGD (Nesterov) on a batch of n·b,
  * sim     — the decent8 simulator's full iteration for n nodes with b samples each
              (stacked forward/backward, local momentum, gossip), for D-PSGD and for
              Choco-SGD with 99 % top-k,
and prints the ratio sim / single (target ≤ 1.3× on CPU for the default model).

    python benchmarks/sim_throughput.py [--device cuda] [--nodes 4 8 16] [--models cnn mlp]

The n-node run is built as ``decent8 train`` builds it (``build(load_config(None, [...]))``,
digits-shaped models, ``sim.chunk=auto`` chosen as the training loop chooses it).
``DECENT8_BENCH_SMOKE=1``: mlp, 4 nodes, 2 steps (a check that it runs).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F

from decent8.config import load_config
from decent8.models import make_model
from decent8.models.execution import choose_chunk
from decent8.train.build import build
from decent8.train.engine import Engine

SMOKE = os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0")


def timed(fn, steps: int, device: torch.device) -> float:
    times = []
    warm = 1 if SMOKE else 5
    for i in range(steps + warm):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i >= warm:
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench(model_name: str, n: int, b: int, device: torch.device, steps: int, shape: tuple[int, ...]) -> dict:
    x = torch.randn(n, b, *shape, device=device)
    y = torch.randint(0, 10, (n, b), device=device)
    single = make_model(model_name, shape, 10).to(device)
    opt = torch.optim.SGD(single.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=1e-4)
    xs, ys = x.reshape(n * b, *shape), y.reshape(-1)

    def single_step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(single(xs), ys).backward()
        opt.step()

    row = {"model": model_name, "nodes": n, "batch/node": b, "single ms": 1e3 * timed(single_step, steps, device)}
    for label, algo, comp_name in (("D-PSGD", "dpsgd", "identity"), ("Choco top-1%", "choco", "topk")):
        c = build(load_config(None, [f"nodes={n}", f"model={model_name}", f"algorithm={algo}",
                                     f"compression={comp_name}", "compression.ratio=0.99", "topology=directed_ring",
                                     f"algorithm.gamma={1.0 if algo == 'dpsgd' else 0.05}", "optimizer.kind=local",
                                     "optimizer.momentum=0.9", "optimizer.nesterov=true", "optimizer.weight_decay=1e-4",
                                     f"data.batch_size={b}", f"device={device}", "seed=0"]))
        model = c.model
        engine = Engine(model, c.algorithm, c.optimizer, c.comm, c.x0)
        choose_chunk(model, engine.params(), x, y, c.cfg.sim.chunk, use_cache=False)  # as the training loop does
        t = timed(lambda: engine.train_step(x, y, 0.01), steps, device)
        row[f"{label} ms"] = 1e3 * t
        row[f"{label} ratio"] = t / (row["single ms"] / 1e3)
    row["params"] = model.dim
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--nodes", type=int, nargs="+", default=[4, 8, 16])
    p.add_argument("--models", nargs="+", default=["cnn", "mlp"])
    p.add_argument("--batch", type=int, default=32, help="per node")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: leave as is)")
    a = p.parse_args()
    if SMOKE:
        a.device, a.nodes, a.models, a.steps = "cpu", [4], ["mlp"], 2
    if a.threads:
        torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    rows = [bench(m, n, a.batch, device, a.steps, (1, 8, 8)) for m in a.models for n in a.nodes]
    cols = ["model", "params", "nodes", "batch/node", "single ms", "D-PSGD ms", "D-PSGD ratio", "Choco top-1% ms",
            "Choco top-1% ratio"]
    print(f"device: {device}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
