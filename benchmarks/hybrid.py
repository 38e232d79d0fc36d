"""Node blocks over torch.distributed ranks on this machine (comm/block.py; docs/hybrid.md).

For each case (n nodes, R gloo ranks, block placement): R local processes, each holding
n/R nodes of a digits-sized model (width 16) as one stacked model (node-batched layers,
``sim.chunk=layers:min(k, 1024)``), run Choco-SGD (99 % top-k,
fp32 values) on the ring — forward, backward, local Nesterov momentum, compression,
the exchange (in-block edges mixed locally, one message per rank pair) — on random
batches of 16 samples per node. Reported per case: seconds per iteration (median over
the timed steps, the slowest rank), peak resident memory per rank (the largest rank's
ru_maxrss), and the bytes between ranks per iteration (measured at the send calls,
all ranks). R = 1 is the same code with no rank to talk to.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/hybrid.py                 # the issue's table
    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/hybrid.py --cases 64:1 64:2 --model cnn
    PYTHONPATH=src python benchmarks/hybrid.py --plan                            # 100,000 nodes over 64 GPUs

``--plan`` prints the time model's plan for n = 100,000 nodes over 64 GPUs (SPEC §12,
docs/hybrid.md).

Each rank builds its block as ``decent8 train`` does (``build(load_config(None, [...]))`` with
``backend=distributed dist.ranks=R dist.placement=block``, random images of the digits shape).
``DECENT8_BENCH_SMOKE=1``: 8 nodes on 2 ranks, 1 step, and the plan (a check that it runs).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
SMOKE = os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0")
DEFAULT_CASES = ["64:1", "64:2", "1024:1", "1024:2", "4096:1", "4096:2"]


def worker(out: str, n: int, model: str, steps: int) -> None:
    """One rank: its block of the ring, Choco top-k, ``steps`` timed iterations."""
    import torch.distributed as dist

    from decent8.config import load_config
    from decent8.data.dataset import ArrayDataset
    from decent8.models.strategies import strategy_for
    from decent8.train.build import build
    from decent8.train.engine import Engine

    R = int(os.environ["WORLD_SIZE"])
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    xs = torch.randn(n * 16, 1, 8, 8, generator=torch.Generator().manual_seed(0))  # digits-shaped random images
    data = ArrayDataset(xs, torch.arange(n * 16) % 10, xs[:10], torch.arange(10), 10, [str(c) for c in range(10)],
                        "random")
    c = build(load_config(None, [f"nodes={n}", "backend=distributed", f"dist.ranks={R}", "dist.placement=block",
                                 f"model={model}", "model.width=16", "topology=ring", "algorithm=choco",
                                 "compression=topk", "compression.ratio=0.99", "algorithm.gamma=0.05",
                                 "optimizer.kind=local", "optimizer.momentum=0.9", "optimizer.nesterov=true",
                                 "optimizer.weight_decay=1e-4", "data.batch_size=16", "device=cpu", "seed=0",
                                 "dist_timeout_s=600"]), dataset=data)
    comm, sm, comp = c.comm, c.model, c.compressor
    sm.use(strategy_for("layers", min(comm.k, 1024)))   # node-batched layers (sim.chunk=layers:N)
    engine = Engine(sm, c.algorithm, c.optimizer, comm, c.x0)
    g = torch.Generator().manual_seed(comm.rank)
    x, y = torch.randn(comm.k, 16, 1, 8, 8, generator=g), torch.randint(0, 10, (comm.k, 16), generator=g)
    engine.train_step(x, y, 0.05)                      # warm-up (plans, buffers, vmap tracing)
    times, wire0 = [], comm.wire_bytes
    for _ in range(steps):
        comm.barrier()
        t0 = time.perf_counter()
        engine.train_step(x, y, 0.05)
        times.append(time.perf_counter() - t0)
    rec = {"rank": comm.rank, "k": comm.k, "dim": sm.dim, "step_s": statistics.median(times),
           "wire_bytes_per_step": (comm.wire_bytes - wire0) / steps,
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "rss_before_mb": rss0 / 1024,
           "chunk": sm.chunk, "crossing_edges": comm.crossing_edges(0), "payload_bytes": comp.nbytes()}
    Path(out, f"rank{comm.rank}.json").write_text(json.dumps(rec))
    comm.barrier()
    dist.destroy_process_group()


def run_case(n: int, ranks: int, model: str, steps: int) -> dict:
    from decent8.cli.launch_cmd import LocalNodes

    out = tempfile.mkdtemp(prefix=f"hybrid-{n}-{ranks}-")
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    group = LocalNodes(ranks, [sys.executable, __file__, "--worker", out, str(n), model, str(steps)], log_dir=out,
                       env=env)
    while any(c is None for c in group.poll()):
        time.sleep(0.1)
    group.close()
    if group.poll() != [0] * ranks:
        raise SystemExit(Path(out, "node0.log").read_text()[-3000:])
    recs = [json.loads(Path(out, f"rank{r}.json").read_text()) for r in range(ranks)]
    return {"n": n, "ranks": ranks, "model": model, "dim": recs[0]["dim"],
            "step_s": max(r["step_s"] for r in recs), "peak_rss_mb": max(r["peak_rss_mb"] for r in recs),
            "bytes_between_ranks_per_step": sum(r["wire_bytes_per_step"] for r in recs),
            "crossing_edges": recs[0]["crossing_edges"], "payload_bytes": recs[0]["payload_bytes"],
            "expected_bytes": recs[0]["crossing_edges"] * recs[0]["payload_bytes"]}


# ---------------------------------------------------------------- the 100k-node plan
def plan(n: int = 100_000, gpus: int = 64, samples_per_node: int = 500, batch: int = 32,
         model_flops_per_sample: float = 3 * 2 * 0.0411e9, params: int = 272_474, tflops: float = 60.0,
         hbm_gb_s: float = 2000.0, link_gbit_s: float = 100.0, latency_s: float = 5e-6,
         keep: float = 0.01, value_bytes: int = 4, index_bytes: int = 4, state_passes: float = 12.0) -> dict:
    """Per-iteration and per-epoch time of n nodes over ``gpus`` GPUs (SPEC §12).

    Model: ResNet-20 (``params``; forward ≈ 41 M multiply-adds per 32×32 image, training
    ≈ 3 × forward, 2 FLOPs per multiply-add); each node holds ``samples_per_node``
    images and takes ``batch`` per step (an epoch = every node's shard once =
    samples_per_node / batch steps). Choco-SGD with top-k keeping 1 % (fp32 values +
    int32 indices) on a ring. Assumptions (arguments): ``tflops`` sustained per GPU,
    ``hbm_gb_s`` memory bandwidth, GPU-to-GPU links of ``link_gbit_s`` and ``latency_s``.

    * compute per GPU and step: k · batch · FLOPs / throughput, k = ⌈n / gpus⌉;
    * in-block mixing and the [k, d] state updates: ``state_passes`` passes over the
      k × d fp32 state (parameters, gradient, momentum, x̂, residual, messages) at HBM
      bandwidth (the memory floor of benchmarks/scale.py);
    * between GPUs, block placement: a ring crosses each GPU boundary once per direction,
      so a GPU sends one payload to each neighbouring GPU per step: α + 2·b/β (shared
      uplink), b = one node's payload; random placement: almost every edge crosses, a
      GPU sends 2k payloads per step: α + 2k·b/β;
    * Marsit / ring all-reduce over all n nodes: 2(n − 1) synchronous hops, each at
      least α (+ its chunk): the latency alone, whatever the placement.
    """
    k = -(-n // gpus)
    compute = k * batch * model_flops_per_sample / (tflops * 1e12)
    memory = state_passes * k * params * 4 / (hbm_gb_s * 1e9)
    payload = int(params * keep) * (value_bytes + index_bytes)
    beta = link_gbit_s * 1e9 / 8
    network_block = latency_s + 2 * payload / beta
    network_random = latency_s + 2 * k * payload / beta
    step = compute + memory + network_block
    steps_per_epoch = -(-samples_per_node // batch)
    allreduce_hops = 2 * (n - 1)
    return {"n": n, "gpus": gpus, "nodes_per_gpu": k, "compute_s": compute, "memory_s": memory,
            "network_block_s": network_block, "network_random_s": network_random, "step_s": step,
            "share_compute": compute / step, "share_memory": memory / step, "share_network": network_block / step,
            "steps_per_epoch": steps_per_epoch, "epoch_s": step * steps_per_epoch,
            "epoch_random_placement_s": (compute + memory + network_random) * steps_per_epoch,
            "payload_bytes": payload, "bytes_between_gpus_per_step_block": 2 * gpus * payload,
            "bytes_between_gpus_per_step_random": 2 * n * payload * (gpus - 1) / gpus,
            "state_gb_per_gpu": state_passes / 2 * k * params * 4 / 1e9,
            "allreduce_latency_floor_s_per_step": allreduce_hops * latency_s,
            "gpu_hours_per_epoch": gpus * step * steps_per_epoch / 3600}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="*", default=DEFAULT_CASES, help="n:R, e.g. 1024:2")
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--plan", action="store_true", help="print the 100,000-node plan only")
    p.add_argument("--json", type=Path, help="also write the rows here")
    a = p.parse_args()
    if SMOKE:
        a.cases, a.steps = ["8:2"], 1
        print("| plan | value |\n|---|---|")
        print("\n".join(f"| {k} | {v} |" for k, v in plan().items()))
    if a.plan:
        print(json.dumps(plan(), indent=1))
        return
    rows = []
    print("| n | R | model (d) | s / iteration | peak RSS / rank (MB) | bytes between ranks / iteration | crossing edges × payload |")
    print("|---|---|---|---|---|---|---|")
    for case in a.cases:
        n, R = (int(v) for v in case.split(":"))
        r = run_case(n, R, a.model, a.steps)
        rows.append(r)
        print(f"| {n} | {R} | {r['model']} ({r['dim']}) | {r['step_s']:.4f} | {r['peak_rss_mb']:.0f} | "
              f"{r['bytes_between_ranks_per_step']:.0f} | {r['crossing_edges']} × {r['payload_bytes']} = "
              f"{r['expected_bytes']} |", flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
