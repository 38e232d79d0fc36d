"""Which way of taking k nodes' gradients under vmap is fastest? (docs/results/execution_speed.md, "Where the time goes")

Times :meth:`StackedModel.loss_and_grad` (the path training uses: ``vmap`` of the
forward, one autograd backward per chunk, one leaf per parameter tensor) against two
alternatives over the same chunk of k nodes, interleaved in rounds (median of process
CPU time with one thread, else wall time), and checks that their gradients agree:

* ``vmap_grad`` — ``vmap(grad_and_value(loss))`` over the per-tensor parameter rows:
  the backward inside vmap too;
* ``vmap_grad_flat`` — the same over each node's flat ``[d]`` row (unflattened inside);
* ``one_leaf``  — one leaf ``[k, d]`` whose row views are the parameters (no per-tensor
  gradient copies, but autograd accumulates every view's gradient into it);
* ``compiled``  — (``--compile``) ``torch.compile`` of ``vmap_grad_flat``; its first call
  (the compile time) is reported separately.

    python benchmarks/grad_paths.py --cases cnn:8 cnn:64 mlp:256 [--compile]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.func import grad_and_value, vmap

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stacking  # noqa: E402
from decent8.models.strategies import strategy_for  # noqa: E402

SMOKE = os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=["cnn:8", "cnn:64", "mlp:256"])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args()
    if SMOKE:
        args.cases, args.rounds, args.compile = ["mlp:4"], 1, False
    clock = time.process_time if torch.get_num_threads() == 1 else time.perf_counter
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, ms per loss_and_grad of all k nodes "
          f"(one chunk of k), median of {args.rounds} rounds; the run built by build(load_config(...))")
    print("| case | variant | ms | max abs grad diff |\n|---|---|---:|---:|")
    for case in args.cases:
        model, k = case.split(":")[0], int(case.split(":")[1])
        x, y = stacking.batch(model, k, torch.device("cpu"))
        sm, eng = stacking.make_engine("decent8", model, k, "fp32", torch.device("cpu"))
        p = eng.params().clone()
        assert sm.buffers is None, "this comparison is for models without buffers"

        def loss_fn(named, xb, yb):  # one node's loss (StackedModel.forward_one + the task's loss)
            return sm.task.loss(sm.forward_one(named, xb), yb)

        def f(flat_row, xb, yb):
            return loss_fn(sm.layout.unflatten(flat_row), xb, yb)

        vg = vmap(grad_and_value(f), randomness="different")
        vg_named = vmap(grad_and_value(loss_fn), randomness="different")

        def vmap_grad_flat():
            g, loss = vg(p, x, y)
            return loss, g

        def vmap_grad():
            g, loss = vg_named(sm.layout.unflatten(p), x, y)
            return loss, torch.cat([g[slot.name].reshape(k, -1) for slot in sm.layout], 1)

        def one_leaf():
            leaf = p.detach().requires_grad_(True)
            with torch.enable_grad():
                loss = vmap(loss_fn, randomness="different")(sm.layout.unflatten(leaf), x, y)
                g, = torch.autograd.grad(loss.sum(), [leaf])
            return loss.detach(), g

        variants = {"autograd (used)": lambda: sm.loss_and_grad(p, x, y, strategy=strategy_for("vmap", k)), "vmap_grad": vmap_grad,
                    "vmap_grad_flat": vmap_grad_flat, "one_leaf": one_leaf}
        compile_s = None
        if args.compile:
            cg = torch.compile(vg)
            t0 = time.perf_counter()
            cg(p, x, y)
            compile_s = time.perf_counter() - t0
            variants["compiled"] = lambda: cg(p, x, y)[::-1]
        _, ref = variants["autograd (used)"]()
        diff = {n: (fn()[1] - ref).abs().max().item() for n, fn in variants.items()}
        times: dict[str, list[float]] = {n: [] for n in variants}
        for _ in range(args.rounds):
            for n, fn in variants.items():
                fn()
                t0 = clock()
                fn()
                fn()
                times[n].append((clock() - t0) / 2)
        for n, v in times.items():
            extra = f" (compile {compile_s:.0f} s)" if n == "compiled" else ""
            print(f"| {case} | {n}{extra} | {1e3 * statistics.median(v):.1f} | {diff[n]:.1e} |", flush=True)


if __name__ == "__main__":
    main()
