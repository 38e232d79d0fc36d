"""8 bits with 99 % top-k on CIFAR-10: FP32 against 8 bits on the 8-bit wire, on the float32
wire and with EvoNorm-S0 (docs/results/cifar10_findings.md, "8 bits with top-k").

    python benchmarks/cifar10_wire_figure.py [SWEEP_FOLDER] [FIGURE]

(defaults: docs/results/cifar10_fast and docs/results/cifar10_findings/figures/int8_topk_wire.png;
a smoke run, ``DECENT8_BENCH_SMOKE=1``, writes its figure under ``DECENT8_BENCH_TMP``).

Reads each finished cell's summary.json and labels (sweep.json) of the Choco-SGD, skew 0
cells of the preset ``paper/cifar10_findings_fast`` and prints a markdown table per group —
mean node accuracy after the final consensus rounds (mean, sample s.d., seeds) and consensus
distance — then draws both per seed: accuracy (mean ± s.e., dots: seeds) and consensus
distance (log scale).
"""
from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

from decent8.figstyle import new_figure, save, set_title, styled
from decent8.figstyle.axes import honest_ylim, log_axis, spread

REPO = Path(__file__).resolve().parents[1]
#: (comp label, precision) → group name, in the figure's order
GROUPS = {("99", "fp32"): "FP32",
          ("99", "int8"): "8-bit, 8-bit wire",
          ("99-fp32wire", "int8"): "8-bit, float32 wire",
          ("99-evonorm", "int8"): "8-bit, EvoNorm-S0"}


def load(folder: Path) -> dict[str, list[tuple[int, float, float]]]:
    """Group name → [(seed, accuracy %, consensus distance)] of the finished cells."""
    plan = json.loads((folder / "sweep.json").read_text())
    out: dict[str, list[tuple[int, float, float]]] = {name: [] for name in GROUPS.values()}
    for cell in plan["cells"]:
        lab = cell["labels"]
        name = GROUPS.get((str(lab.get("comp")), str(lab.get("precision"))))
        summary = folder / cell["name"] / "summary.json"
        if name is None or str(lab.get("algorithm")) != "choco" or float(lab.get("skew", 0)) != 0 or not summary.exists():
            continue
        s = json.loads(summary.read_text())
        out[name].append((int(lab["seed"]), 100.0 * s["mean_node_accuracy"], float(s["consensus_distance"])))
    return {k: sorted(v) for k, v in out.items() if v}


def table(groups: dict[str, list[tuple[int, float, float]]]) -> str:
    lines = ["| cells (Choco, skew 0, 99 % top-k) | mean node acc. (%) | s.d. | seeds | consensus distance (median; range) |",
             "|---|---:|---:|---:|---|"]
    for name, rows in groups.items():
        acc = [a for _, a, _ in rows]
        dist = [d for _, _, d in rows]
        sd = f"{statistics.stdev(acc):.2f}" if len(acc) > 1 else "—"
        lines.append(f"| {name} | {statistics.mean(acc):.2f} | {sd} | {len(acc)} | "
                     f"{statistics.median(dist):.3g}; {min(dist):.3g}–{max(dist):.3g} |")
    return "\n".join(lines)


@styled
def plot(groups: dict[str, list[tuple[int, float, float]]], path: Path) -> None:
    fig = new_figure(8.0, 3.6)
    acc_ax, dist_ax = fig.subplots(1, 2)
    names = list(groups)
    values: list[float] = []
    for i, name in enumerate(names):
        acc = [a for _, a, _ in groups[name]]
        m, sd, n = spread(acc)
        acc_ax.plot([i], [m], "o", color="C0", markersize=8)
        acc_ax.plot([i + 0.12] * n, acc, ".", color="C0", alpha=0.6, markersize=5)
        if sd is not None:
            acc_ax.errorbar([i], [m], yerr=[sd / n ** 0.5], fmt="none", color="C0")
        values += acc
        dist_ax.plot([i] * n, [d for _, _, d in groups[name]], "o", color="C1", alpha=0.7, markersize=5)
    for ax in (acc_ax, dist_ax):
        ax.set_xticks(range(len(names)), [f"{n.replace(', ', ',' + chr(10))}\n(n = {len(groups[n])})" for n in names])
        ax.set_xlim(-0.5, len(names) - 0.5)
        ax.grid(False, axis="x")
    honest_ylim(acc_ax, values, values)
    acc_ax.set_ylabel("mean node accuracy (%)")
    acc_ax.set_title("accuracy (mean ± s.e., dots: seeds)", fontsize="medium")
    dist_ax.set_ylabel("consensus distance")
    log_axis(dist_ax, "y")
    dist_ax.set_title("consensus distance after the rounds (per seed)", fontsize="medium")
    set_title(fig, "CIFAR-10, ResNet-20, 8 nodes, Choco-SGD 99 % top-k, 5 epochs at 16 px")
    save(fig, path)


def main() -> None:
    smoke = bool(os.environ.get("DECENT8_BENCH_SMOKE"))
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs/results/cifar10_fast"
    default = (Path(os.environ["DECENT8_BENCH_TMP"]) if smoke else REPO / "docs/results/cifar10_findings/figures")
    figure = Path(sys.argv[2]) if len(sys.argv) > 2 else default / "int8_topk_wire.png"
    groups = load(folder)
    plot(groups, figure)
    print(table(groups))
    print(f"\n(figure: {figure})")


if __name__ == "__main__":
    main()
