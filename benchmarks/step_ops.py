"""Operators per training step, by precision and execution: what a GPU pays for in launches.

On a GPU a small model's step is bound by kernel launches, not arithmetic, so its time
follows the number of operators the step calls. This counts them on the CPU (a proxy:
the step's code dispatches the same operators on CUDA, though some split into other
kernels there) with ``torch.profiler``: one Choco-SGD step (99 %
top-k, directed ring, local Nesterov momentum; the engine of ``benchmarks/stacking.py``)
of ResNet-20 for k nodes, FP32 and 8-bit, one node per call (``sim.chunk=1``) and all k in
one vmap call (``sim.chunk=k``). Prints the count and the most frequent operators.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/step_ops.py [--nodes 8] [--model resnet20] [--fused on]

``--fused compiled`` counts with the ``torch.compile`` quantizer kernel
(:mod:`decent8.quant.fused`) on the CPU, as ``auto`` runs it on a GPU: one generated kernel
per quantized tensor (its call is one operator here, the compiled region); ``--fused on``
with the CPU's C loop (not an aten operator: its calls are not counted).
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stacking  # noqa: E402
from decent8.models.strategies import strategy_for  # noqa: E402


def count_ops(model: str, k: int, precision: str, chunk: int) -> collections.Counter:
    """Top-level aten operators of one engine step (after two warm-up steps)."""
    dev = torch.device("cpu")
    x, y = stacking.batch(model, k, dev)
    sm, eng = stacking.make_engine("decent8", model, k, precision, dev)
    sm.use(strategy_for("vmap", chunk))
    for _ in range(2):
        eng.train_step(x, y, 1e-4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        eng.train_step(x, y, 1e-4)
    return collections.Counter({e.key: e.count for e in prof.key_averages() if e.key.startswith("aten::")})


def leaf_count(ops: collections.Counter) -> int:
    """Operators that launch work (views, shape queries and empty allocations excluded)."""
    skip = ("aten::view", "aten::reshape", "aten::as_strided", "aten::empty", "aten::empty_like", "aten::expand",
            "aten::unsqueeze", "aten::squeeze", "aten::select", "aten::slice", "aten::t", "aten::transpose",
            "aten::permute", "aten::detach", "aten::alias", "aten::_unsafe_view", "aten::lift_fresh",
            "aten::resolve_conj", "aten::resolve_neg", "aten::empty_strided", "aten::result_type", "aten::movedim")
    return sum(n for op, n in ops.items() if op not in skip)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet20", choices=list(stacking.MODELS))
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--top", type=int, default=8)
    p.add_argument("--fused", default="auto", choices=["auto", "on", "compiled", "off"], help="the fused 8-bit quantizer's mode")
    a = p.parse_args()
    from decent8.quant import fused
    fused.set_fused(a.fused)
    if os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0"):  # tiny: a check that it runs
        a.model, a.nodes = "mlp", 2
    torch.set_num_threads(1)
    rows = []
    for precision in ("fp32", "int8"):
        for chunk in (1, a.nodes):
            ops = count_ops(a.model, a.nodes, precision, chunk)
            rows.append((precision, chunk, sum(ops.values()), leaf_count(ops), ops))
    print(f"{a.model}, {a.nodes} nodes: aten operators per Choco step (all / launching work), fused quantizer {a.fused}")
    print("| precision | sim.chunk | all | launching |")
    print("|--- | ---: | ---: | ---:|")
    for precision, chunk, total, leaves, _ in rows:
        print(f"| {precision} | {chunk} | {total} | {leaves} |")
    for chunk in (1, a.nodes):
        fp, q = (next(r for r in rows if r[0] == prec and r[1] == chunk) for prec in ("fp32", "int8"))
        print(f"int8/fp32 at sim.chunk={chunk}: {q[2] / fp[2]:.2f}x all, {q[3] / fp[3]:.2f}x launching")
    for precision, chunk, _, _, ops in rows:
        common = ", ".join(f"{op[6:]} {n}" for op, n in ops.most_common(a.top))
        print(f"{precision}, chunk {chunk}: {common}")


if __name__ == "__main__":
    main()
