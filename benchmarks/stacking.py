"""How fast is one n-node training iteration, by execution strategy? (issue "any model")

One full iteration — forward, backward, optimizer (local Nesterov momentum) and gossip
(Choco-SGD, 99 % top-k, directed ring) — of k nodes, as a ratio to one model's
forward + backward + step on the same total batch (k × b samples). Variants, measured
interleaved in rounds in one process (the median over rounds is reported):

* ``loop``    — ``sim.chunk=1``: a plain loop over the k nodes' plain modules;
* ``vmap``    — ``sim.chunk=k``: one ``torch.func.vmap`` call over all k nodes;
* ``auto``    — the chunk that ``sim.chunk=auto`` chose (timed at start-up);
* ``legacy``  — the node-batched layers this project used before (grouped convolutions,
  batched matmuls), imported from git history (``--legacy-rev``), when available, run by
  today's engine, optimizer and Choco-SGD: only the model execution differs;
* ``old pkg`` — the whole iteration of that old revision (its layers *and* its gossip:
  Choco-SGD then kept its sums in float32, see docs/results/choco_numerics.md);
* ``dist``    — (``--dist``) k processes of the distributed backend (gloo), the
  per-step wall time of ``decent8 train backend=distributed`` on random data.

    python benchmarks/stacking.py                    # the issue's table (long on 2 cores)
    python benchmarks/stacking.py --cases cnn:8 cnn:64 --rounds 3
"""
from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import decent8  # noqa: E402
from decent8.models.execution import choose_chunk  # noqa: E402

#: model → (input shape, batch per node)
MODELS = {"resnet20": ((3, 32, 32), 32), "vgg11": ((3, 32, 32), 32), "cnn": ((1, 8, 8), 16), "mlp": ((1, 8, 8), 16)}
#: model → a data set of that input shape (the distributed column builds a real run's model)
DATASETS = {"resnet20": "cifar10", "vgg11": "cifar10", "cnn": "digits", "mlp": "digits"}
DEFAULT_CASES = ["resnet20:1", "resnet20:8", "resnet20:32", "vgg11:8", "cnn:8", "cnn:64", "cnn:256", "mlp:256"]


def legacy_package(rev: str) -> object | None:
    """The decent8 package of git revision ``rev``, importable as ``decent8_legacy`` (None if unavailable)."""
    tmp = Path(tempfile.mkdtemp(prefix="d8legacy-"))
    try:
        tar = subprocess.run(["git", "-C", str(REPO), "archive", rev, "src/decent8"], capture_output=True, check=True)
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=tar.stdout, check=True)
    (tmp / "src" / "decent8").rename(tmp / "decent8_legacy")
    sys.path.insert(0, str(tmp))
    try:
        return importlib.import_module("decent8_legacy")
    except Exception as e:  # pragma: no cover - depends on the revision
        print(f"legacy revision {rev} does not import: {e}", file=sys.stderr)
        return None


def make_engine(pkg_name: str, model: str, k: int, precision: str, device: torch.device,
                layers_pkg: str | None = None):
    """An Engine of package ``pkg_name`` (decent8 or decent8_legacy): Choco 99 % top-k on a
    directed ring; the model (layers and StackedModel) from ``layers_pkg`` (default: the same)."""
    m = lambda sub: importlib.import_module(f"{pkg_name}.{sub}")  # noqa: E731
    ml = lambda sub: importlib.import_module(f"{layers_pkg or pkg_name}.{sub}")  # noqa: E731
    shape, _ = MODELS[model]
    kw = {}
    if precision == "int8":
        kw = {"precision": "int8", "quant": ml("quant.quantizer").QuantSpec()}
    module = ml("models").make_model(model, shape, 10, **kw)
    ml("models").init_parameters(module, 0)
    sm = ml("models").StackedModel(module, device, nodes=k)
    topo = m("topology").make_topology("directed_ring", max(k, 2))
    comm = m("comm.simulator").SimulatorCommunicator(topo, device)
    if k == 1:  # one model: no neighbours; the reference below times it without gossip
        return sm, None
    wire = "topk_int8" if precision == "int8" else "topk"
    comp = m("compression").make_compressor(wire, sm.layout, ratio=0.99)
    algo = m("algorithms").make_algorithm("choco", comm, comp, 0.05, False,
                                          m("seeding").node_generators(0, "compress", comm.local_nodes))
    opt = m("optim").make_optimizer("local", 0.9, True, 1e-4)
    return sm, m("train.engine").Engine(sm, algo, opt, comm, sm.flat_parameters())


def batch(model: str, k: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    shape, b = MODELS[model]
    g = torch.Generator().manual_seed(0)
    return torch.randn(k, b, *shape, generator=g).to(device), torch.randint(0, 10, (k, b), generator=g).to(device)


#: the clock of :func:`timed`: ``time.perf_counter`` (wall) or ``time.process_time`` (this
#: process's CPU time: on a CPU shared with other jobs and one thread per process it counts
#: only this process's work, so variants timed minutes apart stay comparable)
CLOCK = time.perf_counter


def timed(fn, steps: int, device: torch.device) -> float:
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = CLOCK()
    for _ in range(steps):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (CLOCK() - t0) / steps


def dist_step_time(model: str, k: int, steps: int) -> float:
    """Seconds per step of k gloo processes (``decent8 launch`` equivalent), from the ranks' own timing."""
    code = f"""
import sys, time, torch
sys.path.insert(0, {str(REPO / 'src')!r})
from decent8.config import load_config
from decent8.train.build import build
from decent8.train.engine import Engine
cfg = load_config(None, ["nodes={k}", "model={model}", "backend=distributed", "device=cpu",
                        "data.name={DATASETS[model]}", "progress=false"])
c = build(cfg)
sm = c.model
shape, b = {MODELS[model]!r}
eng = Engine(sm, c.algorithm, c.optimizer, c.comm, sm.flat_parameters())
x, y = torch.randn(1, b, *shape), torch.randint(0, 10, (1, b))
eng.train_step(x, y, 0.1)
c.comm.barrier(); t0 = time.perf_counter()
for _ in range({steps}):
    eng.train_step(x, y, 0.1)
c.comm.barrier()
if c.comm.is_main:
    print("STEP", (time.perf_counter() - t0) / {steps})
c.comm.close()
"""
    from decent8.cli.launch_cmd import LocalNodes
    logs = Path(tempfile.mkdtemp(prefix="d8dist-"))
    group = LocalNodes(k, [sys.executable, "-c", code], log_dir=logs)
    while any(c is None for c in group.poll()):
        time.sleep(0.1)
    group.close()
    for line in (logs / "node0.log").read_text().splitlines():
        if line.startswith("STEP"):
            return float(line.split()[1])
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=DEFAULT_CASES, help="model:k pairs")
    ap.add_argument("--precisions", nargs="+", default=["fp32", "int8"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2, help="timed iterations per measurement")
    ap.add_argument("--legacy-rev", default="5b6f763", help="git revision with the node-batched layers ('' = none)")
    ap.add_argument("--dist", action="store_true", help="also time k gloo processes for resnet20:8")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--clock", choices=["auto", "wall", "cpu"], default="auto",
                    help="wall time, or this process's CPU time (auto: CPU time on a CPU device with 1 thread)")
    args = ap.parse_args()
    device = torch.device(args.device)
    global CLOCK
    use_cpu = args.clock == "cpu" or (args.clock == "auto" and device.type == "cpu" and torch.get_num_threads() == 1
                                      and not args.dist)  # k processes: only wall time compares
    CLOCK = time.process_time if use_cpu else time.perf_counter
    legacy = legacy_package(args.legacy_rev) if args.legacy_rev else None
    print(f"# decent8 {decent8.__version__}, torch {torch.__version__}, {device}, {torch.get_num_threads()} threads, "
          f"legacy={'decent8@' + args.legacy_rev if legacy else 'n/a'}; median of {args.rounds} rounds × {args.steps} steps; "
          f"clock={'process CPU time' if use_cpu else 'wall'}")
    print("| model | k | precision | 1 model (s) | loop | vmap | auto (c) | legacy | old pkg | dist |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for case in args.cases:
        model, k = case.split(":")[0], int(case.split(":")[1])
        for precision in args.precisions:
            x, y = batch(model, k, device)
            ref_sm, _ = make_engine("decent8", model, 1, precision, device)
            p1 = ref_sm.flat_parameters().unsqueeze(0)
            xr, yr = x.reshape(1, -1, *x.shape[2:]), y.reshape(1, -1)
            ref_sm.chunk = 1

            def ref_step():
                _, g = ref_sm.loss_and_grad(p1, xr, yr)
                p1.sub_(g, alpha=1e-4)

            variants = {}
            if k > 1:
                for name, chunk in (("loop", 1), ("vmap", k)):
                    sm, eng = make_engine("decent8", model, k, precision, device)
                    sm.chunk = chunk
                    variants[name] = eng
                sm, eng = make_engine("decent8", model, k, precision, device)
                choice = choose_chunk(sm, eng.params(), x, y, "auto", steps=1, use_cache=False)
                variants["auto"] = eng
                if legacy is not None:
                    try:
                        variants["legacy"] = make_engine("decent8", model, k, precision, device, "decent8_legacy")[1]
                        variants["old pkg"] = make_engine("decent8_legacy", model, k, precision, device)[1]
                    except Exception:  # e.g. no 8-bit MLP there
                        pass
            times: dict[str, list[float]] = {"ref": [], **{n: [] for n in variants}}
            for _ in range(args.rounds):  # interleaved
                times["ref"].append(timed(ref_step, args.steps, device))
                for name, eng in variants.items():
                    times[name].append(timed(lambda e=eng: e.train_step(x, y, 1e-4), args.steps, device))
            med = {n: statistics.median(v) for n, v in times.items()}
            ratio = lambda n: f"{med[n] / med['ref']:.2f}" if n in med else "—"  # noqa: E731
            dist = "—"
            if args.dist and model == "resnet20" and k == 8 and precision == "fp32":
                dist = f"{dist_step_time(model, k, args.steps) / med['ref']:.2f}"
            auto = f"{ratio('auto')} ({choice.chunk})" if k > 1 else "—"
            print(f"| {model} | {k} | {precision} | {med['ref']:.4f} | {ratio('loop')} | {ratio('vmap')} | {auto} | "
                  f"{ratio('legacy')} | {ratio('old pkg')} | {dist} |", flush=True)


if __name__ == "__main__":
    main()
