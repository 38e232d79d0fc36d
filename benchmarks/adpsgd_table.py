"""Time-to-accuracy table of the AD-PSGD study (docs/results/adpsgd.md).

    python benchmarks/adpsgd_table.py docs/results/adpsgd

For each run folder ``<algo>-<setting>-seed<s>``: the simulated time (sim_time_s) of the
first evaluation whose mean node accuracy reaches each target, the final accuracies, the
run's simulated time and, for AD-PSGD, the staleness; then mean ± std over seeds.
"""
from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

TARGETS = (0.8, 0.9)


def first_time(rows: list[dict], key: str, target: float) -> float:
    for r in rows:
        if r.get(key) is not None and r[key] >= target:
            return float(r["sim_time_s"])
    return float("nan")


def fmt(v: list[float], digits: int = 3) -> str:
    a = np.asarray(v, dtype=float)
    if np.isnan(a).any():
        return f"not reached ({int(np.isnan(a).sum())}/{len(a)})" if np.isnan(a).all() else \
            f"{np.nanmean(a):.{digits}f} ({int((~np.isnan(a)).sum())}/{len(a)} reached)"
    return f"{a.mean():.{digits}f} ± {a.std():.{digits}f}" if len(a) > 1 else f"{a[0]:.{digits}f}"


def main(folder: str) -> None:
    cells: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for run in sorted(Path(folder).iterdir()):
        m = re.match(r"(\w+)-(\w+)-seed(\d+)$", run.name)
        if not m or not (run / "summary.json").exists():
            continue
        rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        s = json.loads((run / "summary.json").read_text())
        cells[(m.group(2), m.group(1))].append({"rows": rows, "summary": s})
    head = ["setting", "algorithm", "seeds"] + [f"time to {int(t * 100)} % (s)" for t in TARGETS] + \
        ["final mean node acc. (%)", "final averaged model (%)", "sim time, 30 epochs (s)", "staleness node / global (mean)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join([" --- "] * 2 + [" ---: "] * (len(head) - 2)) + "|")
    for (setting, algo), runs in sorted(cells.items()):
        tta = [fmt([first_time(r["rows"], "mean_node_accuracy", t) for r in runs]) for t in TARGETS]
        acc = fmt([100 * r["summary"]["mean_node_accuracy"] for r in runs], 2)
        avg = fmt([100 * r["summary"]["averaged_model_accuracy"] for r in runs], 2)
        sim = fmt([r["summary"]["sim_time_s"] for r in runs])
        a = [r["summary"].get("asynchronous") for r in runs]
        st = "–" if a[0] is None else f"{np.mean([x['staleness_node_mean'] for x in a]):.2f} / " \
                                     f"{np.mean([x['staleness_global_mean'] for x in a]):.1f}"
        print(f"| {setting} | {algo} | {len(runs)} | " + " | ".join(tta) + f" | {acc} | {avg} | {sim} | {st} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/results/adpsgd")
