"""The table of docs/results/topologies.md from the finished cells of the topology sweep.

    python benchmarks/topologies_table.py docs/results/topologies > docs/results/topologies_table.md

Per topology (10 Mbit/s cells; mean ± sample standard deviation over the seeds): mean node and
averaged-model accuracy after the final consensus rounds, bytes sent per node, the run's
simulated time sim_time_s at 10 and 1000 Mbit/s, spectral gap (measured rate for random
graphs), consensus distance; then, at the last epoch before the consensus rounds, the mean,
worst and 10th-percentile node accuracy and the personalized accuracy (each node's test set
reweighted to its own label distribution).
"""
from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ORDER = ["ring", "torus", "exponential", "one_peer_exp", "base2", "erdos_renyi4", "matching"]
LABEL = {"ring": "ring", "torus": "torus 4×8", "exponential": "exponential (static)",
         "one_peer_exp": "one-peer exponential", "base2": "Base-2", "erdos_renyi4": "Erdős–Rényi, E[deg] = 4",
         "matching": "random matching"}


def fmt(values: list[float], scale: float = 100.0, digits: int = 2) -> str:
    if not values:
        return "—"
    m = statistics.fmean(values) * scale
    if len(values) == 1:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ± {statistics.stdev(values) * scale:.{digits}f}"


def main(folder: str) -> None:
    cells = defaultdict(lambda: defaultdict(list))
    for s in sorted(Path(folder).glob("topology-*/summary.json")):
        name = s.parent.name
        topo = name.split("_bw-")[0].removeprefix("topology-")
        bw = name.split("_bw-")[1].split("_seed-")[0]
        d = json.loads(s.read_text())
        cells[(topo, bw)]["acc"].append(d["mean_node_accuracy"])
        cells[(topo, bw)]["avg"].append(d["averaged_model_accuracy"])
        cells[(topo, bw)]["min"].append(d["min_node_accuracy"])
        cells[(topo, bw)]["p10"].append(d["p10_node_accuracy"])
        cells[(topo, bw)]["pers"].append(d["mean_personalized_accuracy"])
        cells[(topo, bw)]["bytes"].append(d["bytes_sent_per_node"])
        cells[(topo, bw)]["sim"].append(d["sim_time_s"])
        cells[(topo, bw)]["gap"].append(d["spectral_gap"])
        cells[(topo, bw)]["cd"].append(d["consensus_distance"])
        rows = [json.loads(x) for x in (s.parent / "metrics.jsonl").read_text().splitlines() if x.strip()]
        last = rows[-1]   # the evaluation at the last epoch, before the final consensus rounds
        for key, col in (("mean_node_accuracy", "acc0"), ("min_node_accuracy", "min0"),
                         ("p10_node_accuracy", "p100"), ("mean_personalized_accuracy", "pers0"),
                         ("min_personalized_accuracy", "pmin0")):
            cells[(topo, bw)][col].append(last[key])
    print("| topology | seeds | mean node acc. (%) | averaged model (%) | MB sent / node | sim time 10 Mbit/s (s) "
          "| sim time 1000 Mbit/s (s) | gap / rate | consensus dist. |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for t in ORDER:
        c10, c1000 = cells.get((t, "10"), {}), cells.get((t, "1000"), {})
        if not c10:
            continue
        print(f"| {LABEL[t]} | {len(c10['acc'])} | {fmt(c10['acc'])} | {fmt(c10['avg'])} "
              f"| {fmt(c10['bytes'], 1e-6, 2)} | {fmt(c10['sim'], 1, 2)} "
              f"| {fmt(c1000.get('sim', []), 1, 3)} | {statistics.fmean(c10['gap']):.4f} "
              f"| {statistics.fmean(c10['cd']):.2e} |")
    print()
    print("Before the final consensus rounds (the evaluation at the last epoch, metrics.jsonl), 10 Mbit/s cells:")
    print()
    print("| topology | mean node acc. (%) | worst node (%) | 10th pct node (%) | personalized, mean (%) "
          "| personalized, worst node (%) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for t in ORDER:
        c10 = cells.get((t, "10"), {})
        if not c10:
            continue
        print(f"| {LABEL[t]} | {fmt(c10['acc0'])} | {fmt(c10['min0'])} | {fmt(c10['p100'])} | {fmt(c10['pers0'])} "
              f"| {fmt(c10['pmin0'])} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/results/topologies")
