"""How fast is one n-node training iteration, by execution strategy? (issue "any model")

One full iteration — forward, backward, optimizer (local Nesterov momentum) and gossip
(Choco-SGD, 99 % top-k, directed ring) — of k nodes, as a ratio to one model's
forward + backward + step on the same total batch (k × b samples). Variants, measured
interleaved in rounds in one process (the median over rounds is reported):

* ``loop``    — ``sim.chunk=1``: a plain loop over the k nodes' plain modules;
* ``vmap``    — ``sim.chunk=k``: one ``torch.func.vmap`` call over all k nodes;
* ``layers``  — ``sim.chunk=layers:k``: all k nodes through node-batched layers (one
  grouped convolution / batched matmul per layer; models without such a form: —);
* ``auto``    — what ``sim.chunk=auto`` chose (timed at start-up), e.g. ``8`` or ``layers:8``;
* ``legacy``  — the node-batched layer *set* this project used before (model classes
  written against them), imported from git history (``--legacy-rev``), when available,
  run by today's engine, optimizer and Choco-SGD: only the model execution differs;
* ``old pkg`` — the whole iteration of that old revision (its layers *and* its gossip:
  Choco-SGD then kept its sums in float32, see docs/results/choco_numerics.md).

``--jobs N`` measures N cases at a time, each in its own process with one thread and
the process-CPU-time clock, and prints the one table when all are done. ``--dist`` adds
a second table (wall clock, all threads, measured alone after the first): one step of
8 ResNet-20 nodes as the simulator (``auto``), as a Python loop over 8 models, and as 8
processes of the distributed backend (gloo), the way the reference code runs.

    python benchmarks/stacking.py                    # the issue's table (long on 2 cores)
    python benchmarks/stacking.py --jobs 2 --dist    # the same, two cases at a time, and the process table
    python benchmarks/stacking.py --cases cnn:8 cnn:64 --rounds 3

Every variant is the run ``build(load_config(None, [...]))`` constructs (``decent8 train``'s
path); a variant changes one thing after building: the execution strategy (``sim.chunk``),
or for ``legacy`` the stacked model. ``DECENT8_BENCH_SMOKE=1``: one tiny case, no legacy
revision, no process table (a check that it runs).
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
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

SMOKE = os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0")
from decent8.models.execution import choose_chunk, layers_mismatch  # noqa: E402
from decent8.models.strategies import strategy_for  # noqa: E402

#: model → (input shape, batch per node)
MODELS = {"resnet20": ((3, 32, 32), 32), "vgg11": ((3, 32, 32), 32), "cnn": ((1, 8, 8), 16), "mlp": ((1, 8, 8), 16)}
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


#: the run every variant starts from (what ``decent8 train`` builds with these options)
RUN_OPTIONS = ["algorithm=choco", "compression=topk", "compression.ratio=0.99", "topology=directed_ring",
               "algorithm.gamma=0.05", "optimizer.kind=local", "optimizer.momentum=0.9", "optimizer.nesterov=true",
               "optimizer.weight_decay=1e-4", "seed=0"]


def random_dataset(model: str, n: int):
    """``n`` random images of the model's input shape, 10 classes (the timing does not read them)."""
    from decent8.data.dataset import ArrayDataset
    shape, _ = MODELS[model]
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(n, *shape, generator=g), torch.arange(n) % 10
    return ArrayDataset(x, y, x[:10], y[:10], 10, [str(c) for c in range(10)], "random")


def components(model: str, k: int, precision: str, device: torch.device, options: list[str] = ()):
    """The run's components through the product path: ``build(load_config(None, [...]))``."""
    from decent8.config import load_config
    from decent8.train.build import build
    _, b = MODELS[model]
    cfg = load_config(None, [f"nodes={k}", f"model={model}", f"precision={precision}", f"device={device}",
                             f"data.batch_size={b}", *RUN_OPTIONS, *options])
    return build(cfg, dataset=random_dataset(model, max(k * b, 20)))


class LegacyModel:
    """An older StackedModel under today's engine: the calls it did not know (``step=``) dropped."""

    def __init__(self, model) -> None:
        self.__dict__["_model"] = model

    def __getattr__(self, name):
        return getattr(self._model, name)

    def __setattr__(self, name, value) -> None:
        setattr(self._model, name, value)

    def loss_and_grad(self, params, x, y, step=None, **kw):
        return self._model.loss_and_grad(params, x, y, **kw)


def make_engine(pkg_name: str, model: str, k: int, precision: str, device: torch.device,
                layers_pkg: str | None = None):
    """(stacked model, Engine) of one variant: Choco 99 % top-k on a directed ring, built by
    ``build(load_config(...))`` of package ``pkg_name`` (decent8, or decent8_legacy: that
    revision's own product path). ``layers_pkg``: override ONE component after building, the
    stacked model (the node-batched layer set of that package); the rest stays as built.
    ``k == 1``: the one-model reference (no run has one node): the built module as one model."""
    from decent8.train.engine import Engine
    if k == 1:
        c = components(model, 2, precision, device)
        sm = type(c.model)(c.model.module, device, nodes=1)
        return sm, None
    if pkg_name != "decent8":   # an older revision: its own load_config/build (digits-shaped models only)
        m = lambda sub: importlib.import_module(f"{pkg_name}.{sub}")  # noqa: E731
        _, b = MODELS[model]
        cfg = m("config").load_config(None, [f"nodes={k}", f"model={model}", f"precision={precision}",
                                             f"device={device}", f"data.batch_size={b}", *RUN_OPTIONS])
        c = m("train.build").build(cfg)
        return c.model, m("train.engine").Engine(c.model, c.algorithm, c.optimizer, c.comm, c.x0)
    c = components(model, k, precision, device)
    sm = c.model
    if layers_pkg is not None:  # the override: the model from the other package's layers
        ml = lambda sub: importlib.import_module(f"{layers_pkg}.{sub}")  # noqa: E731
        kw = {"precision": "int8", "quant": ml("quant.quantizer").QuantSpec()} if precision == "int8" else {}
        module = ml("models").make_model(model, MODELS[model][0], 10, **kw)
        ml("models").init_parameters(module, 0)
        sm = LegacyModel(ml("models").StackedModel(module, device, nodes=k))
    return sm, Engine(sm, c.algorithm, c.optimizer, c.comm, sm.flat_parameters())


def batch(model: str, k: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    shape, b = MODELS[model]
    g = torch.Generator().manual_seed(0)
    return torch.randn(k, b, *shape, generator=g).to(device), torch.randint(0, 10, (k, b), generator=g).to(device)


#: the clock of :func:`timed`: ``time.perf_counter`` (wall) or ``time.process_time`` (this
#: process's CPU time: on a CPU shared with other jobs and one thread per process it counts
#: only this process's work, so variants timed minutes apart stay comparable)
CLOCK = time.perf_counter


def timed(fn, steps: int, device: torch.device) -> float:
    """Seconds per call of ``fn`` over ``steps`` calls (after whatever warm-up the caller did)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = CLOCK()
    for _ in range(steps):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (CLOCK() - t0) / steps


def steps_for(fn, steps: int, min_seconds: float, device: torch.device) -> int:
    """One warm-up call of ``fn``; the number of timed calls that lasts about ``min_seconds`` (at least ``steps``)."""
    first = timed(fn, 1, device)
    return max(steps, math.ceil(min_seconds / max(first, 1e-6)))


def dist_step_time(model: str, k: int, steps: int) -> float:
    """Seconds per step of k gloo processes (``decent8 launch`` equivalent), from the ranks' own timing."""
    shape, b = MODELS[model]
    data = Path(tempfile.mkdtemp(prefix="d8data-")) / "random.pt"  # the model's input shape, random images
    g = torch.Generator().manual_seed(0)
    torch.save({"x_train": torch.randn(k * b, *shape, generator=g), "y_train": torch.randint(0, 10, (k * b,), generator=g),
                "x_test": torch.randn(b, *shape, generator=g), "y_test": torch.arange(b) % 10}, data)
    code = f"""
import sys, time, torch
sys.path.insert(0, {str(REPO / 'src')!r})
from decent8.config import load_config
from decent8.train.build import build
from decent8.train.engine import Engine
cfg = load_config(None, ["nodes={k}", "model={model}", "backend=distributed", "device=cpu",
                        "data.name=tensors", "data.path={data}", "progress=false"])
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


#: models whose old node-batched layer set is timed too (``legacy``, ``old pkg``)
LEGACY_MODELS = ("cnn", "mlp")


def measure_case(model: str, k: int, precision: str, rounds: int, steps: int, device: torch.device,
                 legacy_rev: str, min_seconds: float = 0.0) -> dict[str, object]:
    """Median seconds per iteration of every variant and of the one-model reference (interleaved rounds)."""
    legacy = legacy_package(legacy_rev) if legacy_rev and k > 1 and model in LEGACY_MODELS else None
    x, y = batch(model, k, device)
    ref_sm, _ = make_engine("decent8", model, 1, precision, device)
    p1 = ref_sm.flat_parameters().unsqueeze(0)
    xr, yr = x.reshape(1, -1, *x.shape[2:]), y.reshape(1, -1)
    ref_sm.use(strategy_for("vmap", 1))

    def ref_step():
        _, g = ref_sm.loss_and_grad(p1, xr, yr)
        p1.sub_(g, alpha=1e-4)

    variants, auto = {}, "—"
    if k > 1:
        for name, (execution, chunk) in (("loop", ("vmap", 1)), ("vmap", ("vmap", k)), ("layers", ("layers", k))):
            sm, eng = make_engine("decent8", model, k, precision, device)
            if execution == "layers" and layers_mismatch(sm, eng.params(), x):
                continue
            sm.use(strategy_for(execution, chunk))
            variants[name] = eng
        sm, eng = make_engine("decent8", model, k, precision, device)
        auto = choose_chunk(sm, eng.params(), x, y, "auto", use_cache=False).spec  # as a training run does
        variants["auto"] = eng
        if legacy is not None:
            for name, args in (("legacy", ("decent8", model, k, precision, device, "decent8_legacy")),
                               ("old pkg", ("decent8_legacy", model, k, precision, device))):
                try:
                    eng = make_engine(*args)[1]
                    eng.train_step(x, y, 1e-4)
                    variants[name] = eng
                except Exception as e:  # e.g. no 8-bit MLP there
                    print(f"# {name} ({model}:{k}:{precision}) skipped: {type(e).__name__}: {e}", file=sys.stderr)
    fns = {"ref": ref_step, **{n: (lambda e=eng: e.train_step(x, y, 1e-4)) for n, eng in variants.items()}}
    n_steps = {n: steps_for(fn, steps, min_seconds, device) for n, fn in fns.items()}  # warm-up
    times: dict[str, list[float]] = {n: [] for n in fns}
    for _ in range(rounds):  # interleaved
        for name, fn in fns.items():
            times[name].append(timed(fn, n_steps[name], device))
    return {"model": model, "k": k, "precision": precision, "auto": auto,
            "median_s": {n: statistics.median(v) for n, v in times.items()}}


def run_cases_in_processes(cases: list[tuple[str, int, str]], args: argparse.Namespace) -> list[dict[str, object]]:
    """Each case in its own process (``--worker``: one thread, process CPU time), ``args.jobs``
    at a time, except two kinds that run alone: the small models (cnn, mlp: steps of a few
    ms, whose timings another job's cache traffic distorts by ±20 %) first, and the
    ResNet/VGG cases of ≥ 32 nodes (several GiB each) last. A case whose process dies
    (e.g. out of memory) gets a row saying so."""
    small = lambda case: case[0] in ("cnn", "mlp")  # noqa: E731
    heavy = lambda case: case[0] in ("resnet20", "vgg11") and case[1] >= 32  # noqa: E731
    alone = lambda case: small(case) or heavy(case)  # noqa: E731
    queue = ([c for c in cases if small(c)] + [c for c in cases if not alone(c)] + [c for c in cases if heavy(c)])
    results: dict[tuple[str, int, str], dict[str, object]] = {}
    running: list[tuple[tuple[str, int, str], subprocess.Popen]] = []
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    while queue or running:
        while queue and len(running) < args.jobs and not (running and (alone(queue[0]) or alone(running[0][0]))):
            case = queue.pop(0)
            cmd = [sys.executable, __file__, "--worker", ":".join(map(str, case)), "--rounds", str(args.rounds),
                   "--steps", str(args.steps), "--min-seconds", str(args.min_seconds), "--legacy-rev", args.legacy_rev,
                   "--device", args.device]
            running.append((case, subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)))
        time.sleep(1.0)
        for item in [r for r in running if r[1].poll() is not None]:
            running.remove(item)
            case, proc = item
            out = proc.stdout.read() if proc.stdout else ""
            rows = [json.loads(line[4:]) for line in out.splitlines() if line.startswith("ROW ")]
            results[case] = rows[0] if rows else {"model": case[0], "k": case[1], "precision": case[2],
                                                  "failed": f"process exited {proc.returncode}"}
            print(f"# {':'.join(map(str, case))}: " + (row(results[case]) if rows else results[case]["failed"]),
                  file=sys.stderr, flush=True)
    return [results[c] for c in cases]


def row(r: dict[str, object]) -> str:
    if "failed" in r:
        return f"| {r['model']} | {r['k']} | {r['precision']} | {r['failed']} (out of memory?) | | | | | | |"
    med = r["median_s"]
    ratio = lambda n: f"{med[n] / med['ref']:.2f}" if n in med else "—"  # noqa: E731
    auto = f"{ratio('auto')} ({r['auto']})" if "auto" in med else "—"
    return (f"| {r['model']} | {r['k']} | {r['precision']} | {med['ref']:.4f} | {ratio('loop')} | {ratio('vmap')} | "
            f"{ratio('layers')} | {auto} | {ratio('legacy')} | {ratio('old pkg')} |")


def process_table(k: int, steps: int, rounds: int, device: torch.device) -> None:
    """Wall clock, all threads, nothing else running: 8 ResNet-20 nodes three ways."""
    global CLOCK
    CLOCK = time.perf_counter
    model = "resnet20"
    r = measure_case(model, k, "fp32", rounds, steps, device, "", 0.0)
    dist = dist_step_time(model, k, steps * rounds)
    med = r["median_s"]
    print(f"\n{k} ResNet-20 nodes, one iteration (fp32, wall clock, {torch.get_num_threads()} threads; "
          f"distributed: {steps * rounds} steps after one warm-up)\n")
    print("| execution | s / iteration | ratio to 1 model on the same batch | speed-up of the simulator |")
    print("|---|---:|---:|---:|")
    for name, t in ((f"simulator, auto ({r['auto']})", med["auto"]), ("Python loop over the k models", med["loop"]),
                    (f"{k} processes, distributed backend (gloo)", dist)):
        print(f"| {name} | {t:.3f} | {t / med['ref']:.2f} | {t / med['auto']:.2f}× |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=DEFAULT_CASES, help="model:k pairs")
    ap.add_argument("--precisions", nargs="+", default=["fp32", "int8"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=1, help="timed iterations per measurement (at least)")
    ap.add_argument("--legacy-rev", default="5b6f763", help="git revision with the node-batched layers ('' = none)")
    ap.add_argument("--dist", action="store_true", help="also the process table: 8 ResNet-20 nodes as k gloo processes")
    ap.add_argument("--jobs", type=int, default=1, help="cases measured at a time (each: own process, one thread)")
    ap.add_argument("--min-seconds", type=float, default=0.3,
                    help="timed calls per measurement: at least --steps, and enough to last about this long")
    ap.add_argument("--worker", default="", help=argparse.SUPPRESS)  # model:k:precision, one case, prints ROW json
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--clock", choices=["auto", "wall", "cpu"], default="auto",
                    help="wall time, or this process's CPU time (auto: CPU time on a CPU device with 1 thread)")
    args = ap.parse_args()
    if SMOKE and not args.worker:
        args.cases, args.precisions, args.rounds, args.steps, args.min_seconds = ["mlp:4"], ["fp32"], 1, 1, 0.0
        args.legacy_rev, args.dist, args.jobs, args.device = "", False, 1, "cpu"
    device = torch.device(args.device)
    global CLOCK
    if args.worker:
        torch.set_num_threads(1)
        CLOCK = time.process_time
        m, k, p = args.worker.split(":")
        r = measure_case(m, int(k), p, args.rounds, args.steps, device, args.legacy_rev, args.min_seconds)
        print("ROW " + json.dumps(r), flush=True)
        return
    use_cpu = args.jobs > 1 or args.clock == "cpu" or (args.clock == "auto" and device.type == "cpu"
                                                        and torch.get_num_threads() == 1)
    CLOCK = time.process_time if use_cpu else time.perf_counter
    cases = [(c.split(":")[0], int(c.split(":")[1]), p) for c in args.cases for p in args.precisions]
    print(f"# decent8 {decent8.__version__}, torch {torch.__version__}, {device}, "
          f"{'1 thread per case, ' + str(args.jobs) + ' cases at a time' if args.jobs > 1 else str(torch.get_num_threads()) + ' threads'}, "
          f"legacy=decent8@{args.legacy_rev or 'n/a'}; median of {args.rounds} rounds × {args.steps} steps; "
          f"clock={'process CPU time' if use_cpu else 'wall'}; ratio to 1 model on the same total batch")
    print("# each variant: the run build(load_config(...)) constructs, then one override: sim.chunk (loop, vmap, "
          "layers, auto) or the stacked model of the legacy revision (legacy); old pkg: that revision's own build()")
    header = ["| model | k | precision | 1 model (s) | loop | vmap | layers | auto (choice) | legacy | old pkg |",
              "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    if args.jobs > 1:
        rows = run_cases_in_processes(cases, args)
        print("\n".join(header))
        for r in rows:
            print(row(r))
    else:
        print("\n".join(header))
        for m, k, p in cases:
            print(row(measure_case(m, k, p, args.rounds, args.steps, device, args.legacy_rev, args.min_seconds)),
                  flush=True)
    if args.dist:
        process_table(8, args.steps, args.rounds, device)


if __name__ == "__main__":
    main()
