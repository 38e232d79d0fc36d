"""Gossip exchange time on the distributed backend: N local gloo processes, directed ring.

Per iteration, every process sends its ResNet-20-sized message (d = 272,474 fp32
parameters in the 65 tensors of a CIFAR ResNet-20 with 1×1-conv shortcuts) to its
successor, receives its predecessor's, decodes and mixes
(``DistributedCommunicator.exchange``) — for dense FP32 (identity), dense 8-bit
(quantize) and 99 % top-k (fp32 values + int16 indices). Next to it: one plain
``dist.all_reduce`` of the dense FP32 model, what data-parallel SGD would do instead.
An iteration's time is the slowest process's; the table shows the median (and p90)
over ``--iters`` iterations after ``--warmup``.

    python benchmarks/comm_loopback.py                    # 4 processes, 30 iterations
    python benchmarks/comm_loopback.py --nodes 8 --iters 50

Encoding (compression) time is reported separately: it is compute, not communication.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

from decent8.layout import ParamLayout


def resnet20_layout() -> ParamLayout:
    """The parameter tensors of a CIFAR ResNet-20 (BatchNorm, 1×1-conv shortcuts): 272,474."""
    shapes: list[tuple[str, tuple[int, ...]]] = [("conv1", (16, 3, 3, 3)), ("bn1.w", (16,)), ("bn1.b", (16,))]
    cin = 16
    for s, cout in enumerate((16, 32, 64)):
        for b in range(3):
            p = f"layer{s + 1}.{b}"
            first_in = cin if b == 0 else cout
            shapes += [(f"{p}.conv1", (cout, first_in, 3, 3)), (f"{p}.bn1.w", (cout,)), (f"{p}.bn1.b", (cout,)),
                       (f"{p}.conv2", (cout, cout, 3, 3)), (f"{p}.bn2.w", (cout,)), (f"{p}.bn2.b", (cout,))]
            if b == 0 and first_in != cout:
                shapes += [(f"{p}.short", (cout, first_in, 1, 1)), (f"{p}.short_bn.w", (cout,)), (f"{p}.short_bn.b", (cout,))]
        cin = cout
    shapes += [("fc.w", (10, 64)), ("fc.b", (10,))]
    return ParamLayout(shapes)


CASES = [("dense FP32", "identity", {}), ("dense int8", "quantize", {}), ("top-k 99 %", "topk", {"ratio": 0.99})]


def slowest(seconds: float) -> float:
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def worker(iters: int, warmup: int) -> None:
    from decent8.comm.distributed import DistributedCommunicator
    from decent8.compression import make_compressor
    from decent8.topology import make_topology

    n = int(os.environ["WORLD_SIZE"])
    comm = DistributedCommunicator(make_topology("directed_ring", n), "cpu", timeout_s=120)
    layout = resnet20_layout()
    wire: list[float] = []
    transfer = comm._transfer

    def timed_transfer(*args, **kwargs):  # the send/receive part of an exchange
        t0 = time.perf_counter()
        transfer(*args, **kwargs)
        wire.append(time.perf_counter() - t0)

    comm._transfer = timed_transfer  # type: ignore[method-assign]
    x = torch.randn(1, layout.dim, generator=torch.Generator().manual_seed(comm.rank))
    rows = []
    for label, name, kw in CASES:
        comp = make_compressor(name, layout, **kw)
        times, enc, dec, wires = [], [], [], []
        before = comm.bytes_sent.item()
        for i in range(warmup + iters):
            t0 = time.perf_counter()
            payload = comp.encode(x)
            t1 = time.perf_counter()
            own = comp.decode(payload)  # the algorithms decode their own message anyway
            t2 = time.perf_counter()
            comm.barrier()
            t0_x = time.perf_counter()
            comm.exchange(payload, comp, step=i, decoded=own)
            t = slowest(time.perf_counter() - t0_x)
            w = slowest(wire[-1])
            if i >= warmup:
                times.append(t)
                wires.append(w)
                enc.append(slowest(t1 - t0))
                dec.append(slowest(t2 - t1))
        per_iter = (comm.bytes_sent.item() - before) / (warmup + iters)
        rows.append((label, per_iter, times, (wires, enc, dec)))
    y = x[0].clone()
    times = []
    for i in range(warmup + iters):
        comm.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(y)
        t = slowest(time.perf_counter() - t0)
        if i >= warmup:
            times.append(t)
    rows.append(("all_reduce FP32 (dense)", 4.0 * layout.dim, times, None))
    if comm.is_main:
        ref = statistics.median(rows[-1][2])
        print(f"{n} gloo processes on one host, directed ring, d = {layout.dim:,} ({len(layout)} tensors), "
              f"torch {torch.__version__}, {torch.get_num_threads()} thread(s) per process, "
              f"median of {iters} iterations ({warmup} warm-up)")
        print("| message | bytes/node/iter | exchange ms | p90 ms | vs all_reduce | of it wire ms | encode ms | decode ms |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for label, nbytes, ts, codec in rows:
            med = statistics.median(ts)
            p90 = sorted(ts)[int(0.9 * (len(ts) - 1))]
            extra = (" | ".join(f"{1e3 * statistics.median(c):.2f}" for c in codec) if codec else "- | - | -")
            print(f"| {label} | {nbytes:,.0f} | {1e3 * med:.2f} | {1e3 * p90:.2f} | {med / ref:.2f}× | {extra} |")
        print("exchange = post sends and receives, wait, decode the neighbour's message, mix with W "
              "(own message decoded before, as the algorithms do); wire: its send/receive part; "
              "encode/decode: one message, not part of the exchange; all_reduce: one dist.all_reduce of the dense model")
    comm.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0"):  # a check that it runs
        a.nodes, a.iters, a.warmup = 2, 2, 1
    if a.worker:
        worker(a.iters, a.warmup)
        return 0
    from decent8.cli.launch_cmd import LocalNodes

    group = LocalNodes(a.nodes, [sys.executable, os.path.abspath(__file__), "--worker",
                                 "--iters", str(a.iters), "--warmup", str(a.warmup)])
    codes, first, _ = group.wait(grace_s=10)
    return 0 if first is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
