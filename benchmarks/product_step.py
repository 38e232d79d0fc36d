"""Seconds per training step of the run `decent8 train` builds, against one model.

Each case runs in its own process, which builds the run exactly as ``decent8 train``
does (``build(load_config(...))`` → the communicator, recorder, algorithm, model and
execution of the product, ``resolve_execution`` included) and then times the loop body
of ``Session.train_epoch``: augment, ``Engine.train_step``, the simulated clock's
``after_step``. "one model": the same network on the step's n × b samples in one
forward + backward + SGD step. Process CPU time, medians over the timed steps.

``--before SRC`` times a second source tree (e.g. a ``git worktree`` of an older
revision's ``src``) with the same cases, interleaved with this one (A B A B …), at the
execution (``sim.chunk``) the current code chose, so the two differ only in code.

    OMP_NUM_THREADS=1 python benchmarks/product_step.py                          # the default cases
    OMP_NUM_THREADS=1 python benchmarks/product_step.py --before /tmp/old/src --reps 3
    DECENT8_BENCH_SMOKE=1 python benchmarks/product_step.py                      # tiny cases (CI smoke)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: name → (decent8 train options, timed steps). Choco-SGD with 99 % top-k is the default algorithm.
CASES: dict[str, tuple[list[str], int]] = {
    "mlp-256": (["model=mlp", "nodes=256"], 5),
    "cnn-1024": (["model=cnn", "nodes=1024"], 3),
    "resnet20-8": (["model=resnet20", "nodes=8", "data.name=tensors", "data.batch_size=32", "topology=ring"], 5),
    "resnet20-8-int8": (["model=resnet20", "nodes=8", "data.name=tensors", "data.batch_size=32", "topology=ring",
                         "precision=int8"], 3),
    "cnn-64": (["model=cnn", "nodes=64"], 5),
    "cnn-64-int8": (["model=cnn", "nodes=64", "precision=int8"], 5),
}
#: cases run when --cases is not given (the 8-bit ones on request)
DEFAULT = ["mlp-256", "cnn-1024", "resnet20-8"]
SMOKE: dict[str, tuple[list[str], int]] = {
    "mlp-16": (["model=mlp", "nodes=16", "model.width=16"], 2),
}
WARMUP = 2


def cifar_like_tensors(folder: Path, n: int = 512) -> Path:
    """A CIFAR-10-shaped .npz (``data.name=tensors``): step times do not depend on the pixels."""
    import numpy as np
    path = folder / "cifar_like.npz"
    if not path.exists():
        rng = np.random.default_rng(0)
        np.savez(path, x=rng.standard_normal((n, 3, 32, 32)).astype(np.float32),
                 y=rng.integers(0, 10, n).astype(np.int64))
    return path


def measure(options: list[str], steps: int) -> dict:
    """One case in this process (the decent8 on ``sys.path``): the run's step and one model's."""
    import copy

    import torch

    from decent8.config import load_config
    from decent8.data.augment import make_batch_transform
    from decent8.models.stacked import take
    from decent8.train.build import build
    from decent8.train.engine import Engine
    from decent8.train.loop import resolve_execution, to_device

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    c = build(load_config(None, ["epochs=1", "progress=false", "device=cpu", *options]))
    augment = make_batch_transform(c.dataset, c.cfg.data.augment, c.cfg.seed, c.comm.local_nodes, c.device)
    execution = resolve_execution(c, augment)
    engine = Engine(c.model, c.algorithm, c.optimizer, c.comm, c.x0)
    idx = c.sampler.epoch_indices(0)
    x_train, y_train = to_device(c.dataset.x_train, c.device), c.dataset.y_train.to(c.device)
    times = []
    for s in range(WARMUP + steps):
        batch = idx[:, s % idx.shape[1]]
        t0 = time.process_time()
        xb = augment(take(x_train, batch), s)
        t_step, comm_before, step_index = time.perf_counter(), c.comm.comm_time_s, engine.step_count
        engine.train_step(xb, y_train[batch], 0.05)
        c.timer.after_step(step_index, time.perf_counter() - t_step, c.comm.comm_time_s - comm_before)
        if s >= WARMUP:
            times.append(time.process_time() - t0)
    # one model on the step's n × b samples: forward, backward, an SGD step
    net = copy.deepcopy(c.model.module).to(c.device).train()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    batch = idx[:, 0].reshape(-1)
    xb, yb = augment(take(x_train, idx[:, 0]), 0), y_train[batch]
    xb = xb.reshape(-1, *xb.shape[2:]) if not isinstance(xb, dict) and xb.dim() > yb.dim() + 1 else xb
    one = []
    for s in range(WARMUP + steps):
        t0 = time.process_time()
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(net(xb), yb.reshape(-1)).backward()
        opt.step()
        if s >= WARMUP:
            one.append(time.process_time() - t0)
    paths = dict(getattr(c.comm, "paths", {}) or {})
    return {"step_s": statistics.median(times), "one_model_s": statistics.median(one), "chunk": execution.spec,
            "nodes": c.cfg.nodes, "params": c.model.dim, "paths": paths}


def run_case(src: Path, options: list[str], steps: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps([options, steps])], env=env, cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"case {options} failed in {src}:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*", default=None, help=f"names of {sorted(CASES)}")
    ap.add_argument("--before", type=Path, default=None, help="another source tree to time, interleaved")
    ap.add_argument("--reps", type=int, default=1, help="repetitions (A B A B …) per case")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        options, steps = json.loads(args.child)
        print(json.dumps(measure(options, steps)))
        return
    smoke = os.environ.get("DECENT8_BENCH_SMOKE") == "1"   # tiny cases, a few seconds (CI)
    table = SMOKE if smoke else CASES
    names = args.cases or (list(table) if smoke else DEFAULT)
    tmp = Path(tempfile.mkdtemp(prefix="decent8-product-step-"))
    data = [f"data.path={cifar_like_tensors(tmp, 64 if smoke else 512)}"]
    trees = [("after", ROOT / "src")] + ([("before", args.before.resolve())] if args.before else [])
    print("| case | chunk | tree | s / step | one model (s) | ratio | gossip path |")
    print("|---|---|---|---:|---:|---:|---|")
    for name in names:
        options, steps = table[name]
        options = options + (data if "data.name=tensors" in options else [])
        first = run_case(ROOT / "src", options, steps)           # the execution the current code chooses
        fixed = options + [f"sim.chunk={first['chunk']}"]
        results: dict[str, list[dict]] = {tree: [] for tree, _ in trees}
        if args.before is None:                                  # nothing to interleave: that run is the row
            results["after"].append(first)
        for _ in range(args.reps if args.before is not None else args.reps - 1):
            for tree, src in trees:
                results[tree].append(run_case(src, fixed, steps))
        for tree, _ in trees:
            rows = results[tree]
            step = statistics.median(r["step_s"] for r in rows)
            one = statistics.median(r["one_model_s"] for r in rows)
            path = ", ".join(f"{k} {v}" for k, v in sorted(rows[-1]["paths"].items())) or "(not recorded)"
            print(f"| {name} | {first['chunk']} | {tree} | {step:.4f} | {one:.4f} | {step / one:.2f} | {path} |",
                  flush=True)


if __name__ == "__main__":
    main()
