"""Evaluation cost by evaluation batch size: k stacked node models on one test set, CPU.

An evaluation (docs/algorithms.md §8) runs every node's model and the averaged model on
the whole test set: k + 1 forwards per test image. On CIFAR-10 with ResNet-20 and 8 nodes
that is 90,000 image-forwards, about 5 minutes on one core of the 2-core machine — three
evaluations are about a third of a findings cell (docs/results/cifar10_findings.md). This prints
the process CPU time per image-forward of ``StackedModel.logits`` for several samples per
call (``data.eval_batch_size``), the sizes interleaved round by round, median over rounds,
and the largest difference of the logits from the largest size's (the same math; the
conv kernels may sum in another order).

    python benchmarks/eval_batch.py                          # fp32 and int8, k = 8, 1 thread
    python benchmarks/eval_batch.py --sizes 128 1024 --images 2048 --rounds 5
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from decent8.models import StackedModel, init_parameters, make_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256, 512, 1024])
    ap.add_argument("--precisions", nargs="+", default=["fp32", "int8"])
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--images", type=int, default=1024, help="test images per timed evaluation")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", default="resnet20")
    ap.add_argument("--image", type=int, default=32)
    a = ap.parse_args()
    if os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0"):  # tiny sizes: a check that it runs
        a.sizes, a.precisions, a.nodes, a.images, a.rounds, a.image = [8, 16], ["fp32"], 2, 16, 1, 8
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    x = torch.randn(a.images, 3, a.image, a.image)
    rows = []
    for prec in a.precisions:
        module = make_model(a.model, (3, a.image, a.image), 10, precision=prec)
        init_parameters(module, 0)
        sm = StackedModel(module, nodes=a.nodes)
        params = sm.flat_parameters().unsqueeze(0).repeat(a.nodes, 1)
        params += 1e-3 * torch.randn_like(params)  # k different models
        with torch.no_grad():
            ref = sm.logits(params, x, chunk=max(a.sizes))
            times: dict[int, list[float]] = {s: [] for s in a.sizes}
            diffs: dict[int, float] = {}
            for _ in range(a.rounds):
                for s in a.sizes:
                    t0 = time.process_time()
                    out = sm.logits(params, x, chunk=s)
                    times[s].append(time.process_time() - t0)
                    diffs[s] = (out - ref).abs().max().item()
        for s in a.sizes:
            rows.append((prec, s, 1e3 * statistics.median(times[s]) / (a.images * a.nodes), diffs[s]))
    print(f"{a.model}, {a.nodes} nodes, {a.images} images of {a.image} px, {a.threads} thread(s), "
          f"median of {a.rounds} interleaved rounds (process CPU time)")
    print("| precision | batch | ms / image-forward | vs largest | max abs logit diff |\n|---|---:|---:|---:|---:|")
    for prec in a.precisions:
        mine = [r for r in rows if r[0] == prec]
        base = next(r[2] for r in mine if r[1] == max(a.sizes))
        for _, s, ms, d in mine:
            print(f"| {prec} | {s} | {ms:.3f} | {ms / base:.2f}x | {d:.1e} |")


if __name__ == "__main__":
    main()
