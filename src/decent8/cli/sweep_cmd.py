"""``decent8 sweep``: run a grid of configs, one run folder per cell, and print a table.

Grid axes are overrides with comma-separated values (``skew=0,0.4,0.8``); ``--cell``
adds alternatives that set several options together (``--cell "algorithm=dpsgd
compression=identity" --cell "algorithm=choco compression=topk"``). Every cell is
validated before anything runs; cells whose summary.json exists are skipped, a cell
with a checkpoint is resumed. Results go to results.csv / results.json in the sweep
folder.
"""
from __future__ import annotations

import argparse
import csv
import datetime as _dt
import io
import itertools
import json
import re
from pathlib import Path

from ..config import load_config
from ..errors import ConfigError
from ..train.build import build
from ..train.loop import train
from ..train.run_dir import CHECKPOINT, SUMMARY, atomic_write_text
from .common import format_table, human_bytes
from .train_cmd import split_args

_LIST_VALUE = re.compile(r"^\s*\[.*\]\s*$")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run a grid of configs and print a results table",
                       description="e.g. `decent8 sweep --cell \"algorithm=dpsgd compression=identity\" "
                                   "--cell \"algorithm=choco compression=topk\" skew=0,0.9`")
    p.add_argument("args", nargs="*", help="an optional config.yaml, then key=value or key=v1,v2,... overrides")
    p.add_argument("--cell", action="append", default=[], metavar="\"k=v k=v\"",
                   help="one alternative that sets several options together (repeatable)")
    p.add_argument("--name", help="sweep folder name under out_dir (default: sweep-<time stamp>)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def expand(overrides: list[str], cells: list[str]) -> tuple[list[str], list[list[str]], list[str]]:
    """Fixed overrides, the list of cells (each a list of overrides) and the varying keys."""
    fixed: list[str] = []
    axes: list[list[str]] = []
    keys: list[str] = []
    for item in overrides:
        if "=" not in item:
            raise ConfigError("override", f"{item!r} is not of the form key=value")
        key, value = item.split("=", 1)
        if "," in value and not _LIST_VALUE.match(value):
            values = [v.strip() for v in value.split(",")]
            if any(v == "" for v in values):
                raise ConfigError(key, f"empty value in sweep list {value!r}")
            axes.append([f"{key}={v}" for v in values])
            keys.append(key)
        else:
            fixed.append(item)
    alt = [c.split() for c in cells] or [[]]
    for c in cells:
        keys = [k for k in (kv.split("=", 1)[0] for kv in c.split())] + keys
    grid = [list(a) + [x for part in combo for x in [part]] for a in alt for combo in itertools.product(*axes)] if axes else [list(a) for a in alt]
    seen: list[str] = []
    for k in keys:
        if k not in seen:
            seen.append(k)
    return fixed, grid, seen


def cell_name(cell: list[str]) -> str:
    if not cell:
        return "base"
    return "_".join(kv.replace("=", "-").replace("/", "-").replace(".", "p") for kv in cell)


def run(ns: argparse.Namespace) -> int:
    path, overrides = split_args(ns.args)
    fixed, grid, keys = expand(overrides, ns.cell)
    base = load_config(path, fixed)
    sweep_dir = Path(base.out_dir) / (ns.name or f"sweep-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}")
    cfgs = []
    for cell in grid:                       # validate every cell before anything runs
        cfg = load_config(path, fixed + cell)
        cfg.out_dir, cfg.name = str(sweep_dir), cell_name(cell)
        build(cfg)
        cfgs.append((cell, cfg))
    results = []
    for i, (cell, cfg) in enumerate(cfgs):
        run_dir = sweep_dir / cfg.name  # type: ignore[operator]
        label = " ".join(cell) or "base"
        if (run_dir / SUMMARY).exists():
            print(f"[{i + 1}/{len(cfgs)}] {label}: done already, skipped")
            summary = json.loads((run_dir / SUMMARY).read_text())
        elif (run_dir / CHECKPOINT).exists():
            print(f"[{i + 1}/{len(cfgs)}] {label}: resuming")
            summary, _ = train(None, resume=run_dir, quiet=ns.quiet)  # type: ignore[arg-type]
        else:
            if run_dir.exists():   # a cell that died before its first checkpoint: start it over
                for f in run_dir.iterdir():
                    f.unlink()
                run_dir.rmdir()
            print(f"[{i + 1}/{len(cfgs)}] {label}")
            summary, _ = train(cfg, quiet=ns.quiet)
        results.append((cell, summary))
    headers = keys + ["mean node acc %", "avg model acc %", "consensus dist", "bytes/node", "wall s"]
    rows = []
    for cell, s in results:
        values = dict(kv.split("=", 1) for kv in cell)
        rows.append([values.get(k, "") for k in keys] + [
            round(100 * s["mean_node_accuracy"], 2), round(100 * s["averaged_model_accuracy"], 2),
            s["consensus_distance"], human_bytes(s["bytes_sent_per_node"]), round(s["wall_time_s"], 1)])
    table = format_table(headers, rows)
    print(table)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(keys + ["mean_node_accuracy", "averaged_model_accuracy", "consensus_distance", "bytes_sent_per_node",
                       "spectral_gap", "wall_time_s", "run"])
    for cell, s in results:
        values = dict(kv.split("=", 1) for kv in cell)
        w.writerow([values.get(k, "") for k in keys] + [s["mean_node_accuracy"], s["averaged_model_accuracy"],
                   s["consensus_distance"], s["bytes_sent_per_node"], s["spectral_gap"], s["wall_time_s"], cell_name(cell)])
    atomic_write_text(sweep_dir / "results.csv", buf.getvalue())
    atomic_write_text(sweep_dir / "results.json", json.dumps([{"cell": c, **s} for c, s in results], indent=2) + "\n")
    atomic_write_text(sweep_dir / "results.md", table + "\n")
    print(f"sweep folder: {sweep_dir}")
    return 0
