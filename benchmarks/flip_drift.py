"""How far 8-bit runs of two execution strategies drift apart over 20 steps, on this CPU.

At 8 bits the strategies draw the same numbers, but their kernels sum in different float
orders; now and then that flips a rounding decision, and the following steps carry the jump
on. The size of that drift depends on the CPU's kernels even with the AVX2 family pinned
(docs/execution.md "Machine-dependent digits"), so the tests compare it with the problem's
own scale: the loop run with other draws (another stream seed). This prints both for the
models of tests/train/test_equivalence.py (vmap over all 4 nodes against the loop) and
tests/quant/test_node_batched_ranges.py (node-batched layers over 8 nodes against the loop),
built through the product path as those tests build them.

    OMP_NUM_THREADS=1 python benchmarks/flip_drift.py            # DECENT8_BENCH_SMOKE=1: mlp, 2 steps
"""
from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from decent8.experiments.regenerate import use_reference_kernels  # noqa: E402  (before any kernel runs)

PINNED = use_reference_kernels()

import torch  # noqa: E402

from decent8.experiments.regenerate.kernels import cpu_vendor  # noqa: E402
from decent8.models.strategies import strategy_for  # noqa: E402

SMOKE = os.environ.get("DECENT8_BENCH_SMOKE") == "1"


def main() -> None:
    import tests.quant.test_node_batched_ranges as Q
    import tests.train.test_equivalence as E
    from tests.helpers import rel

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", "the model has BatchNorm running statistics")
    steps = 2 if SMOKE else 20
    models = ["mlp"] if SMOKE else list(E.MODELS)
    print(f"CPU vendor {cpu_vendor()}, AVX2 kernels pinned: {PINNED}, {steps} steps, one thread\n")
    print("| test | model | strategy vs the loop | the loop with another stream seed | ratio | s |")
    print("|---|---|---:|---:|---:|---:|")
    for model in models:
        t = time.perf_counter()
        ov = E.MODELS[model] + ["precision=int8"] + E.ALGORITHMS["choco_topk"]
        ref = E._run(ov, strategy_for("vmap", 1), steps=steps)
        other = rel(E._run(ov, strategy_for("vmap", 1), steps=steps, stream_seed=123), ref)
        got = rel(E._run(ov, strategy_for("vmap", E.NODES), steps=steps), ref)
        print(f"| test_equivalence (vmap {E.NODES}) | {model} | {got:.2e} | {other:.2e} | {got / other:.2f} | "
              f"{time.perf_counter() - t:.0f} |")
    for model in models if SMOKE else ["mlp", "cnn"]:
        t = time.perf_counter()
        ref = Q._run(model, ("vmap", 1), steps)
        got = rel(Q._run(model, ("layers", Q.NODES), steps), ref)
        print(f"| test_node_batched_ranges (layers:{Q.NODES}) | {model} | {got:.2e} | — | — | "
              f"{time.perf_counter() - t:.0f} |")


if __name__ == "__main__":
    main()
