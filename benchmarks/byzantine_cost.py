"""Cost of each robust mixing rule per gossip round (docs/results/byzantine.md, "Cost").

    OMP_NUM_THREADS=1 python benchmarks/byzantine_cost.py [--repeats 30]

Builds the study's runs (digits, 16 nodes, D-PSGD; ring and 4x4 torus) through
``build(load_config(...))``, each with one defence and no attacker, and times one gossip round
(``algorithm.step``: the per-edge exchange plus the rule) against plain gossip (no
``byzantine.*``: one W-product), in process CPU time, the median over ``--repeats`` rounds.
Models: the study's 32-wide MLP (d = 3,466) and the digits CNN (d = 9,930), to show how each
rule grows with d. A second table adds one Byzantine node (node 0) and each attack to
ClippedGossip on the torus: what crafting the messages costs on top of the rule. One thread: on the shared machine the CPU time of this process is what it costs.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from decent8.config import load_config
from decent8.train.build import build

RULES = ["clipped_gossip", "self_centered_clipping", "trimmed_mean", "median"]
ATTACKS = ["sign_flip", "alie", "dissensus"]
GRAPHS = {"ring": ["topology=ring"], "torus": ["topology=torus", "topology.rows=4", "topology.cols=4"]}
MODELS = {"mlp32": ["model=mlp", "model.width=32"], "cnn": ["model=cnn"]}
BASE = ["data.name=digits", "nodes=16", "device=cpu", "algorithm=dpsgd", "compression=identity", "progress=false",
        "checkpoint=false", "tensorboard=false", "byzantine.b=1"]


def round_cpu_ms(overrides: list[str], repeats: int) -> tuple[int, float]:
    c = build(load_config(None, [*BASE, *overrides]))
    z = torch.randn(16, c.model.dim, generator=torch.Generator().manual_seed(0))
    c.algorithm.init_state(z)
    c.algorithm.step(z, 0)                   # warm-up (plans, caches)
    times = []
    for t in range(repeats):
        start = time.process_time()
        c.algorithm.step(z, t + 1)
        times.append(time.process_time() - start)
    return c.model.dim, 1e3 * statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print("| model (d) | graph | plain gossip | " + " | ".join(RULES) + " |")
    print("|---|---|" + "---:|" * (len(RULES) + 1))
    for mname, mov in MODELS.items():
        for gname, gov in GRAPHS.items():
            d, plain = round_cpu_ms([*mov, *gov], args.repeats)
            cells = []
            for rule in RULES:
                if rule == "trimmed_mean" and gname == "ring":
                    cells.append("refused")
                    continue
                _, ms = round_cpu_ms([*mov, *gov, f"byzantine.aggregator={rule}"], args.repeats)
                cells.append(f"{ms:.2f} ({ms / plain:.1f}×)")
            print(f"| {mname} ({d:,}) | {gname} | {plain:.2f} | " + " | ".join(cells) + " |", flush=True)
    print("\n| model (d) | clipped_gossip, no attacker | " + " | ".join(f"+ 1 {a} node" for a in ATTACKS) + " |")
    print("|---|---:|" + "---:|" * len(ATTACKS))
    for mname, mov in MODELS.items():
        run = [*mov, *GRAPHS["torus"], "byzantine.aggregator=clipped_gossip"]
        d, base = round_cpu_ms(run, args.repeats)
        cells = [f"{round_cpu_ms([*run, 'byzantine.nodes=[0]', f'byzantine.attack={a}'], args.repeats)[1]:.2f}"
                 for a in ATTACKS]
        print(f"| {mname} ({d:,}) | {base:.2f} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
