"""The sweep engine behind ``decent8 sweep``: run a grid of configs or a paper preset, one run
folder per cell, and print a table.

The first argument may name a preset (``paper/table3_resnet20_ring8``, looked up under
``configs/``; see :mod:`decent8.experiments.presets`) or a config YAML. Grid axes are
overrides with comma-separated values (``skew=0,0.4,0.8``) and replace a preset's axis
of the same key (``skew=0.8`` fixes it); ``--cell`` adds alternatives that set several
options together (``--cell "algorithm=dpsgd compression=identity" --cell
"algorithm=choco compression=topk"``); ``scale=0.05`` shrinks every run for CPU.

Every cell is validated (config, data, model) before anything runs. Cells whose
summary.json exists are skipped, a cell with a checkpoint is resumed, a cell folder
holding a different config stops the sweep. ``--jobs N`` runs N cells at once, each
as ``python -m decent8 train`` with cores/N threads and a log in ``logs/``. The plan goes
to ``sweep.json``, results to results.csv / results.json / results.md; ``decent8
report`` turns the folder into the paper's tables and figures.
"""
from __future__ import annotations

import csv
import datetime as _dt
import io
import itertools
import json
import os
import re
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from ..config import EXECUTION_OPTIONS, apply_options, evolve, flatten, from_dict, load_config, to_dict, to_yaml
from ..errors import ConfigError, TrainingError
from ..text_table import format_table, human_bytes
from ..train.build import build
from ..train.loop import train
from ..train.resolve import resolve
from ..train.resume_trust import code_options
from ..train.run_dir import (CHECKPOINT, CONFIG, STALE_AFTER_S, SUMMARY, atomic_write_text, check_run_name,
                             foreign_entries, remove_own_folder, remove_stale_temporaries)
from ..train.user_metrics import user_keys
from .aggregate import format_mean_se
from .presets import Cell, Plan, cell_config, make_plan
from .report import AGGREGATED, build_report

_LIST_VALUE = re.compile(r"^\s*\[.*\]\s*$")
SWEEP_FILE = "sweep.json"


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
    grid = [list(a) + list(combo) for a in alt for combo in itertools.product(*axes)]
    seen: list[str] = []
    for k in keys:
        if k not in seen:
            seen.append(k)
    return fixed, grid, seen


#: options a cell folder's config may differ in and still be the same cell: how it runs, and where the data
#: files lie (a sweep resumed on another machine, or committed and continued from a fresh checkout)
_IGNORED = EXECUTION_OPTIONS | {"data.root", "data.cache_dir"}


def check_existing(run_dir: Path, cfg) -> None:
    """A cell folder left by an earlier sweep must hold the same config, or the sweep stops.
    Its config.yaml is resolved as the cell's is (``cfg``), so a folder written before an option
    existed, or under its older spelling, compares by what it ran (a missing
    ``compression.wire`` is ``auto``, resolved to the wire that run used). It is resolved only
    when it names the cell's own import paths (``pkg.module:name``): resolving imports them, and
    a module named only in a file on disk is never imported."""
    f = run_dir / CONFIG
    if not f.is_file():
        return
    new = flatten(to_dict(cfg))
    try:
        stored = yaml.safe_load(f.read_text())
        old = flatten(to_dict(from_dict(stored)))
        if all(new.get(k) == v for k, v in old.items() if isinstance(v, str) and ":" in v and k not in _IGNORED):
            old = flatten(to_dict(resolve(from_dict(stored))))
    except (ConfigError, yaml.YAMLError):
        old = None
    diff = [k for k in new if k not in _IGNORED and (old is None or old.get(k) != new[k])]
    if diff:
        raise ConfigError("name", f"{str(run_dir)!r} already holds a run of this cell with a different config "
                                  f"(differs in: {', '.join(diff[:5])}); pick another --name or remove that folder")


def default_sweep_name(plan: Plan) -> str:
    if plan.preset is not None:
        name = plan.preset.name.replace("/", "-")
        return name + (f"-scale{plan.scale:g}".replace(".", "p") if plan.scale is not None else "")
    return f"sweep-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


def write_plan(sweep_dir: Path, plan: Plan, argv: list[str], title: str | None = None) -> None:
    """``sweep.json``: the plan. A folder that already holds a plan of the same preset and
    base overrides keeps its cells: a part of the grid run later (``seed=1,2 comp=99``)
    adds to the plan, so ``decent8 report`` sees every cell and ``commands`` lists each run."""
    p = plan.preset
    cells = [{"name": c.name, "labels": c.labels, "overrides": c.overrides} for c in plan.cells]
    axes, commands = list(plan.axes), []
    command = ["decent8", "sweep", *argv]
    old = _read_plan(sweep_dir)
    if old and old.get("preset") == (p.name if p else None) and old.get("base_overrides") == plan.base:
        mine = {c["name"]: c for c in cells}  # planned cells keep their place; new ones go last
        kept = [mine.pop(c.get("name"), c) for c in old.get("cells", [])]
        cells = kept + list(mine.values())
        axes = list(old.get("axes") or []) + [a for a in axes if a not in (old.get("axes") or [])]
        commands = [c for c in old.get("commands") or [old.get("command")] if c and c != command]
    doc = {
        "preset": p.name if p else None, "preset_path": str(p.path) if p else None,
        "config": plan.config_path, "title": title or (p.title if p else None) or (old or {}).get("title"),
        "source": p.source if p else None,
        "scale": plan.scale, "axes": axes, "base_overrides": plan.base,
        "cells": cells,
        "report": p.report if p else {}, "paper": p.paper if p else [],
        **({k: v for k, v in p.extra.items()} if p else {}),
        "command": command, "commands": commands + [command],
    }
    atomic_write_text(sweep_dir / SWEEP_FILE, json.dumps(doc, indent=2, default=str) + "\n")


def _read_plan(sweep_dir: Path) -> dict | None:
    """The folder's ``sweep.json`` (None when missing or unreadable)."""
    try:
        doc = json.loads((sweep_dir / SWEEP_FILE).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def is_sweep_plan(doc: object) -> bool:
    """True for a ``sweep.json`` that ``decent8 sweep`` wrote (its command and its cells)."""
    if not isinstance(doc, dict) or "command" not in doc or not isinstance(doc.get("cells"), list):
        return False
    return all(isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("labels"), dict)
               for c in doc["cells"])


def check_sweep_folder(sweep_dir: Path) -> None:
    """A sweep writes only into a folder it creates, an empty one, or one holding its own
    ``sweep.json``: a user's folder of the same name keeps its results.csv, report.md …"""
    if not sweep_dir.is_dir() or not any(sweep_dir.iterdir()):
        return
    if not is_sweep_plan(_read_plan(sweep_dir)):
        raise ConfigError("--name", f"{str(sweep_dir)!r} holds files a decent8 sweep did not write (no sweep.json of "
                                    f"its own); a sweep writes only into its own folders: pick another --name or "
                                    f"out_dir")


#: a summary.json holds some of these (a regression run has no accuracy; an older one fewer keys)
_SUMMARY_KEYS = ("mean_node_accuracy", "mean_node_loss", "averaged_model_accuracy", "bytes_sent_per_node",
                 "decent8_version")


def read_summary(run_dir: Path) -> dict | None:
    """A cell's summary.json as decent8 writes it, or None when there is none; one line for
    a file that is not a decent8 summary (a sweep does not take it as a result)."""
    f = run_dir / SUMMARY
    if not f.exists():
        return None
    try:
        s = json.loads(f.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        s = None
    if not (isinstance(s, dict) and any(k in s for k in _SUMMARY_KEYS)):
        raise ConfigError("--name", f"{str(f)!r} is not the summary of a decent8 run; a sweep does not overwrite "
                                    f"it: pick another --name or out_dir, or move that folder away")
    return s


def check_clearable(run_dir: Path) -> None:
    """A cell folder without checkpoint or summary is cleared before the cell (re)starts;
    that is only allowed when decent8 wrote it: it holds decent8's config.yaml and only
    files decent8 writes into run folders. Anything else stops the sweep with one line."""
    if run_dir.is_symlink() or (run_dir.exists() and not run_dir.is_dir()):
        raise ConfigError("--name", f"{str(run_dir)!r} exists and is not a run folder; pick another --name or out_dir")
    if not run_dir.exists() or (run_dir / CHECKPOINT).exists() or (run_dir / SUMMARY).exists():
        return
    entries = list(run_dir.iterdir())
    if not entries:
        return
    foreign = foreign_entries(run_dir)
    if foreign or not (run_dir / CONFIG).is_file():
        what = ", ".join(foreign[:3]) + (" …" if len(foreign) > 3 else "") if foreign else f"no {CONFIG}"
        raise ConfigError("--name", f"{str(run_dir)!r} holds files decent8 did not write ({what}); the sweep would "
                                    f"have to replace that folder: pick another --name or out_dir, or move them away")


def _clear(run_dir: Path) -> None:
    """A cell that died before its first checkpoint starts over: its folder (decent8's
    own files only, see :func:`check_clearable`) is emptied and removed."""
    if not run_dir.exists():
        return
    check_clearable(run_dir)
    remove_own_folder(run_dir)


def _run_inline(cells: list, quiet: bool) -> dict[str, dict | str]:
    out: dict[str, dict | str] = {}
    for i, (cell, cfg, run_dir) in enumerate(cells):
        tag = f"[{i + 1}/{len(cells)}] {cell.label}"
        try:
            if (run_dir / CHECKPOINT).exists():
                print(f"{tag}: resuming", flush=True)
                # the cell's code (model=pkg.module:factory) is named by this sweep's command
                summary, _ = train(None, resume=run_dir, quiet=quiet, named_code=code_options(cfg))  # type: ignore[arg-type]
            else:
                _clear(run_dir)
                print(tag, flush=True)
                summary, _ = train(cfg, quiet=quiet)
            out[cell.name] = summary
        except TrainingError as e:
            print(f"{tag}: FAILED: {e}", flush=True)
            out[cell.name] = str(e)
    return out


def _run_parallel(cells: list, sweep_dir: Path, jobs: int) -> dict[str, dict | str]:
    threads = max(1, (os.cpu_count() or 1) // jobs)
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, str(threads))
    (sweep_dir / "logs").mkdir(parents=True, exist_ok=True)
    (sweep_dir / ".cells").mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    done = [0]

    def one(item) -> tuple[str, dict | str]:
        cell, cfg, run_dir = item
        log = sweep_dir / "logs" / f"{cell.name}.log"
        if (run_dir / CHECKPOINT).exists():
            restated = [f"{k}={v}" for k, v in code_options(cfg).items()]  # named by this sweep's command
            args, what = ["train", "--resume", str(run_dir), *restated, "--quiet"], "resumed"
        else:
            _clear(run_dir)
            cfg_file = sweep_dir / ".cells" / f"{cell.name}.yaml"
            atomic_write_text(cfg_file, to_yaml(evolve(cfg, {"progress": False})))
            args, what = ["train", str(cfg_file), "--quiet"], "started"
        with lock:
            print(f"  {cell.label}: {what} (log: {log})", flush=True)
        with open(log, "w", encoding="utf-8") as fh:
            rc = subprocess.run([sys.executable, "-m", "decent8", *args], stdout=fh, stderr=subprocess.STDOUT,
                                env=env).returncode
        summary_file = run_dir / SUMMARY
        with lock:
            done[0] += 1
            if rc == 0 and summary_file.exists():
                s = json.loads(summary_file.read_text())
                acc = s.get("mean_node_accuracy")
                what = f"{100 * acc:.2f} %" if isinstance(acc, (int, float)) else f"test loss {s.get('mean_node_loss')}"
                print(f"[{done[0]}/{len(cells)}] {cell.label}: {what}", flush=True)
                return cell.name, s
            tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-1:] or ["no output"]
            print(f"[{done[0]}/{len(cells)}] {cell.label}: FAILED (exit {rc}): {tail[0]}", flush=True)
            return cell.name, f"exit {rc}: {tail[0]}"

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return dict(pool.map(one, cells))


def planned_results(sweep_dir: Path, results: dict[str, dict | str]) -> tuple[list[str], list[tuple[Cell, dict]]]:
    """(axes, finished cells with their summaries) of every cell in the folder's plan:
    this command's results, and the summaries of cells that earlier commands ran."""
    doc = _read_plan(sweep_dir) or {}
    out = []
    for entry in doc.get("cells", []):
        cell = Cell(dict(entry.get("labels") or {}), list(entry.get("overrides") or []))
        summary = results.get(cell.name)
        if not isinstance(summary, dict):
            try:
                summary = read_summary(sweep_dir / cell.name)
            except ConfigError:  # not decent8's: not a result
                summary = None
            if summary is None:
                continue
        out.append((cell, summary))
    return list(doc.get("axes") or []), out


#: what every ± of the sweep's table is (printed under it, and in results.md)
SPREAD_NOTE = "± = standard error of the mean over the n seeds (s/√n); one run: no ±"


def results_table(axes: list[str], finished: list) -> tuple[str, list[str], list[list[str]]]:
    """One row per configuration; cells that differ only in ``seed`` aggregate to mean ± s.e.
    (s/√n, the same statistic as report.md; n its own column). A regression sweep shows its
    test RMSE and R² instead of accuracies. Returns (text table, headers, rows of strings)."""
    keys = [k for k in axes if k not in AGGREGATED]
    groups: dict[tuple, list[dict]] = {}
    for cell, s in finished:
        groups.setdefault(tuple(cell.labels.get(k, "") for k in keys), []).append(s)
    regression = not any(_numbers(ss, "mean_node_accuracy") for ss in groups.values()) and \
        any(_numbers(ss, "mean_node_rmse") for ss in groups.values())
    quality = (("mean node RMSE ± s.e.", "mean_node_rmse", 1.0), ("avg model R² ± s.e.", "averaged_model_r2", 1.0)) \
        if regression else (("mean node acc % ± s.e.", "mean_node_accuracy", 100.0),
                            ("avg model acc % ± s.e.", "averaged_model_accuracy", 100.0))
    first = next((s for ss in groups.values() for s in ss), {})   # the user's metrics (metrics=): their node means
    quality += tuple((f"mean node {k[len('mean_node_'):]} ± s.e.", k, 1.0) for k in user_keys(first)
                     if k.startswith("mean_node_"))
    headers = keys + ["n", *(q[0] for q in quality), "consensus dist", "bytes/node", "wall s"]
    rows = []
    for key, ss in groups.items():
        cd = _numbers(ss, "consensus_distance")
        rows.append(list(key) + [
            str(len(ss)),
            *(_mean_se(_numbers(ss, k), scale) for _, k, scale in quality),
            f"{sum(cd) / len(cd):.2e}" if cd else "n/a",
            human_bytes(sum(_numbers(ss, "bytes_sent_per_node")) / len(ss)),
            f"{sum(_numbers(ss, 'wall_time_s')) / len(ss):.1f}"])
    return format_table(headers, rows), headers, rows


def _numbers(summaries: list[dict], key: str) -> list[float]:
    """The values of ``key`` that are numbers (a regression run has no accuracy: None)."""
    return [s[key] for s in summaries if isinstance(s.get(key), (int, float)) and not isinstance(s.get(key), bool)]


def _mean_se(values: list[float], scale: float = 100.0) -> str:
    """Mean ± standard error of ``scale``·values (n is the table's own column)."""
    return format_mean_se([scale * v for v in values], show_n=False, single=2 if scale == 100.0 else 4) \
        if values else "n/a"


def markdown(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def run_sweep(args: list[str], cells: list[str] | tuple[str, ...] = (), *, name: str | None = None,
              title: str | None = None, jobs: int = 1, dry_run: bool = False, plan_only: bool = False,
              quiet: bool = False) -> int:
    """``decent8 sweep ARGS --cell CELL ... --name NAME``: validate every cell, run the ones not
    finished (in this process, or ``jobs`` at once as ``python -m decent8 train``), write the
    results and the report; 0, or 1 when a cell failed. ``args``: an optional preset name or
    config file, then ``key=value`` / ``key=v1,v2`` overrides (module docstring)."""
    if jobs < 1:
        raise ConfigError("--jobs", f"must be >= 1, got {jobs}")
    path, overrides = (args[0], list(args[1:])) if args and "=" not in args[0] else (None, list(args))
    plan = make_plan(path, overrides, list(cells))
    base = load_config(plan.config_path, plan.base)
    if base.backend != "simulator":
        raise ConfigError("backend", "a sweep runs its cells with backend=simulator; start distributed runs one at a "
                                     "time with `decent8 launch`")
    if name is not None:
        check_run_name(name, "--name")
    sweep_dir = Path(base.out_dir) / (name or default_sweep_name(plan))
    if sweep_dir.exists() and not sweep_dir.is_dir():
        raise ConfigError("--name", f"{str(sweep_dir)!r} exists and is not a folder")
    check_sweep_folder(sweep_dir)
    cfgs = []
    for cell in plan.cells:                 # validate every cell before anything runs
        cfg = apply_options(cell_config(plan, cell), {"out_dir": str(sweep_dir), "name": cell.name})
        cfg = build(cfg).cfg                # the resolved config (defaults filled): what config.yaml holds
        check_existing(sweep_dir / cell.name, cfg)
        check_clearable(sweep_dir / cell.name)
        read_summary(sweep_dir / cell.name)
        if not dry_run:  # a killed cell's temporaries (a live one's, of another session, are younger)
            remove_stale_temporaries(sweep_dir / cell.name, STALE_AFTER_S)
        cfgs.append((cell, cfg, sweep_dir / cell.name))
    heading = plan.preset.title if plan.preset else "sweep"
    print(f"{heading}: {len(cfgs)} cell{'s' if len(cfgs) != 1 else ''} over {', '.join(plan.axes) or 'no axes'}"
          + (f", scale {plan.scale:g} ({plan.unscaled_epochs} → {cfgs[0][1].epochs} epochs)" if plan.scale else "")
          + f" → {sweep_dir}", flush=True)
    if dry_run:
        rows = [[c.name, " ".join(c.overrides)] for c, _, _ in cfgs]
        print(format_table(["cell", "overrides"], rows))
        print("base: " + " ".join(plan.base))
        return 0
    write_plan(sweep_dir, plan, list(args) + (["--name", name] if name else []), title)
    if plan_only:
        planned = _read_plan(sweep_dir) or {}
        names = [c.get("name") for c in planned.get("cells", [])]
        done = sum((sweep_dir / str(n) / SUMMARY).exists() for n in names)
        print(f"plan written: {sweep_dir / SWEEP_FILE} ({len(names)} cells planned, {done} finished); "
              f"run the cells with the same command without --plan-only")
        return 0
    results: dict[str, dict | str] = {}
    todo = []
    for cell, cfg, run_dir in cfgs:
        done = read_summary(run_dir)
        if done is not None:
            print(f"  {cell.label}: done already, skipped")
            results[cell.name] = done
        else:
            todo.append((cell, cfg, run_dir))
    if todo:
        results.update(_run_inline(todo, quiet) if jobs == 1 else _run_parallel(todo, sweep_dir, jobs))
    failed = [c.label for c, _, _ in cfgs if not isinstance(results.get(c.name), dict)]
    axes, finished = planned_results(sweep_dir, results)
    table, headers, rows = results_table(axes, finished)
    print(table)
    print(SPREAD_NOTE)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(axes + ["mean_node_accuracy", "averaged_model_accuracy", "consensus_distance", "bytes_sent_per_node",
                  "spectral_gap", "wall_time_s", "run"])
    keys = axes
    for cell, s in finished:
        w.writerow([cell.labels.get(k, "") for k in keys] + [s.get(k) for k in (
                   "mean_node_accuracy", "averaged_model_accuracy", "consensus_distance", "bytes_sent_per_node",
                   "spectral_gap", "wall_time_s")] + [cell.name])
    atomic_write_text(sweep_dir / "results.csv", buf.getvalue())
    atomic_write_text(sweep_dir / "results.json", json.dumps(
        [{"cell": cell.overrides, "labels": cell.labels, "run": cell.name, **s} for cell, s in finished], indent=2) + "\n")
    atomic_write_text(sweep_dir / "results.md", markdown(headers, rows) + "\n" + SPREAD_NOTE + "\n")
    build_report(sweep_dir)       # report.md + figures/ (curves on shared axes, accuracy vs bytes, ...)
    print(f"sweep folder: {sweep_dir}   (report.md and figures/ written; redraw with: decent8 report {sweep_dir})")
    if failed:
        print(f"{len(failed)} cell{'s' if len(failed) != 1 else ''} failed: {'; '.join(failed)}", file=sys.stderr)
        return 1
    return 0
