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

import copy  # noqa: E402

import torch  # noqa: E402

from decent8.config import load_config  # noqa: E402
from decent8.experiments.regenerate.kernels import cpu_vendor  # noqa: E402
from decent8.models.strategies import strategy_for  # noqa: E402
from decent8.train.build import build  # noqa: E402
from decent8.train.engine import run_steps  # noqa: E402

SMOKE = os.environ.get("DECENT8_BENCH_SMOKE") == "1"
#: the models of tests/train/test_equivalence.py (the user models: tests/equivalence_models.py, by import path)
MODELS = {"cnn": "cnn", "mlp": "mlp", "bn_dropout": "tests.equivalence_models:make_bn",
          "norms_residual": "tests.equivalence_models:make_residual",
          "plain_dropout": "tests.equivalence_models:make_plain_drop"}
CHOCO_TOPK = ["algorithm=choco", "compression=topk", "compression.ratio=0.9"]


def run(model: str, nodes: int, strategy: tuple[str, int], steps: int, stream_seed: int | None = None,
        lr: float = 0.05) -> torch.Tensor:
    """The parameters ``[k, d]`` after ``steps`` 8-bit steps of ``decent8 train``'s run, as the tests run it."""
    c = build(load_config(None, [f"nodes={nodes}", "progress=false", "data.batch_size=8", "optimizer.warmup_epochs=0",
                                 f"model={MODELS[model]}", "precision=int8", *CHOCO_TOPK]))
    sm = copy.copy(c.model)
    sm.init_buffers(nodes)
    if stream_seed is not None:
        sm.seed = stream_seed
    sm.use(strategy_for(*strategy))
    return run_steps(c, sm, steps, lr)


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()


def main() -> None:
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", "the model has BatchNorm running statistics")
    steps = 2 if SMOKE else 20
    models = ["mlp"] if SMOKE else list(MODELS)
    print(f"CPU vendor {cpu_vendor()}, AVX2 kernels pinned: {PINNED}, {steps} steps, one thread\n")
    print("| test | model | strategy vs the loop | the loop with another stream seed | ratio | s |")
    print("|---|---|---:|---:|---:|---:|")
    for model in models:          # test_equivalence: 4 nodes, vmap over all of them
        t = time.perf_counter()
        ref = run(model, 4, ("vmap", 1), steps)
        other = rel(run(model, 4, ("vmap", 1), steps, stream_seed=123), ref)
        got = rel(run(model, 4, ("vmap", 4), steps), ref)
        print(f"| test_equivalence (vmap 4) | {model} | {got:.2e} | {other:.2e} | {got / other:.2f} | "
              f"{time.perf_counter() - t:.0f} |")
    for model in models if SMOKE else ["mlp", "cnn"]:   # test_node_batched_ranges: 8 nodes, node-batched layers
        t = time.perf_counter()
        ref = run(model, 8, ("vmap", 1), steps)
        got = rel(run(model, 8, ("layers", 8), steps), ref)
        print(f"| test_node_batched_ranges (layers:8) | {model} | {got:.2e} | — | — | {time.perf_counter() - t:.0f} |")


if __name__ == "__main__":
    main()
