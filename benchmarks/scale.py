"""How do step time and memory grow with the number of simulated nodes? (issue 14)

One full iteration of n nodes — forward, backward, local Nesterov momentum and Choco-SGD
(99 % top-k, directed ring; sparse mixing from 17 nodes on) — with ``sim.chunk=auto``
(or a fixed chunk), as a ratio to one model's forward + backward + step on the same
total batch (n × b samples). Each case runs in its own process, so that its peak memory
is its own: the peak resident set (CPU; on CUDA the peak allocated device memory), and
per node the growth over the process's memory before the engine was built, divided by n.
The engine, batch and timing are those of ``benchmarks/stacking.py`` (imported).

    python benchmarks/scale.py                                  # the issue's table
    python benchmarks/scale.py --cases cnn:8 cnn:1024 resnet20:8:1

The run is built as ``decent8 train`` builds it (``build(load_config(...))``, through
``stacking.make_engine``); the case sets its ``sim.chunk``. ``DECENT8_BENCH_SMOKE=1``: one
tiny case, one round (a check that it runs).

A case is ``model:n`` or ``model:n:chunk`` (a fixed ``sim.chunk`` instead of ``auto``,
e.g. where timing every candidate chunk would take longer than the measurement).

Memory floor (issue 32): the bytes of ``[n, d]`` state one iteration must read and write
at least once each — parameters z, the gradient (written by backward, read by the
optimizer), the optimizer's buffers (momentum), the algorithm's buffers (Choco: x̂ and
its residual, in their stored dtypes) and the messages (written by the sender, read by
each receiver: 2 × the bytes the communicator counted for the step) — divided by this
machine's copy bandwidth, measured in the same process just before the case (``dst.copy_(src)``
of 256 MiB float32, (read + write bytes) / time, same clock and threads as the step).
``measured / floor`` says how far the iteration is from moving its state at memory
speed (the floor ignores the forward/backward arithmetic and the activations).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SMOKE = os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0")
DEFAULT_CASES = ["cnn:8", "cnn:64", "cnn:256", "cnn:1024", "mlp:256", "resnet20:8", "resnet20:32", "resnet20:64"]


def copy_bandwidth(device: torch.device, mib: int = 256, repeats: int = 5) -> float:
    """Bytes per second (read + write) of ``dst.copy_(src)`` on ``mib`` MiB of float32, best of ``repeats``."""
    import stacking
    src = torch.ones(mib * 2**18, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # touch the pages
    best = min(stacking.timed(lambda: dst.copy_(src), 1, device) for _ in range(repeats))
    return 2 * src.numel() * src.element_size() / best


def state_bytes(eng) -> dict[str, int]:
    """Bytes of ``[n, d]`` state one iteration of ``eng`` must read and write (each at least
    once): by part. Messages: 2 × the bytes one step hands to the network."""
    nb = lambda t: t.numel() * t.element_size()  # noqa: E731
    parts = {"z": 2 * nb(eng.z), "grad": 2 * nb(eng.z)}
    opt = [v for name, v in vars(eng.optimizer).items()  # its state (momentum), not its workspaces (_name)
           if not name.startswith("_") and isinstance(v, torch.Tensor) and v.shape[:1] == eng.z.shape[:1]]
    parts["optimizer"] = 2 * sum(nb(t) for t in opt)
    parts["algorithm"] = 2 * sum(nb(t) for t in eng.algorithm.buffers().values() if t is not None)
    parts["messages"] = 2 * int(eng.last_step_bytes)
    return parts


def rss_bytes() -> int:
    """This process's resident set now (Linux /proc), in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


class ByteCounter:
    """An observer of the communicator: the bytes of every message (what the run's recorder sees)."""

    def __init__(self) -> None:
        self.total = 0.0

    def on_traffic(self, kind, step, nbytes, dst) -> None:
        self.total += float(nbytes)


def run_case(model: str, n: int, chunk: str, rounds: int, steps: int, device: torch.device) -> dict:
    """Time one case in this process (called in a child process by :func:`main`)."""
    import stacking
    from decent8.models.execution import choose_chunk

    stacking.CLOCK = time.process_time if device.type == "cpu" and torch.get_num_threads() == 1 else time.perf_counter
    x, y = stacking.batch(model, n, device)
    before = torch.cuda.memory_allocated(device) if device.type == "cuda" else rss_bytes()
    sm, eng = stacking.make_engine("decent8", model, n, "fp32", device)
    t0 = time.perf_counter()
    choice = choose_chunk(sm, eng.params(), x, y, chunk, steps=1, use_cache=False)
    choose_s = time.perf_counter() - t0
    step = functools.partial(eng.train_step, x, y, 1e-4)
    counter = eng.comm.observe(ByteCounter())
    step()
    eng.last_step_bytes = counter.total
    parts = state_bytes(eng)
    bandwidth = copy_bandwidth(device, 16 if SMOKE else 256)
    times = [stacking.timed(step, steps, device) for _ in range(rounds)]
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device)
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    del eng, sm
    # one model on the same total batch (n × b samples)
    ref_sm, _ = stacking.make_engine("decent8", model, 1, "fp32", device)
    p1 = ref_sm.flat_parameters().unsqueeze(0)
    xr, yr = x.reshape(1, -1, *x.shape[2:]), y.reshape(1, -1)

    def ref_step():
        _, g = ref_sm.loss_and_grad(p1, xr, yr)
        p1.sub_(g, alpha=1e-4)

    ref = [stacking.timed(ref_step, steps, device) for _ in range(rounds)]
    step_s, ref_s = statistics.median(times), statistics.median(ref)
    return {"model": model, "n": n, "chunk": choice.chunk, "requested": chunk, "step_s": step_s, "ref_s": ref_s,
            "ratio": step_s / ref_s, "peak_bytes": peak, "per_node_bytes": (peak - before) / n,
            "choose_s": choose_s, "params": sm_dim(model), "state_bytes": parts, "bandwidth": bandwidth,
            "floor_s": sum(parts.values()) / bandwidth, "vs_floor": step_s / (sum(parts.values()) / bandwidth)}


def sm_dim(model: str) -> int:
    import stacking
    from decent8.models import make_model
    return sum(p.numel() for p in make_model(model, stacking.MODELS[model][0], 10).parameters())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=DEFAULT_CASES, help="model:n or model:n:chunk")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=1, help="timed iterations per measurement")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one case, print JSON
    args = ap.parse_args()
    if SMOKE and not args.one:
        args.cases, args.rounds, args.steps, args.device = ["mlp:4:1"], 1, 1, "cpu"
    device = torch.device(args.device)
    if args.one:
        model, n, chunk = (args.one.split(":") + ["auto"])[:3]
        print("RESULT " + json.dumps(run_case(model, int(n), chunk, args.rounds, args.steps, device)), flush=True)
        return
    import decent8
    clock = "process CPU time" if device.type == "cpu" and torch.get_num_threads() == 1 else "wall"
    mem = "peak allocated CUDA memory" if device.type == "cuda" else "peak resident set of the case's process"
    print(f"# decent8 {decent8.__version__}, torch {torch.__version__}, {device}, {torch.get_num_threads()} threads; "
          f"median of {args.rounds} rounds × {args.steps} steps; clock={clock}; memory={mem}")
    print("| model | n | params/node | chunk | 1 model, n×b samples (s) | n nodes (s) | ratio | state bytes/iter (MiB) "
          "| copy GB/s | memory floor (s) | measured / floor | peak memory (MiB) | per node (KiB) | chunk choice (s) |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for case in args.cases:
        cmd = [sys.executable, __file__, "--one", case, "--rounds", str(args.rounds), "--steps", str(args.steps),
               "--device", args.device]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            err = (proc.stderr.strip().splitlines() or ["?"])[-1][:160]
            print(f"| {case} | failed: {err} |||||||||||||", flush=True)
            if SMOKE:
                raise SystemExit(proc.stderr[-3000:])
            continue
        r = json.loads(lines[-1][7:])
        chunk = f"{r['chunk']} ({'auto' if r['requested'] == 'auto' else 'fixed'})"
        print(f"| {r['model']} | {r['n']} | {r['params']} | {chunk} | {r['ref_s']:.4f} | {r['step_s']:.4f} | "
              f"{r['ratio']:.2f} | {sum(r['state_bytes'].values()) / 2**20:.1f} | {r['bandwidth'] / 1e9:.1f} | "
              f"{r['floor_s']:.4f} | {r['vs_floor']:.1f} | {r['peak_bytes'] / 2**20:.0f} | {r['per_node_bytes'] / 1024:.0f} | "
              f"{r['choose_s']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
