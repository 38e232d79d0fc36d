"""8-bit against FP32 training steps of the run ``decent8 train`` builds, eager and compiled.

Each variant is ``build(load_config(None, [...]))`` (the product path; random images of
the case's shape as the data set) trained by its ``Engine``: one whole iteration
(forward, backward, local Nesterov momentum, Choco-SGD 99 % top-k on a directed ring).
Variants, their steps interleaved round by round (a drifting machine load hits them alike):

* ``fp32`` / ``int8`` — eager, the ``sim.chunk`` that ``auto`` picks on this machine
  (its cached choice; ``--chunk`` to fix one); ``int8`` runs the fused quantizer as
  ``auto`` does (one generated kernel per quantized tensor on CUDA, the C loop on a CPU at
  one thread);
* ``int8 unfused`` (``--fused``, or on CUDA) — the eager passes everywhere; on a CPU with
  ``--fused``, ``int8 compiled q.`` runs the ``torch.compile`` quantizer kernel there too;
* ``fp32 comp.`` / ``int8 comp.`` — ``sim.compile=true``: each node's loss compiled, the
  loop (``sim.chunk=auto`` compiled is the loop); the first call (the compilation) is
  timed apart, wall clock.

``--bounds`` adds three lower bounds of the 8-bit step, the same engine with parts of the
quantizer made free: ``int8 free draws`` (every dither draw of the node streams returns
zeros: no generator runs), ``int8 free Q_b`` (the C loop returns a copy of its input: no
rounding arithmetic), ``int8 free both``. Their results are wrong on purpose; what they
time is how far the 8-bit step could fall if the draws and the rounding cost nothing.

Times: process CPU time with one thread on a CPU (``--wall`` for the wall clock), the
wall clock with ``torch.cuda.synchronize`` on CUDA; the median over ``--rounds``. Then
the operators per eager step (``torch.profiler``, aten operators that launch work, as
``benchmarks/step_ops.py`` counts them).

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/lowprec_step.py --cases resnet20:8:16 cnn:64
    PYTHONPATH=src python benchmarks/lowprec_step.py --device cuda --cases resnet20:8:16 --rounds 10
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import step_ops  # noqa: E402  (leaf_count)
from stacking import RUN_OPTIONS  # noqa: E402

#: model → (channels, pixels) of the digits data / CIFAR-10, and the batch per node
SHAPES = {"resnet20": (3, 32, 16), "cnn": (1, 8, 16), "mlp": (1, 8, 16)}


def build_variant(model: str, k: int, px: int, precision: str, device: str, chunk: str, compiled: bool):
    """(engine, x, y) of one variant, built through ``build(load_config(...))``."""
    from decent8.config import load_config
    from decent8.data.dataset import ArrayDataset
    from decent8.models.execution import choose_chunk
    from decent8.models.strategies import strategy_for
    from decent8.train.build import build
    from decent8.train.engine import Engine

    ch, _, b = SHAPES[model]
    g = torch.Generator().manual_seed(0)
    n = k * b
    xs, ys = torch.randn(n, ch, px, px, generator=g), torch.arange(n) % 10
    data = ArrayDataset(xs, ys, xs[:10], ys[:10], 10, [str(c) for c in range(10)], "random")
    cfg = load_config(None, [f"nodes={k}", f"model={model}", f"precision={precision}", f"device={device}",
                             f"data.batch_size={b}", *RUN_OPTIONS])
    c = build(cfg, dataset=data)
    x = torch.randn(k, b, ch, px, px, generator=g).to(device)
    y = torch.randint(0, 10, (k, b), generator=g).to(device)
    params = c.model.flat_parameters().unsqueeze(0).repeat(k, 1)
    if compiled:
        c.model.use(strategy_for("vmap", 1))
        c.model.compile()
    else:
        choice = choose_chunk(c.model, params, x, y, chunk)
        print(f"  {precision} eager: sim.chunk={choice.spec}" + (" (cached)" if choice.cached else ""), flush=True)
    return Engine(c.model, c.algorithm, c.optimizer, c.comm, c.x0), x, y


def _free(parts: tuple[str, ...]):  # type: ignore[no-untyped-def]
    """Patch the node streams' dither draws and/or the C loop to cost nothing (``--bounds``);
    returns the undo."""
    from decent8 import streams
    from decent8.quant import cpu_kernel

    real = (streams.draw, streams.draw_dither_rows, cpu_kernel.fake_quantize)

    def draw(like, kind=streams.UNIFORM, node_dim=-1):  # type: ignore[no-untyped-def]
        return torch.zeros_like(like) if kind == streams.DITHER else real[0](like, kind, node_dim)

    def rows(x, node_dim):  # type: ignore[no-untyped-def]
        c = x.shape[node_dim % x.dim()]
        return torch.zeros(c, x.numel() // c, dtype=torch.int16, device=x.device)

    if "draws" in parts:
        streams.draw, streams.draw_dither_rows = draw, rows
    if "q" in parts:
        cpu_kernel.fake_quantize = lambda x3, *a, **k: x3.clone()

    def undo() -> None:
        streams.draw, streams.draw_dither_rows, cpu_kernel.fake_quantize = real
    return undo


def clock_for(device: torch.device, wall: bool):
    if device.type == "cuda" or wall:
        def clock() -> float:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            return time.perf_counter()
        return clock
    return time.process_time


def op_count(engine, x, y, fused_mode: str) -> int:
    from torch.profiler import ProfilerActivity, profile

    from decent8.quant import fused
    previous = fused.set_fused(fused_mode)
    try:
        engine.train_step(x, y, 1e-4)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            engine.train_step(x, y, 1e-4)
    finally:
        fused.set_fused(previous)
    ops = collections.Counter({e.key: e.count for e in prof.key_averages() if e.key.startswith("aten::")})
    return step_ops.leaf_count(ops)


def run_case(case: str, a: argparse.Namespace) -> None:
    from decent8.quant import fused

    parts = case.split(":")
    model, k = parts[0], int(parts[1])
    px = int(parts[2]) if len(parts) > 2 else SHAPES[model][1]
    dev = torch.device(a.device)
    variants: dict[str, tuple[str, bool, str]] = {"fp32": ("fp32", False, "auto"), "int8": ("int8", False, "auto")}
    if a.fused or dev.type == "cuda":
        variants["int8 unfused"] = ("int8", False, "off")
        if dev.type != "cuda":
            variants["int8 compiled q."] = ("int8", False, "compiled")
    free: dict[str, tuple[str, ...]] = {}
    if a.bounds:
        free = {"int8 free draws": ("draws",), "int8 free Q_b": ("q",), "int8 free both": ("draws", "q")}
        for name in free:
            variants[name] = ("int8", False, "auto")
    if not a.no_compile:
        variants["fp32 comp."] = ("fp32", True, "auto")
        variants["int8 comp."] = ("int8", True, "auto")
    print(f"== {model}, {k} nodes, {px} px, batch {SHAPES[model][2]} per node, device {dev}, "
          f"{torch.get_num_threads()} thread(s) ==", flush=True)
    built = {}
    for name, (prec, comp, mode) in variants.items():
        if name in ("int8 compiled q.", "int8 unfused") or name in free:
            built[name] = built["int8"] if "int8" in built else None
        if built.get(name) is None:
            built[name] = build_variant(model, k, px, prec, a.device, a.chunk, comp)
        if comp:  # the compilation: the first call
            eng, x, y = built[name]
            t0 = time.perf_counter()
            eng.train_step(x, y, 1e-4)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            print(f"  ({name}: first step, compiling, {time.perf_counter() - t0:.0f} s wall)", flush=True)
    clock = clock_for(dev, a.wall)
    times: dict[str, list[float]] = {n: [] for n in variants}
    for r in range(a.warmup + a.rounds):
        for name, (prec, comp, mode) in variants.items():
            eng, x, y = built[name]
            previous = fused.set_fused(mode)
            undo = _free(free[name]) if name in free else None
            try:
                t0 = clock()
                eng.train_step(x, y, 1e-4)
                dt = clock() - t0
            finally:
                fused.set_fused(previous)
                if undo is not None:
                    undo()
            if r >= a.warmup:
                times[name].append(dt)
    med = {n: statistics.median(v) for n, v in times.items()}
    print("| variant | ms per step | / fp32 eager |" + (" / fp32 comp. |" if "fp32 comp." in med else ""))
    print("|---|---:|---:|" + ("---:|" if "fp32 comp." in med else ""))
    for n, v in med.items():
        row = f"| {n} | {1e3 * v:.1f} | {v / med['fp32']:.2f}x |"
        if "fp32 comp." in med:
            row += f" {v / med['fp32 comp.']:.2f}x |"
        print(row)
    if not a.no_ops:
        counts = {"fp32": op_count(*built["fp32"], "auto"), "int8": op_count(*built["int8"], "auto")}
        if "int8 unfused" in variants:
            counts["int8 unfused"] = op_count(*built["int8"], "off")
        if "int8 compiled q." in variants:
            counts["int8 compiled q."] = op_count(*built["int8"], "compiled")
        print("operators per eager step (launching work): "
              + ", ".join(f"{n} {c} ({c / counts['fp32']:.2f}x)" for n, c in counts.items()), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", default=["resnet20:8:16", "cnn:64"], help="model:nodes[:pixels]")
    p.add_argument("--device", default="cpu")
    p.add_argument("--chunk", default="auto", help="sim.chunk of the eager variants")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--wall", action="store_true", help="wall clock on a CPU too")
    p.add_argument("--fused", action="store_true", help="also int8 with the eager passes and the compiled quantizer")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--bounds", action="store_true", help="also the 8-bit step with the draws and/or Q_b made free")
    p.add_argument("--no-ops", action="store_true", help="skip the operator counts")
    a = p.parse_args()
    if os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0"):  # tiny: a check that it runs
        a.cases, a.rounds, a.no_compile, a.chunk, a.bounds = ["mlp:2"], 1, True, "1", True
    torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, {'wall' if a.wall or a.device.startswith('cuda') else 'process CPU'} time, "
          f"median of {a.rounds} interleaved rounds; load average {os.getloadavg()[0]:.1f}", flush=True)
    for case in a.cases:
        torch._dynamo.reset()  # dynamo compiles one code object at most 8 times per process
        run_case(case, a)


if __name__ == "__main__":
    main()
