"""Step time of 8-bit (fake-quantized) vs FP32 training, ResNet-20, batch 32 per node, CPU.

One training step = the stacked forward + backward of ``StackedModel.loss_and_grad``
for k nodes at once (the part of a gossip step that low precision changes; the
gossip itself is timed by the compression benchmarks). Prints, for k = 1 and k = 8,
the median step time of each precision and their ratio (issue 14's target: ≤ 1.2×), then, with
``--profile``, the operators that dominate the int8 step.

    python benchmarks/lowprec_overhead.py                 # table
    python benchmarks/lowprec_overhead.py --profile       # + torch.profiler top ops
    python benchmarks/lowprec_overhead.py --threads 2 --steps 10 --nodes 1 8
    python benchmarks/lowprec_overhead.py --nodes 1 --breakdown   # + time inside the quantizer
    python benchmarks/lowprec_overhead.py --compile       # + sim.compile=true variants

``--compile`` adds the fp32 and int8 models with ``StackedModel.compile()`` (what
``sim.compile=true`` runs); their compilation (the first call) is timed separately
and not counted in the step times.

Times are process CPU time per step by default (robust on a shared machine; with
one thread it equals the compute time); ``--wall`` reports wall-clock instead. The
configurations' steps are interleaved so that a drifting machine load hits them alike.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from decent8.models import StackedModel, init_parameters, make_model
from decent8.quant import set_stochastic


def build(precision: str, k: int, norm: str | None, model: str, image: int, compiled: bool = False):
    deterministic = precision == "int8-det"
    module = make_model(model, (3, image, image), 10, norm=norm, precision="int8" if deterministic else precision)
    init_parameters(module, 0)
    if deterministic:
        set_stochastic(module, False)
    sm = StackedModel(module, nodes=k)
    if compiled:
        sm.compile()
    params = sm.flat_parameters().unsqueeze(0).repeat(k, 1)
    return sm, params


def time_interleaved(configs: dict[str, tuple], k: int, batch: int, steps: int, warmup: int,
                     wall: bool, model: str, image: int) -> dict[str, list[float]]:
    """Per-step times of each config, the configs' steps interleaved (one step of each in
    turn), so that load drifting on a shared machine hits them alike. A compiled config
    is compiled (its first call, printed) before the timed rounds."""
    torch.manual_seed(0)
    built = {name: build(cfg[0], k, cfg[1], model, image, *cfg[2:]) for name, cfg in configs.items()}
    x = torch.randn(k, batch, 3, image, image)
    y = torch.randint(0, 10, (k, batch))
    clock = time.perf_counter if wall else time.process_time
    for name, cfg in configs.items():
        if len(cfg) > 2 and cfg[2]:
            sm, params = built[name]
            t0 = time.perf_counter()
            sm.loss_and_grad(params, x, y)
            print(f"  ({name}: compiled in {time.perf_counter() - t0:.0f} s wall)", flush=True)
    out: dict[str, list[float]] = {name: [] for name in configs}
    for i in range(warmup + steps):
        for name, (sm, params) in built.items():
            t0 = clock()
            sm.loss_and_grad(params, x, y)
            if i >= warmup:
                out[name].append(clock() - t0)
    return out


def profile(precision: str, k: int, batch: int, norm: str | None, model: str, image: int, rows: int) -> str:
    from torch.profiler import ProfilerActivity, profile as tprofile

    sm, params = build(precision, k, norm, model, image)
    x = torch.randn(k, batch, 3, image, image)
    y = torch.randint(0, 10, (k, batch))
    sm.loss_and_grad(params, x, y)
    with tprofile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            sm.loss_and_grad(params, x, y)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def breakdown(k: int, batch: int, norm: str | None, model: str, image: int, steps: int = 3) -> str:
    """Per int8 step: calls, elements and process CPU time inside ``fake_quantize`` (split by
    rounding mode), the whole step's time, and the page faults (fresh memory) of each precision."""
    import resource

    import decent8.quant.quantizer as Q

    stats: dict[bool, list[float]] = {True: [0, 0, 0.0], False: [0, 0, 0.0]}
    inner = Q.fake_quantize

    def counted(x, mn, mx, bits=8, stochastic=False):  # type: ignore[no-untyped-def]
        t0 = time.process_time()
        out = inner(x, mn, mx, bits, stochastic)
        s = stats[bool(stochastic)]
        s[0] += 1
        s[1] += x.numel()
        s[2] += time.process_time() - t0
        return out

    x = torch.randn(k, batch, 3, image, image)
    y = torch.randint(0, 10, (k, batch))
    lines = []
    for prec in ("fp32", "int8"):
        sm, params = build(prec, k, norm, model, image)
        sm.loss_and_grad(params, x, y)
        for s in stats.values():
            s[:] = [0, 0, 0.0]
        Q.fake_quantize = counted
        try:
            r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
            for _ in range(steps):
                sm.loss_and_grad(params, x, y)
            r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
        finally:
            Q.fake_quantize = inner
        lines.append(f"{prec}: step {1e3 * (t1 - t0) / steps:.1f} ms, {(r1.ru_minflt - r0.ru_minflt) / steps:.0f} page "
                     f"faults and {1e3 * (r1.ru_stime - r0.ru_stime) / steps:.1f} ms system time per step")
        if prec == "int8":
            for st, (n, e, t) in stats.items():
                lines.append(f"  fake_quantize {'stochastic' if st else 'deterministic'}: {n / steps:.0f} calls, "
                             f"{e / steps / 1e6:.2f} M elements, {1e3 * t / steps:.1f} ms per step")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", default="resnet20")
    ap.add_argument("--image", type=int, default=32)
    ap.add_argument("--fp32-norm", default=None, help="norm of the fp32 model (default: evonorm)")
    ap.add_argument("--int8-norm", default=None, help="norm of the int8 model (default: range_evonorm)")
    ap.add_argument("--wall", action="store_true", help="wall-clock instead of process CPU time")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--breakdown", action="store_true", help="time inside the quantizer and page faults per step")
    ap.add_argument("--rows", type=int, default=15)
    ap.add_argument("--compile", action="store_true", help="also the sim.compile=true fp32 and int8 models")
    a = ap.parse_args()
    if os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0"):  # tiny: a check that it runs
        a.nodes, a.batch, a.steps, a.warmup, a.model, a.image, a.compile, a.profile, a.breakdown = \
            [2], 4, 1, 1, "cnn", 8, False, False, False
    torch.set_num_threads(a.threads)
    print(f"{a.model}, batch {a.batch} per node, {a.threads} thread(s), torch {torch.__version__}, "
          f"{'wall' if a.wall else 'process CPU'} time, median of {a.steps} interleaved steps")
    fp_norm = a.fp32_norm or "evonorm"
    q_norm = a.int8_norm or "range_evonorm"
    configs = {
        f"fp32 {fp_norm}": ("fp32", fp_norm),
        f"fp32 {q_norm}": ("fp32", q_norm),
        f"int8 {q_norm}": ("int8", q_norm),
        f"int8 {q_norm} det.": ("int8-det", q_norm),
    }
    if a.compile:
        configs[f"fp32 {fp_norm} compiled"] = ("fp32", fp_norm, True)
        configs[f"int8 {q_norm} compiled"] = ("int8", q_norm, True)
    extra = " | int8 comp./fp32 | int8/fp32 both comp." if a.compile else ""
    header = ("| nodes | " + " | ".join(configs) + " | int8/fp32 | int8/fp32 same norm" + extra + " |")
    print(header)
    print("|" + "---:|" * header.count(" | ") + "---:|")
    for k in a.nodes:
        t = time_interleaved(configs, k, a.batch, a.steps, a.warmup, a.wall, a.model, a.image)
        med = {n: statistics.median(v) for n, v in t.items()}
        names = list(configs)
        ratio = statistics.median(q / f for q, f in zip(t[names[2]], t[names[0]]))
        ratio_same = statistics.median(q / f for q, f in zip(t[names[2]], t[names[1]]))
        row = (f"| {k} | " + " | ".join(f"{1e3 * med[n]:.1f} ms" for n in names)
               + f" | {ratio:.2f}x | {ratio_same:.2f}x")
        if a.compile:
            comp = statistics.median(q / f for q, f in zip(t[names[5]], t[names[0]]))
            both = statistics.median(q / f for q, f in zip(t[names[5]], t[names[4]]))
            row += f" | {comp:.2f}x | {both:.2f}x"
        print(row + " |", flush=True)
    print("(ms per step: forward + backward of all k nodes; ratios: median over the paired steps; "
          "'det.' = int8 with deterministic rounding everywhere, i.e. without the random draws)")
    if a.breakdown:
        print(f"\n== breakdown, k = {a.nodes[0]} (3 steps of each precision, not interleaved) ==")
        print(breakdown(a.nodes[0], a.batch, q_norm, a.model, a.image))
    if a.profile:
        for prec, norm in (("fp32", fp_norm), ("int8", q_norm)):
            print(f"\n== {prec}, k = {a.nodes[0]}: top operators by self CPU time (3 steps) ==")
            print(profile(prec, a.nodes[0], a.batch, norm, a.model, a.image, a.rows))


if __name__ == "__main__":
    main()
