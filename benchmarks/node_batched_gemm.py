"""The matrix products of the MLP's forward and backward (issue 32): k nodes' batched
products (``bmm`` of ``[k, b, ·]`` by each node's own weight) against one model's products on
the same k·b samples. This is the compute the k-node iteration cannot avoid, and the lower
bound it sets on ``benchmarks/scale.py``'s "× one model" ratio before any gossip, top-k or
optimizer pass. Process CPU time, one thread, median of ``--reps`` per product, the variants
interleaved.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/node_batched_gemm.py --nodes 256 --batch 16
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from int8_matmul import bench  # noqa: E402  (median process CPU seconds of a call)


def cpu_ms(f: Callable[[], object], reps: int) -> float:
    return 1e3 * bench(f, reps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16, help="samples per node")
    ap.add_argument("--layers", default="64x128,128x128,128x10", help="in x out of each linear layer (the MLP's)")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    if os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0"):  # a check that it runs
        args.nodes, args.reps = 4, 2
    torch.set_num_threads(1)
    k, b = args.nodes, args.batch
    print(f"{k} nodes x {b} samples against one model on {k * b} samples; ms per product, process CPU time")
    print("| layer | product | k nodes | 1 model | ratio |\n|---|---|---:|---:|---:|")
    total_k = total_1 = 0.0
    for i, spec in enumerate(args.layers.split(",")):
        fin, fout = (int(v) for v in spec.split("x"))
        x, g = torch.randn(k, b, fin), torch.randn(k, b, fout)
        w = torch.randn(k, fout, fin)       # node_axis.linear's products: out ᵀ = W·xᵀ, ∂W = gᵀ·x, ∂xᵀ = Wᵀ·gᵀ
        xb, gb, wb = x.reshape(k * b, fin), g.reshape(k * b, fout), torch.randn(fout, fin)
        products = [("forward W·xᵀ", lambda: torch.bmm(w, x.transpose(1, 2)), lambda: xb @ wb.T),
                    ("weight gradient gᵀ·x", lambda: torch.bmm(g.transpose(1, 2), x), lambda: gb.T @ xb)]
        if i > 0:   # the first layer's input needs no gradient
            products.append(("input gradient Wᵀ·gᵀ", lambda: torch.bmm(w.transpose(1, 2), g.transpose(1, 2)),
                             lambda: gb @ wb))
        for name, nodes, one in products:
            t_k = t_1 = 0.0
            for _ in range(2):          # interleaved
                t_k += cpu_ms(nodes, args.reps) / 2
                t_1 += cpu_ms(one, args.reps) / 2
            total_k, total_1 = total_k + t_k, total_1 + t_1
            print(f"| {spec} | {name} | {t_k:.2f} | {t_1:.2f} | {t_k / t_1:.2f} |")
    print(f"| all | | {total_k:.2f} | {total_1:.2f} | {total_k / total_1:.2f} |")


if __name__ == "__main__":
    main()
