"""What the per-node random streams cost (issue 29; decent8.streams): one training step
(``StackedModel.loss_and_grad`` of k nodes) with every draw from the node's own stream
(``step=t``, what training runs) against the same step drawing from the global
generator (``step=None``, plain PyTorch), the two interleaved step by step.

    python benchmarks/node_streams.py                         # the default cases
    python benchmarks/node_streams.py --cases resnet20:int8:1:8 --steps 6

A case is ``model:precision:chunk:nodes`` (chunk ``layers:N`` is written ``lN``). Times
are process CPU time per step (one thread: the compute time, robust on a shared machine);
the table gives the medians and streams / global.

A second table times one dither draw of c nodes × n codes (``streams._dither_rows``): the
C loop of :mod:`decent8.dither_kernel` against a seeding and a ``random_`` per node (what
runs without a C compiler), interleaved, medians of 21, and checks the codes are equal.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from decent8.models import StackedModel, init_parameters, make_model
from decent8.models.strategies import strategy_for

INPUTS = {"resnet20": ((3, 32, 32), 32), "cnn": ((1, 8, 8), 16), "mlp": ((1, 8, 8), 16)}


def case(spec: str, steps: int) -> tuple[float, float]:
    name, precision, chunk, k = spec.split(":")
    k = int(k)
    execution, c = ("layers", int(chunk[1:])) if chunk.startswith("l") else ("vmap", int(chunk))
    shape, batch = INPUTS[name]
    module = make_model(name, shape, 10, precision=precision)
    if name == "cnn" or name == "mlp":  # a dropout draw too: the small models have none of their own
        module = torch.nn.Sequential(torch.nn.Dropout(0.1), module)
    init_parameters(module, 0)
    sm = StackedModel(module, nodes=k)
    sm.use(strategy_for(execution, c))
    params = sm.flat_parameters().unsqueeze(0).repeat(k, 1)
    x = torch.randn(k, batch, *shape)
    y = torch.randint(0, 10, (k, batch))
    times: dict[str, list[float]] = {"streams": [], "global": []}
    for step in range(steps + 1):
        for variant, key in (("streams", step), ("global", None)):
            t0 = time.process_time()
            sm.loss_and_grad(params, x, y, step=key)
            if step:  # the first round warms up
                times[variant].append(time.process_time() - t0)
    return statistics.median(times["streams"]), statistics.median(times["global"])


def draws(shapes: list[tuple[int, int]], reps: int = 21) -> None:
    """The dither draw with and without the C loop (the same codes)."""
    from decent8 import dither_kernel, streams
    from decent8.native import CLibrary

    fast_lib = dither_kernel.LIBRARY
    if not fast_lib.available():
        print(f"(no C loop: {fast_lib.why_unavailable()})")
        return
    slow_lib = CLibrary("dither_rows", "", {}, lambda so: None)
    slow_lib.reset(None, "disabled for the comparison")
    print("| nodes × codes | C loop (ms) | torch.Generator per node (ms) | ratio | same codes |")
    print("|---|---:|---:|---:|---|")
    cpu = torch.device("cpu")
    for c, n in shapes:
        keys = streams.node_keys(0, range(c), 1).tolist()
        times: dict[str, list[float]] = {"fast": [], "slow": []}
        out = {}
        for _ in range(reps):
            for name, lib in (("fast", fast_lib), ("slow", slow_lib)):
                dither_kernel.LIBRARY = lib
                try:
                    t0 = time.process_time()
                    out[name] = streams._dither_rows(keys, 7, n, cpu)
                    times[name].append(time.process_time() - t0)
                finally:
                    dither_kernel.LIBRARY = fast_lib
        f, s = statistics.median(times["fast"]), statistics.median(times["slow"])
        print(f"| {c} × {n} | {1e3 * f:.3f} | {1e3 * s:.3f} | {s / f:.1f}× | {torch.equal(out['fast'], out['slow'])} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=["resnet20:int8:1:8", "resnet20:fp32:1:8", "cnn:int8:8:64",
                                                   "cnn:fp32:l8:64", "mlp:int8:64:256"])
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args()
    shapes = [(8, 65536), (8, 4096), (64, 4096), (256, 256)]
    if os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0"):  # tiny: a check that it runs
        a.cases, a.steps, shapes = ["mlp:int8:2:2"], 1, [(2, 100)]
    torch.set_num_threads(1)
    print(f"# torch {torch.__version__}, 1 thread, process CPU time per loss_and_grad, median of {a.steps}")
    print("| case (model:precision:chunk:nodes) | streams (ms) | global generator (ms) | streams / global |")
    print("|---|---:|---:|---:|")
    for spec in a.cases:
        s, g = case(spec, a.steps)
        print(f"| {spec} | {1e3 * s:.1f} | {1e3 * g:.1f} | {s / g:.3f} |", flush=True)
    print()
    draws(shapes)


if __name__ == "__main__":
    main()
