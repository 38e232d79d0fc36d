"""8-bit vs FP32 decentralized training on digits (the default main-job config).

Runs ``decent8 train [precision=int8] skew=S seed=R`` for every precision × skew ×
seed (the defaults: 8 nodes, directed ring, Choco-SGD, 99 % top-k, 60 epochs, CNN),
in parallel worker processes, and prints the mean node accuracy (SPEC §8: each
node's own model after the final consensus rounds), averaged over seeds, with the
averaged-model accuracy and the bytes each node sent.

    python benchmarks/lowprec_digits.py --seeds 0 1 2 --skews 0 0.8 --jobs 2
    python benchmarks/lowprec_digits.py --extra compression=identity   # dense messages
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def run_one(args: tuple[str, float, int, list[str], str, str]) -> dict:
    precision, skew, seed, extra, out_dir, tag = args
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    from decent8.config import load_config
    from decent8.train.loop import train

    name = f"{precision}-s{skew:g}-seed{seed}" + (f"-{tag}" if tag else "")
    overrides = [f"precision={precision}", f"skew={skew}", f"seed={seed}", f"name={name}", f"out_dir={out_dir}",
                 "checkpoint=false", "progress=false", *extra]
    summary, _ = train(load_config(None, overrides), quiet=True)
    return {"precision": precision, "skew": skew, "seed": seed, "extra": extra, **{
        k: summary[k] for k in ("mean_node_accuracy", "averaged_model_accuracy", "bytes_sent_per_node",
                                "message_bytes", "compression", "epochs", "wall_time_s")}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--skews", type=float, nargs="+", default=[0.0, 0.8])
    ap.add_argument("--precisions", nargs="+", default=["fp32", "int8"])
    ap.add_argument("--extra", nargs="*", default=[], help="more key=value overrides for every run")
    ap.add_argument("--tag", default="", help="suffix of the run folder names")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out-dir", default="runs/lowprec_digits")
    ap.add_argument("--json", default=None, help="write all results here")
    a = ap.parse_args()
    if os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0"):  # one 1-epoch run: a check that it runs
        a.seeds, a.skews, a.precisions, a.jobs, a.json = [0], [0.0], ["fp32"], 1, None
        a.out_dir, a.extra = os.path.join(os.environ.get("DECENT8_BENCH_TMP", "/tmp"), "lowprec-smoke"), ["epochs=1"]
    tasks = [(p, s, r, list(a.extra), a.out_dir, a.tag) for s in a.skews for p in a.precisions for r in a.seeds]
    with ProcessPoolExecutor(a.jobs) as ex:
        results = list(ex.map(run_one, tasks))
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    print(f"overrides: {' '.join(a.extra) or '(defaults)'}; seeds {a.seeds}")
    print("| skew | precision | mean node acc. (%) | avg-model acc. (%) | bytes/node | per seed |")
    print("|---:|---|---:|---:|---:|---|")
    for s in a.skews:
        accs = {}
        for p in a.precisions:
            rs = [r for r in results if r["skew"] == s and r["precision"] == p]
            acc = [100 * r["mean_node_accuracy"] for r in rs]
            avg = [100 * r["averaged_model_accuracy"] for r in rs]
            accs[p] = statistics.mean(acc)
            sd = statistics.stdev(acc) if len(acc) > 1 else 0.0
            print(f"| {s:g} | {p} | {statistics.mean(acc):.2f} ± {sd:.2f} | {statistics.mean(avg):.2f} | "
                  f"{rs[0]['bytes_sent_per_node']:.0f} | " + " ".join(f"{v:.2f}" for v in acc) + " |")
        if "fp32" in accs and "int8" in accs:
            print(f"| | int8−fp32 | {accs['int8'] - accs['fp32']:+.2f} points | | | |")


if __name__ == "__main__":
    main()
