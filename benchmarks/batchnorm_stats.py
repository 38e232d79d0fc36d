"""BatchNorm running statistics under non-IID data: each ``model.norm_stats`` option,
node and averaged-model accuracy before and after the final consensus rounds
(docs/results/batchnorm_stats.md).

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/batchnorm_stats.py --out /tmp/bnstats \
        --epochs 20 --seeds 0 1 2
    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/batchnorm_stats.py --out /tmp/bnstats-dpsgd \
        --epochs 10 --seeds 0 1 2 --partitions dirichlet -- algorithm=dpsgd compression=identity topology=ring

Digits, 16 nodes, Choco-SGD with 99 % top-k on the directed ring (the defaults; extra
options after ``--`` change them), the BatchNorm CNN of examples/bn_cnn.py, partitions
Dirichlet α = 0.3 and skew 0.9. Runs that already have a summary.json are not run again.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

PARTITIONS = {"dirichlet α=0.3": ["partition=dirichlet", "partition.alpha=0.3"],
              "skew 0.9": ["partition=skew", "skew=0.9"]}
OPTIONS = ["local", "gossip", "average"]


def run(out: Path, name: str, args: list[str], epochs: int, extra: list[str]) -> dict:
    folder = out / name
    if not (folder / "summary.json").is_file():
        cmd = [sys.executable, "-m", "decent8", "train", "model=examples.bn_cnn:make_net", "nodes=16",
               f"epochs={epochs}", "eval_every=5", f"out_dir={out}", f"name={name}", "checkpoint=false",
               "tensorboard=false", "sim.chunk=1", "--quiet", *extra, *args]
        print(" ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return json.loads((folder / "summary.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/bnstats")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--md", default=None, help="write the Markdown table here")
    ap.add_argument("--partitions", nargs="+", default=["dirichlet", "skew"], choices=["dirichlet", "skew"])
    ap.add_argument("extra", nargs="*", help="more `decent8 train` options for every run")
    a = ap.parse_args()
    if os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0"):  # one 1-epoch run: a check that it runs
        a.out = os.path.join(os.environ.get("DECENT8_BENCH_TMP", "/tmp"), "bnstats-smoke")
        a.epochs, a.seeds, a.partitions, a.md = 1, [0], ["skew"], None
        OPTIONS[:] = ["local"]
    out = Path(a.out)
    lines = ["| partition | model.norm_stats | node acc. before | node acc. after | averaged before | "
             "averaged after | node change per seed | consensus distance after | bytes / node |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for pname, pargs in PARTITIONS.items():
        if pname.split()[0] not in a.partitions:
            continue
        for opt in OPTIONS:
            cells = []
            for seed in a.seeds:
                tag = pname.split()[0]
                s = run(out, f"{tag}-{opt}-seed{seed}", [*pargs, f"model.norm_stats={opt}", f"seed={seed}"], a.epochs, a.extra)
                b = s["before_consensus_rounds"]
                cells.append((b["mean_node_accuracy"], s["mean_node_accuracy"], b["averaged_model_accuracy"],
                              s["averaged_model_accuracy"], s["consensus_distance"], s["bytes_sent_per_node"]))

            def ms(i: int) -> str:
                v = [100 * c[i] for c in cells]
                return f"{statistics.mean(v):.1f} ± {statistics.stdev(v) if len(v) > 1 else 0:.1f}"
            change = [100 * (c[1] - c[0]) for c in cells]
            lines.append(f"| {pname} | {opt} | {ms(0)} | {ms(1)} | {ms(2)} | {ms(3)} | "
                         f"{' / '.join(f'{d:+.1f}' for d in change)} | "
                         f"{statistics.mean(c[4] for c in cells):.3g} | {statistics.mean(c[5] for c in cells) / 1e3:.0f} KB |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.md:
        Path(a.md).write_text(text)


if __name__ == "__main__":
    main()
