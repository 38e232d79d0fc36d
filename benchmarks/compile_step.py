"""``sim.compile``: compiled against eager training steps, side by side: time per step and
how far the parameters drift apart (issue 14's parity: ≤ 1e-5 relative after 100 steps).

Each case builds the same run twice (8 nodes, directed ring, Choco-SGD, digits data),
trains one eagerly and one with ``StackedModel.compile()`` on the same batches from
the same global RNG state, and prints the ms per step (without the first, which
compiles; seconds to minutes, less from the machine's inductor cache) and ‖z_compiled − z_eager‖ / ‖z_eager‖ after each checkpoint step.

    python benchmarks/compile_step.py                       # the default cases
    python benchmarks/compile_step.py --cases mlp:fp32 cnn:int8 --steps 5 30 100 --threads 2
"""
from __future__ import annotations

import argparse
import os
import time

import torch

from decent8.models.strategies import strategy_for  # noqa: E402
from decent8.config import load_config
from decent8.models.execution import parse_execution
from decent8.train.build import build
from decent8.train.engine import Engine


def make(model: str, precision: str, chunk: str) -> tuple[Engine, list]:
    cfg = load_config(None, [f"model={model}", f"precision={precision}", "nodes=8", "algorithm=choco",
                             f"sim.chunk={chunk}", "progress=false"])
    c = build(cfg)
    c.model.use(strategy_for(*parse_execution(chunk)))  # (train() does this through sim.chunk)
    idx = c.sampler.epoch_indices(0)
    batches = [(c.dataset.x_train[idx[:, s]], c.dataset.y_train[idx[:, s]]) for s in range(idx.shape[1])]
    return Engine(c.model, c.algorithm, c.optimizer, c.comm, c.x0), batches


def run(engine: Engine, batches: list, marks: list[int], lr: float) -> tuple[dict[int, torch.Tensor], float, float]:
    """Parameters at each mark, the seconds of the first step (compiling, if compiled)
    and the mean seconds per step after it."""
    torch.manual_seed(1)
    out, t0 = {}, time.perf_counter()
    first = 0.0
    for s in range(max(marks)):
        engine.train_step(*batches[s % len(batches)], lr)
        if s == 0:
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
        if s + 1 in marks:
            out[s + 1] = engine.z.clone()
    return out, first, (time.perf_counter() - t0) / max(1, max(marks) - 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["mlp:fp32", "cnn:fp32", "mlp:int8", "cnn:int8"],
                    help="model:precision")
    ap.add_argument("--steps", type=int, nargs="+", default=[5, 30, 100])
    ap.add_argument("--chunk", default="1", help="sim.chunk: 1 (the loop), N (vmap) or layers:N")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.05)
    a = ap.parse_args()
    smoke = os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0")
    if smoke:  # tiny: eager only (compiling takes minutes), a check that it runs
        a.cases, a.steps = ["mlp:fp32"], [2]
    torch.set_num_threads(a.threads)
    print(f"8 nodes, Choco-SGD, sim.chunk={a.chunk}, {a.threads} thread(s), torch {torch.__version__}")
    print("| case | eager ms/step | compiled ms/step | first compiled step s | " + " | ".join(f"rel. diff @{s}" for s in a.steps) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(a.steps))
    for case in a.cases:
        model, precision = case.split(":")
        eager, batches = make(model, precision, a.chunk)
        ref, _, t_eager = run(eager, batches, a.steps, a.lr)
        compiled, _ = make(model, precision, a.chunk)
        if not smoke:
            compiled.model.compile()
        got, compile_s, t_comp = run(compiled, batches, a.steps, a.lr)
        diffs = " | ".join(f"{((got[s] - ref[s]).norm() / ref[s].norm()).item():.1e}" for s in a.steps)
        print(f"| {case} | {1e3 * t_eager:.1f} | {1e3 * t_comp:.1f} | {compile_s:.0f} | {diffs} |", flush=True)


if __name__ == "__main__":
    main()
