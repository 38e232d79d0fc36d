"""Tables and figures of the Byzantine study (docs/results/byzantine.md).

    python benchmarks/byzantine_table.py docs/results/byzantine docs/results/byzantine_figures [docs/results/byzantine_choco]

(the folders are the defaults: the D-PSGD sweep, the figures and the Choco-SGD sweep; a smoke run,
``DECENT8_BENCH_SMOKE=1``, writes its figures under ``DECENT8_BENCH_TMP``).

Reads each sweep's plan (sweep.json) and each cell's summary.json, and writes what the tables read
into the sweep folder's ``cells.csv`` (per cell: finished or diverged, honest accuracy, honest
consensus distance, wall time). A sweep folder without its cell folders (the repository keeps only
the plan and this digest; ``benchmarks/byzantine_study.sh`` reruns the cells) is read from
``cells.csv``. A cell of the plan whose
folder exists without a summary stopped with an error (run this when no cell is running):
the study's only such error is "training diverged" (the sweep's FAILED lines,
docs/results/byzantine_failures.txt), drawn at chance (10 %) and written "div.". Honest accuracy: ``honest_mean_node_accuracy`` (the cells with no Byzantine node and
the mean rule run plain gossip, whose nodes are all honest: ``mean_node_accuracy``).
Prints markdown tables (mean ± sample std over seeds, n) and writes one figure per graph and
skew: honest accuracy against the fraction of Byzantine nodes, a panel per attack, a line
per defence (the Choco-SGD sweep: ``honest_accuracy_choco_torus_skew0p8.png``). A rule a graph
refuses (trimmed_mean needs in-degree ≥ 2b + 1 = 3: the ring and the Erdős–Rényi graph) is
written "refused".
"""
from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

from decent8.figstyle import new_figure, save, series_style, set_axes_title, set_title, styled
from decent8.figstyle.axes import spread

DEFENCES = ["mean", "clipped_gossip", "trimmed_mean", "self_centered_clipping"]
ATTACKS = ["sign_flip", "alie", "dissensus"]
COUNTS = ["0", "1", "2", "4"]
NODES = 16
CHANCE = 0.10
#: (graph, rule) pairs the rule's assumption refuses in every cell (byzantine.b=1)
REFUSED = {("ring", "trimmed_mean"), ("er", "trimmed_mean")}
#: the graphs' overrides (configs/paper/byzantine_digits16.yaml) and their names in the text
GRAPHS = {"ring": ["topology=ring"], "torus": ["topology=torus", "topology.rows=4", "topology.cols=4"],
          "er": ["topology=edge_list", "topology.path=configs/paper/byzantine_er16.edges", "topology.undirected=true",
                 "topology.weights=metropolis"]}
GRAPH_NAMES = {"ring": "ring", "torus": "4x4 torus", "er": "Erdős–Rényi"}


#: the digest of a sweep's cells that the tables and figures read (one row per started cell)
DIGEST = "cells.csv"
DIGEST_COLUMNS = ["cell", "status", "honest_mean_node_accuracy", "honest_consensus_distance", "wall_time_s"]


def read_cells(folder: Path) -> dict[str, dict]:
    """Cell name -> its digest row, for every started cell of the sweep in ``folder``: from the
    cell folders where any exists (and then written to ``folder/cells.csv``), else from that file."""
    plan = json.loads((folder / "sweep.json").read_text())
    names = [cell["name"] for cell in plan["cells"]]
    if not any((folder / n).is_dir() for n in names):
        with open(folder / DIGEST, newline="", encoding="utf-8") as f:
            return {row["cell"]: row for row in csv.DictReader(f)}
    rows: dict[str, dict] = {}
    for name in names:
        run = folder / name
        if (run / "summary.json").exists():
            s = json.loads((run / "summary.json").read_text())
            acc = s.get("honest_mean_node_accuracy")
            acc = s.get("mean_node_accuracy") if acc is None else acc
            cd = s.get("honest_consensus_distance")
            cd = s.get("consensus_distance") if cd is None else cd
            rows[name] = {"cell": name, "status": "finished", "honest_mean_node_accuracy": repr(acc),
                          "honest_consensus_distance": repr(cd), "wall_time_s": repr(s["wall_time_s"])}
        elif run.exists():             # started, no summary: the sweep's "FAILED: training diverged"
            rows[name] = {"cell": name, "status": "diverged", "honest_mean_node_accuracy": "",
                          "honest_consensus_distance": "", "wall_time_s": ""}
    buf = io.StringIO()
    w = csv.DictWriter(buf, DIGEST_COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(rows.values())
    (folder / DIGEST).write_text(buf.getvalue(), encoding="utf-8")
    return rows


def load(folder: Path) -> dict[tuple, list]:
    """(graph, skew, byz, attack, defence) -> [(seed, honest acc | None for diverged, consensus distance)]."""
    plan = json.loads((folder / "sweep.json").read_text())
    cells = read_cells(folder)
    out: dict[tuple, list] = defaultdict(list)
    for cell in plan["cells"]:
        lab, row = cell["labels"], cells.get(cell["name"])
        key = (lab["graph"], lab.get("skew", "0.8"), lab["byz"], lab["attack"], lab["defence"])
        if row is None:
            continue
        if row["status"] == "finished":
            out[key].append((lab["seed"], float(row["honest_mean_node_accuracy"]),
                             float(row["honest_consensus_distance"])))
        else:
            out[key].append((lab["seed"], None, None))
    return out


def cell_text(runs: list) -> str:
    if not runs:
        return "—"
    div = sum(a is None for _, a, _ in runs)
    accs = [100 * a for _, a, _ in runs if a is not None]
    if not accs:
        return f"div. ({div}/{len(runs)})"
    m, s, n = spread(accs)
    text = f"{m:.1f}" + (f" ± {s:.1f}" if s is not None else "") + (f" (n={n})" if n > 1 else "")
    return text + (f", div. {div}/{len(runs)}" if div else "")


def defences(data: dict) -> list[str]:
    """The rules the sweep ran or refused, in :data:`DEFENCES` order."""
    graphs = {k[0] for k in data}
    return [d for d in DEFENCES if any(k[4] == d for k in data) or any((g, d) in REFUSED for g in graphs)]


def cell_or_refused(data: dict, key: tuple) -> str:
    return "refused" if (key[0], key[4]) in REFUSED else cell_text(data.get(key, []))


def tables(data: dict, algorithm: str = "") -> str:
    lines = []
    rules = defences(data)
    order = {"torus": 0, "er": 1, "ring": 2}
    for graph, skew in sorted({(k[0], k[1]) for k in data}, key=lambda t: (order.get(t[0], 3), t[1] != "0.8")):
        lines.append(f"\n**{algorithm}{GRAPH_NAMES.get(graph, graph)}, skew {skew}** — honest accuracy (%), "
                     f"mean ± std over seeds\n")
        lines.append("| attack | Byzantine | " + " | ".join(rules) + " |")
        lines.append("|---|---|" + "---:|" * len(rules))
        base = [cell_or_refused(data, (graph, skew, "0", "none", d)) for d in rules]
        lines.append("| none | 0 | " + " | ".join(base) + " |")
        for attack in ATTACKS:
            for byz in COUNTS[1:]:
                row = [cell_or_refused(data, (graph, skew, byz, attack, d)) for d in rules]
                if all(r in ("—", "refused") for r in row):
                    continue
                lines.append(f"| {attack} | {byz} ({100 * int(byz) / NODES:.1f} %) | " + " | ".join(row) + " |")
    return "\n".join(lines)


@styled
def figure(data: dict, graph: str, skew: str, path: Path, algorithm: str = "D-PSGD") -> None:
    fig = new_figure(10.5, 4.0)
    axes = fig.subplots(1, len(ATTACKS), sharey=True)
    for ax, attack in zip(axes, ATTACKS):
        for i, d in enumerate(DEFENCES):
            xs, ys, errs, div_x = [], [], [], []
            for byz in COUNTS:
                runs = data.get((graph, skew, byz, "none" if byz == "0" else attack, d), [])
                if not runs:
                    continue
                vals = [100 * (a if a is not None else CHANCE) for _, a, _ in runs]
                m, s, _ = spread(vals)
                xs.append(100 * int(byz) / NODES)
                ys.append(m)
                errs.append(s or 0.0)
                if any(a is None for _, a, _ in runs):
                    div_x.append((xs[-1], m))
            if not xs:
                continue
            st = series_style(i)
            ax.errorbar(xs, ys, yerr=errs, label=d, capsize=2, **st)
            for x, y in div_x:
                ax.plot([x], [y], marker="x", color="black", markersize=9, linestyle="none")
        ax.set_xlabel("Byzantine nodes of 16")
        ax.set_xticks([100 * int(c) / NODES for c in COUNTS],
                      [f"{c}\n{100 * int(c) / NODES:g} %" for c in COUNTS])
        ax.set_ylim(0, 100)
        ax.axhline(100 * CHANCE, color="grey", linewidth=0.8, linestyle=":")
        set_axes_title(ax, attack)
    axes[0].set_ylabel("honest mean node accuracy (%)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(DEFENCES), fontsize=8)
    set_title(fig, f"digits, 16 nodes, {algorithm}, {GRAPH_NAMES.get(graph, graph)}, skew {skew}: honest accuracy vs attackers "
                   f"(x: a run diverged, drawn at chance; bars: std over seeds)")
    save(fig, path)


def wall_times(folder: Path) -> str:
    """Mean wall time of a whole run (120 steps and one evaluation) per graph and defence, over
    every finished cell: a rough view on a shared machine (other processes ran beside it)."""
    if not (folder / "sweep.json").exists():
        return "(no sweep)"
    plan = json.loads((folder / "sweep.json").read_text())
    cells = read_cells(folder)
    times: dict[tuple, list] = defaultdict(list)
    for cell in plan["cells"]:
        row = cells.get(cell["name"])
        if row is not None and row["status"] == "finished":
            times[(cell["labels"]["graph"], cell["labels"]["defence"])].append(float(row["wall_time_s"]))
    lines = ["| graph | " + " | ".join(DEFENCES) + " |", "|---|" + "---:|" * len(DEFENCES)]
    for graph in sorted({g for g, _ in times}):
        row = [f"{sum(v) / len(v):.1f} s (n={len(v)})" if (v := times.get((graph, d))) else "—" for d in DEFENCES]
        lines.append(f"| {graph} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def true_b() -> str:
    """Per graph, count and seed: the Byzantine nodes (picked by the run seed) and the most
    Byzantine in-neighbours an honest node has, against the b = 1 every defence assumes."""
    from decent8.byzantine.setup import pick_nodes
    from decent8.config import load_config
    from decent8.train.build import build
    lines = ["| graph | Byzantine | seed 0 | seed 1 | seed 2 |", "|---|---|---|---|---|"]
    for graph, ov in GRAPHS.items():
        c = build(load_config(None, ["data.name=digits", "model=mlp", f"nodes={NODES}", "algorithm=dpsgd",
                                     "compression=identity", "progress=false", "checkpoint=false",
                                     "tensorboard=false", *ov]))
        w = c.topology.weights_np(0)
        for count in COUNTS[1:]:
            cells = []
            for seed in range(3):
                ids = pick_nodes(int(count), NODES, seed)
                b = max(sum(1 for j in ids if w[i, j] > 0) for i in range(NODES) if i not in ids)
                cells.append(f"{ids}: b = {b}")
            lines.append(f"| {GRAPH_NAMES[graph]} | {count} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/results/byzantine")
    default_figs = (Path(os.environ["DECENT8_BENCH_TMP"]) / "byzantine_figures" if os.environ.get("DECENT8_BENCH_SMOKE")
                    else Path("docs/results/byzantine_figures"))
    figs = Path(sys.argv[2]) if len(sys.argv) > 2 else default_figs
    choco_folder = Path(sys.argv[3] if len(sys.argv) > 3 else "docs/results/byzantine_choco")
    data = load(folder)
    choco = load(choco_folder) if (choco_folder / "sweep.json").exists() else {}
    print(tables(data))
    if choco:
        print(tables(choco, "Choco-SGD top-k 10 %, "))
    print("\nwall time per run (s)\n" + wall_times(folder))
    print("\nwall time per run (s), Choco-SGD\n" + wall_times(choco_folder))
    print("\nByzantine nodes and the true b\n" + true_b())
    figs.mkdir(parents=True, exist_ok=True)
    for graph, skew in sorted({(k[0], k[1]) for k in data}):
        figure(data, graph, skew, figs / f"honest_accuracy_{graph}_skew{skew.replace('.', 'p')}.png")
    for graph, skew in sorted({(k[0], k[1]) for k in choco}):
        figure(choco, graph, skew, figs / f"honest_accuracy_choco_{graph}_skew{skew.replace('.', 'p')}.png",
               "Choco-SGD top-k 10 %")


if __name__ == "__main__":
    main()
