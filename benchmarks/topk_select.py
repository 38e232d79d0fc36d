"""Top-k selection time per slot size, and the whole 99 % top-k encode, of the runs
`decent8 train` builds (the compressor of ``build(load_config(...))``).

For each case (the MLP at 256 nodes, ResNet-20 at 8 nodes) and each distinct slot size
n of its layout (G slots of that size): ``torch.topk`` of ``|x|`` on the ``[k, G, n]``
rows against :func:`decent8.compression.topk.top_indices`, and the compressor's
``encode`` of the whole ``[k, d]`` state (normal random values). Process CPU time, one
thread, medians of ``--reps`` interleaved repetitions (torch.topk, top_indices, encode,
torch.topk, …); with ``--threads N`` (N > 1) the wall clock at N torch threads. ``--before SRC`` also times another source tree's ``top_indices`` and
``encode`` (a ``git worktree``'s ``src``), in a child process per repetition, alternating
with this tree's.

    OMP_NUM_THREADS=1 python benchmarks/topk_select.py [--reps 7] [--before /tmp/old/src] [--threads 2]
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

CASES = {
    "mlp-256": ["model=mlp", "nodes=256"],
    "resnet20-8": ["model=resnet20", "nodes=8", "data.name=tensors", "data.batch_size=32", "topology=ring"],
}


def _median_ms(fn, reps: int) -> float:  # type: ignore[no-untyped-def]
    import torch
    clock = time.process_time if torch.get_num_threads() == 1 else time.perf_counter
    ts = []
    for _ in range(reps):
        t0 = clock()
        fn()
        ts.append(clock() - t0)
    return 1e3 * statistics.median(ts)


def measure(options: list[str], reps: int, inner: int, threads: int = 1) -> dict:
    """Per slot size: torch.topk and top_indices (ms); the encode of the whole state (ms)."""
    import torch

    from decent8.compression.topk import top_indices
    from decent8.config import load_config
    from decent8.train.build import build

    torch.set_num_threads(threads)
    c = build(load_config(None, ["epochs=1", "progress=false", "device=cpu", *options]))
    comp = c.algorithm.compressor
    k = c.cfg.nodes
    x = torch.randn(k, comp.layout.dim, generator=torch.Generator().manual_seed(0))
    rows: dict[str, list[float]] = {}
    for n, keep, slots in comp.size_groups:
        if keep == n:
            continue
        xs = comp._group_view(x, n, slots)
        for name, fn in (("topk", lambda xs=xs, keep=keep: torch.topk(xs.abs(), keep, dim=2, sorted=False)),
                         ("select", lambda xs=xs, keep=keep: top_indices(xs, keep, magnitude=True))):
            rows.setdefault(f"{n}x{len(slots)}:{keep}:{name}", []).append(_median_ms(fn, inner))
    encode = _median_ms(lambda: comp.encode(x), inner)
    return {"groups": {key: min(v) for key, v in rows.items()}, "encode_ms": encode, "k": k, "d": comp.layout.dim}


def run_child(src: Path, options: list[str], inner: int, threads: int = 1) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps([options, inner, threads])], env=env, cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{options} failed in {src}:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions (one process each)")
    ap.add_argument("--inner", type=int, default=7, help="timed calls per repetition (median)")
    ap.add_argument("--before", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (above 1: wall clock)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        options, inner, threads = json.loads(a.child)
        print(json.dumps(measure(options, 1, inner, threads)))
        return
    from product_step import cifar_like_tensors
    data = [f"data.path={cifar_like_tensors(Path(tempfile.mkdtemp(prefix='decent8-topk-')))}"]
    trees = [("now", ROOT / "src")] + ([("before", a.before.resolve())] if a.before else [])
    print("| case | slot size × slots : kept | tree | torch.topk (ms) | top_indices (ms) | ratio |")
    print("|---|---|---|---:|---:|---:|")
    encodes = []
    for case in a.cases:
        options = CASES[case] + (data if "data.name=tensors" in CASES[case] else [])
        res: dict[str, list[dict]] = {t: [] for t, _ in trees}
        for _ in range(a.reps):
            for tree, src in trees:
                res[tree].append(run_child(src, options, a.inner, a.threads))
        for tree, _ in trees:
            groups = res[tree][0]["groups"]
            for key in sorted({key.rsplit(":", 1)[0] for key in groups}, key=lambda s: -int(s.split("x")[0])):
                tk = statistics.median(r["groups"][f"{key}:topk"] for r in res[tree])
                sel = statistics.median(r["groups"][f"{key}:select"] for r in res[tree])
                print(f"| {case} | {key.replace(':', ' : ')} | {tree} | {tk:.2f} | {sel:.2f} | {sel / tk:.2f} |")
            r0 = res[tree][0]
            encodes.append((case, tree, r0["k"], r0["d"], statistics.median(r["encode_ms"] for r in res[tree])))
    print("\n| case | state | tree | encode (ms) |\n|---|---|---|---:|")
    for case, tree, k, d, ms in encodes:
        print(f"| {case} | [{k}, {d}] | {tree} | {ms:.2f} |")


if __name__ == "__main__":
    main()
