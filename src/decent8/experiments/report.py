"""``decent8 report``: a sweep folder as the paper's tables and figures.

Reads ``sweep.json`` (the plan written by ``decent8 sweep``; without it, the cells are
recovered from the run folders' ``config.yaml``) and each cell's ``summary.json``,
``metrics.jsonl`` and ``partition.csv``, and writes into the sweep folder:

* ``report.md`` — a markdown table in the paper's layout: the constant row prefix
  (model / graph / nodes), the row axes (compression, skew), one column per method
  (DS, LP-DS, Choco, LP-Choco, …), each cell ``ours [paper]`` in % when the preset has
  the paper's number, plus the data each node sent (GB, FP / LP);
* ``figures/accuracy_vs_skew.png`` (Figures 4–6): accuracy vs skew, one panel per
  compression, solid = full precision, dashed = 8-bit, the paper's numbers as crosses;
* ``figures/fp32_vs_int8.png``: FP32 beside 8-bit for every other setting, mean ± s.e.
  over the seeds, the seeds as dots;
* ``figures/validation_error.png`` (Figure 1): validation error vs epoch per cell
  (per normalization layer for the Figure 1 preset);
* ``figures/class_distribution.png`` (Figure 2): samples of each class per node, one
  panel per degree of skew.

Cells that have not finished show as ``—``; a report can be drawn while a sweep runs.
PNGs are drawn with matplotlib's Agg canvas (no pyplot state) and written atomically.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml

from ..algorithms import display_name, display_order
from ..atomic import atomic_write_text
from ..atomic import save_figure as _save_figure
from ..config import EXECUTION_OPTIONS, flatten
from ..errors import ConfigError
from ..train.run_dir import STALE_AFTER_S, remove_stale_temporaries
from ..train.plots import Group, plot_accuracy_vs_bytes, plot_groups
from . import findings
from .aggregate import format_mean_se, mean_std
from .presets import canonical_label

SWEEP_FILE = "sweep.json"
METRICS = {"mean_node": "mean_node_accuracy", "averaged": "averaged_model_accuracy"}
_AXIS_TITLES = {"comp": "Comp. (%)", "skew": "Degree of skew", "model.norm": "Norm", "nodes": "Nodes",
                "algorithm": "Algorithm", "precision": "Precision"}
AGGREGATED = ("seed",)      # axes averaged over (mean ± s.e., n) instead of shown as rows
_ROW_TITLES = {"model": "Model", "graph": "Graph", "nodes": "Nodes (n)", "skew": "Skew"}


@dataclass
class CellResult:
    name: str
    labels: dict[str, str]
    path: Path
    summary: dict[str, Any] | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    def matches(self, spec: dict[str, Any]) -> bool:
        return all(canonical_label(self.labels.get(k, _config_value(self.config, k))) == canonical_label(v)
                   for k, v in spec.items())


@dataclass
class Sweep:
    path: Path
    title: str
    cells: list[CellResult]
    axes: list[str]
    report: dict[str, Any]
    paper: list[dict[str, Any]]
    paper_data_gb: dict[str, Any]
    scale: float | None
    source: str = ""


def _config_value(cfg: dict[str, Any], key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    if isinstance(node, dict) and "name" in node:
        return node["name"]
    return node




def _read_json(p: Path) -> Any:
    try:
        return json.loads(p.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


#: summary.json / metrics.jsonl values the report computes with: finite numbers or absent
_NUMERIC = ("mean_node_accuracy", "averaged_model_accuracy", "min_node_accuracy", "max_node_accuracy",
            "bytes_sent_per_node", "wall_time_s", "sim_time_s", "mean_node_loss", "averaged_model_loss",
            "consensus_distance", "train_loss", "epoch", "epochs")
def _clean_numbers(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without the values the report computes with that are not finite numbers (an
    edited, foreign or damaged file): such a value counts as missing, not as an error."""
    return {k: v for k, v in d.items() if k not in _NUMERIC or _number(v)}


def _read_summary(path: Path) -> dict[str, Any] | None:
    s = _read_json(path / "summary.json")
    return _clean_numbers(s) if isinstance(s, dict) else None


def _read_metrics(path: Path) -> list[dict[str, Any]]:
    """The usable rows of metrics.jsonl: JSON objects with a numeric epoch (bytes that are
    not UTF-8 text or JSON are skipped; values that are not numbers count as missing, and
    the plots draw only the values a row has)."""
    try:
        text = (path / "metrics.jsonl").read_bytes().decode("utf-8", "replace")
    except OSError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(row, dict):
            row = _clean_numbers(row)
            if "epoch" in row:
                rows.append(row)
    return rows


def _read_yaml(f: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(f.read_bytes().decode("utf-8"))
    except (OSError, ValueError, yaml.YAMLError, RecursionError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _read_cell(path: Path, name: str, labels: dict[str, str]) -> CellResult:
    c = CellResult(name=name, labels=labels, path=path)
    remove_stale_temporaries(path, STALE_AFTER_S)  # a killed run's; a live run's (a sweep running) are spared
    c.summary = _read_summary(path)
    c.metrics = _read_metrics(path)
    c.config = _read_yaml(path / "config.yaml")
    return c


def _plan_cells(plan: dict[str, Any]) -> list[tuple[str, dict[str, str]]] | None:
    """The (name, labels) cells of a sweep.json, or None when it is not one decent8 wrote."""
    cells = plan.get("cells")
    if not isinstance(cells, list):
        return None
    out = []
    for c in cells:
        if not (isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("labels"), dict)):
            return None
        if not c["name"] or "/" in c["name"] or c["name"] in (".", ".."):
            return None
        out.append((c["name"], {str(k): canonical_label(v) for k, v in c["labels"].items()}))
    return out


#: options that do not define an experiment (where it runs and how the simulator executes it)
_IGNORED = EXECUTION_OPTIONS | {"checkpoint", "eval_every", "device"}


def load_sweep(folder: str | os.PathLike) -> Sweep:
    """The cells and layout of a sweep folder (with or without sweep.json)."""
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError("report", f"{str(folder)!r} is not a folder")
    plan = _read_json(root / SWEEP_FILE)
    planned = _plan_cells(plan) if isinstance(plan, dict) else None
    if planned:
        cells = [_read_cell(root / name, name, labels) for name, labels in planned]
        return Sweep(root, str(plan.get("title") or root.name), cells, _list(plan.get("axes")),
                     _dict(plan.get("report")), _list(plan.get("paper"), dict),
                     _dict(plan.get("paper_data_gb")), plan.get("scale") if _number(plan.get("scale")) else None,
                     str(plan.get("source") or ""))
    runs = sorted(p for p in root.iterdir() if (p / "config.yaml").is_file())
    if not runs:
        raise ConfigError("report", f"{str(folder)!r} is not a sweep folder (no {SWEEP_FILE} and no run folders "
                                    f"with config.yaml)")
    return _sweep_from_runs(root, runs, root.name)


def _list(v: Any, kind: type = str) -> list[Any]:
    """The items of type ``kind`` of a list read from sweep.json (nothing else)."""
    return [x for x in v if isinstance(x, kind)] if isinstance(v, list) else []


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _sweep_from_runs(root: Path, runs: Sequence[Path], title: str) -> Sweep:
    cells = [_read_cell(p, p.name, {}) for p in runs]
    flats = [flatten(c.config) for c in cells]
    keys = sorted({k for f in flats for k in f})
    varying = [k for k in keys if k not in _IGNORED and len({json.dumps(f.get(k), default=str) for f in flats}) > 1]
    for c, f in zip(cells, flats):
        c.labels = {_short(k): canonical_label(f.get(k)) for k in varying}
    return Sweep(root, title, cells, [_short(k) for k in varying], {}, [], {}, None)


def _short(key: str) -> str:
    return key[:-5] if key.endswith(".name") else key


# --------------------------------------------------------------------------- layout
def column_name(spec: dict[str, str]) -> str:
    algo = spec.get("algorithm")
    name = display_name(algo) if algo else ""
    extra = [f"{k}={v}" for k, v in spec.items() if k not in ("algorithm", "precision")]
    if spec.get("precision") == "int8":
        name = "LP-" + (name or "int8")
    elif spec.get("precision") and not name:
        name = spec["precision"]
    return " ".join([name, *extra]).strip() or "accuracy"


def layout(sw: Sweep) -> tuple[dict[str, Any], list[str], dict[str, dict[str, Any]]]:
    """(constant row prefix, row axes, columns label -> spec) from the preset or inferred."""
    rep = sw.report or {}
    if rep.get("columns") is not None:
        return (dict(rep.get("rows") or {}), [a for a in rep.get("row_axes") or [] if a not in AGGREGATED],
                dict(rep["columns"]))
    col_keys = [k for k in ("algorithm", "precision", "optimizer.kind") if k in sw.axes]
    row_axes = [k for k in sw.axes if k not in col_keys and k not in AGGREGATED]
    specs: dict[str, dict[str, Any]] = {}
    for c in sw.cells:
        spec = {k: c.labels[k] for k in col_keys if k in c.labels}
        specs.setdefault(column_name(spec), spec)
    order = list(display_order())

    def rank(item: tuple[str, dict[str, Any]]) -> tuple:
        spec = item[1]
        algo = spec.get("algorithm", "")
        return (order.index(algo) if algo in order else len(order), algo, spec.get("precision") == "int8", item[0])

    columns = dict(sorted(specs.items(), key=rank))
    prefix: dict[str, Any] = {}
    cfgs = [c.config for c in sw.cells if c.config]
    for title, key in (("model", "model"), ("graph", "topology"), ("nodes", "nodes")):
        vals = {json.dumps(_config_value(cfg, key), default=str) for cfg in cfgs}
        if len(vals) == 1 and key not in sw.axes and _short(key) not in sw.axes \
                and _config_value(cfgs[0], key) is not None:
            prefix[title] = _config_value(cfgs[0], key)
    return prefix, row_axes, columns


def _sort_key(v: str) -> tuple:
    try:
        return (0, float(v), "")
    except ValueError:
        return (1, 0.0, v)


def rows_of(sw: Sweep, row_axes: Sequence[str]) -> list[tuple[str, ...]]:
    seen: list[tuple[str, ...]] = []
    for c in sw.cells:
        key = tuple(c.labels.get(a, canonical_label(_config_value(c.config, a))) for a in row_axes)
        if key not in seen:
            seen.append(key)
    return seen


def _paper_value(sw: Sweep, row_axes: Sequence[str], row: tuple[str, ...], column: str) -> float | None:
    for rec in sw.paper:
        if all(canonical_label(rec.get(a)) == v for a, v in zip(row_axes, row) if a in rec) and column in rec:
            try:
                return float(rec[column])
            except (TypeError, ValueError):
                return None
    return None


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def cell_values(sw: Sweep, row_axes: Sequence[str], row: tuple[str, ...], spec: dict[str, Any],
                metric: str) -> tuple[list[float], int]:
    """(accuracies % of the matching finished cells — one per seed, matching count)."""
    match = [c for c in sw.cells
             if c.matches(dict(zip(row_axes, row))) and c.matches(spec)]
    return [100.0 * c.summary[metric] for c in match if c.summary and metric in c.summary], len(match)


def cell_value(sw: Sweep, row_axes: Sequence[str], row: tuple[str, ...], spec: dict[str, Any],
               metric: str) -> tuple[float | None, int, int]:
    """(mean accuracy % over the matching finished cells, finished count, matching count)."""
    done, n_all = cell_values(sw, row_axes, row, spec, metric)
    return (_mean(done) if done else None), len(done), n_all


# --------------------------------------------------------------------------- table
def _fmt(v: float | None, digits: int = 2) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def markdown_table(sw: Sweep, metric: str = "mean_node_accuracy") -> tuple[str, list[float]]:
    """The paper-layout table and the list of (ours − paper) differences."""
    prefix, row_axes, columns = layout(sw)
    rows = rows_of(sw, row_axes)
    has_precision = any("precision" in c.labels for c in sw.cells)
    headers = [_ROW_TITLES.get(k, k) for k in prefix] + [_AXIS_TITLES.get(a, a) for a in row_axes]
    headers.append("Data/node (GB) FP / LP" if has_precision else "Data/node (GB)")
    headers += list(columns)
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(["---"] * len(headers)) + "|"]
    deltas: list[float] = []
    for row in rows:
        cells_in_row = [c for c in sw.cells if c.matches(dict(zip(row_axes, row))) and c.summary]
        data = []
        groups = ("fp32", "int8") if has_precision else (None,)
        for prec in groups:
            b = [c.summary["bytes_sent_per_node"] / 1e9 for c in cells_in_row  # type: ignore[index]
                 if (prec is None or c.labels.get("precision") == prec) and "bytes_sent_per_node" in c.summary]
            data.append(f"{_mean(b):.3g}" if b else "—")
        data_txt = " / ".join(data)
        comp = dict(zip(row_axes, row)).get("comp")
        paper_gb = sw.paper_data_gb.get(str(comp)) if comp is not None else None
        if isinstance(paper_gb, dict):
            data_txt += " [" + " / ".join(str(paper_gb.get(p, "—")) for p in ("fp32", "int8")) + "]"
        out = [str(v) for v in prefix.values()] + list(row) + [data_txt]
        for label, spec in columns.items():
            done, n_all = cell_values(sw, row_axes, row, spec or {}, metric)
            ours = _mean(done) if done else None
            paper = _paper_value(sw, row_axes, row, label)
            txt = format_mean_se(done, show_n=False) if done else "—"
            if done and n_all > 1:
                txt += f" (n={len(done)}" + (f" of {n_all}" if len(done) < n_all else "") + ")"
            if paper is not None:
                txt += f" [{paper:.2f}]"
                if ours is not None:
                    deltas.append(ours - paper)
            out.append(txt)
        lines.append("| " + " | ".join(out) + " |")
    return "\n".join(lines), deltas


# --------------------------------------------------------------------------- figures
def _new_figure(w: float, h: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h))
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig, path: Path) -> None:
    """savefig into a temporary file beside ``path``, then ``os.replace``."""
    _save_figure(fig, path, dpi=120)


def _is_low_precision(label: str, spec: dict[str, Any]) -> bool:
    return str(spec.get("precision", "")) == "int8" or label.startswith("LP")


def plot_accuracy_vs_skew(sw: Sweep, path: Path, metric: str = "mean_node_accuracy") -> bool:
    """Figures 4–6: accuracy vs skew per column, one panel per value of the other row axes."""
    prefix, row_axes, columns = layout(sw)
    if "skew" not in row_axes:
        return False
    others = [a for a in row_axes if a != "skew"]
    rows = rows_of(sw, row_axes)
    skews = sorted({r[row_axes.index("skew")] for r in rows if _sort_key(r[row_axes.index("skew")])[0] == 0},
                   key=_sort_key)   # numbers only: a cell whose config.yaml is damaged has no skew
    if len(skews) < 2:
        return False
    panels = []
    for r in rows:
        key = tuple(v for a, v in zip(row_axes, r) if a != "skew")
        if key not in panels:
            panels.append(key)
    fig = _new_figure(4.6 * len(panels), 3.8)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    family_colors: dict[str, str] = {}
    palette = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]
    for ax, panel in zip(axes, panels):
        for label, spec in columns.items():
            family = label[3:] if label.startswith("LP-") else label
            color = family_colors.setdefault(family, palette[len(family_colors) % len(palette)])
            style = "--" if _is_low_precision(label, spec or {}) else "-"
            xs, ys, px, py = [], [], [], []
            for s in skews:
                row = tuple(s if a == "skew" else panel[others.index(a)] for a in row_axes)
                ours = cell_value(sw, row_axes, row, spec or {}, metric)[0]
                if ours is not None:
                    xs.append(float(s))
                    ys.append(ours)
                paper = _paper_value(sw, row_axes, row, label)
                if paper is not None:
                    px.append(float(s))
                    py.append(paper)
            if xs:
                ax.plot(xs, ys, style, marker="o", color=color, label=f"{label} (ours)")
            if px:
                ax.plot(px, py, style, marker="x", color=color, alpha=0.45, linewidth=1, label=f"{label} (paper)")
        name = ", ".join(f"{_AXIS_TITLES.get(a, a)} {v}" for a, v in zip(others, panel))
        ax.set_title(name or sw.title, fontsize=9)
        ax.set_xlabel("degree of skew")
        ax.set_ylabel("test accuracy (%)")
        ax.grid(alpha=0.3)
    legend: dict[str, Any] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(lab, h)
    if legend:
        axes[-1].legend(list(legend.values()), list(legend), fontsize=7, loc="best")
    fig.suptitle(_figure_title(sw, prefix, "accuracy vs skew"), fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)
    return True


def plot_fp32_vs_int8(sw: Sweep, path: Path, metric: str = "mean_node_accuracy") -> bool:
    """FP32 beside 8-bit for every other setting of the sweep: bars of the mean over seeds,
    error bars ± one standard error (s/√n), the seeds as dots."""
    pairs: dict[tuple[tuple[str, str], ...], dict[str, list[float]]] = {}
    for c in sw.cells:
        prec = c.labels.get("precision") or _config_value(c.config, "precision")
        if prec not in ("fp32", "int8") or not c.summary or metric not in c.summary:
            continue
        key = tuple((k, v) for k, v in c.labels.items() if k not in ("precision", *AGGREGATED))
        pairs.setdefault(key, {"fp32": [], "int8": []})[str(prec)].append(100.0 * float(c.summary[metric]))
    pairs = {k: v for k, v in pairs.items() if v["fp32"] and v["int8"]}
    if not pairs:
        return False
    keys = list(pairs)
    fig = _new_figure(max(5.0, 0.9 * len(keys) + 1.5), 4.2)
    ax = fig.subplots()
    for j, (prec, color) in enumerate((("fp32", "tab:blue"), ("int8", "tab:orange"))):
        xs = [i + (j - 0.5) * 0.38 for i in range(len(keys))]
        stats = [mean_std(pairs[k][prec]) for k in keys]
        ax.bar(xs, [m for m, _, _ in stats], width=0.36, color=color, alpha=0.75,
               yerr=[sd / n ** 0.5 if n > 1 else 0.0 for _, sd, n in stats], capsize=3,
               label="FP32" if prec == "fp32" else "8-bit")
        for x, k in zip(xs, keys):
            ax.plot([x] * len(pairs[k][prec]), pairs[k][prec], ".", color="black", markersize=3)
    names = ["\n".join(display_name(v) if a == "algorithm" else f"{_short_axis(a)} {v}" for a, v in k)
             for k in keys]
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels(names, fontsize=7)
    low = min(min(v["fp32"] + v["int8"]) for v in pairs.values())
    ax.set_ylim(max(0.0, low - 10.0), None)
    ax.set_ylabel("test accuracy (%)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{sw.title} — FP32 vs 8-bit (mean ± s.e. over seeds; dots: seeds)", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)
    return True


def _short_axis(axis: str) -> str:
    return {"comp": "comp %", "skew": "skew"}.get(axis, axis)


def _figure_title(sw: Sweep, prefix: dict[str, Any], what: str) -> str:
    fig = (sw.report or {}).get("figure")
    bits = [f"{fig}: " if fig else "", sw.title if sw.title else "", f" — {what}"]
    if sw.scale:
        bits.append(f" (scale {sw.scale:g})")
    return "".join(bits)


def plot_validation_error(sw: Sweep, path: Path, metric: str = "mean_node_accuracy", max_lines: int = 12) -> bool:
    """Figure 1: validation error (%) vs epoch, one line per cell (per ``report.curves`` value)."""
    key = (sw.report or {}).get("curves")
    cells = [c for c in sw.cells if len(c.metrics) >= 1]
    if not cells or (key is None and len(cells) > max_lines):
        return False
    fig = _new_figure(6.4, 4.2)
    ax = fig.add_subplot(1, 1, 1)
    for c in cells:
        xs = [r["epoch"] for r in c.metrics if metric in r]
        ys = [100.0 * (1.0 - r[metric]) for r in c.metrics if metric in r]
        if not xs:
            continue
        label = c.labels.get(key, c.name) if key else (" ".join(f"{k}={v}" for k, v in c.labels.items()) or c.name)
        ax.plot(xs, ys, marker="." if len(xs) < 30 else None, label=label)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation error (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title=_AXIS_TITLES.get(key, key) if key else None)
    ax.set_title(_figure_title(sw, {}, "validation error"), fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)
    return True


def _read_partition(path: Path) -> tuple[list[str], list[list[int]]] | None:
    f = path / "partition.csv"
    if not f.is_file():
        return None
    try:
        lines = [ln for ln in f.read_bytes().decode("utf-8").splitlines() if ln.strip()]
        names = lines[0].split(",")[1:]
        counts = [[int(v) for v in ln.split(",")[1:]] for ln in lines[1:]]
    except (OSError, ValueError, IndexError):  # a damaged or foreign partition.csv: no panel
        return None
    if len(lines) < 2 or any(len(row) != len(names) for row in counts):
        return None
    return names, counts


def plot_class_distribution(sw: Sweep, path: Path) -> bool:
    """Figure 2: stacked bars of each node's class counts, one panel per (skew, nodes) in the sweep."""
    seen: dict[tuple[str, str], tuple[list[str], list[list[int]]]] = {}
    for c in sw.cells:
        skew = canonical_label(c.labels.get("skew", _config_value(c.config, "skew")))
        nodes = canonical_label(_config_value(c.config, "nodes"))
        if (skew, nodes) in seen:
            continue
        part = _read_partition(c.path)
        if part is not None:
            seen[(skew, nodes)] = part
    if not seen:
        return False
    keys = sorted(seen, key=lambda k: (_sort_key(k[1]), _sort_key(k[0])))
    fig = _new_figure(3.4 * len(keys), 3.6)
    axes = fig.subplots(1, len(keys), squeeze=False)[0]
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if max(len(seen[k][0]) for k in keys) <= 10 else "tab20"]
    for ax, k in zip(axes, keys):
        names, counts = seen[k]
        n = len(counts)
        bottom = [0] * n
        for j, cname in enumerate(names):
            vals = [row[j] for row in counts]
            ax.bar(range(n), vals, bottom=bottom, color=cmap(j % cmap.N), label=cname, width=0.8)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_title(f"skew {k[0]}" + (f", {k[1]} nodes" if len(keys) > 1 and len({kk[1] for kk in keys}) > 1 else ""),
                     fontsize=9)
        ax.set_xlabel("node")
        ax.set_xticks(range(n))
        ax.set_ylabel("samples")
    handles, labels = axes[-1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="center right")
    fig.suptitle("Figure 2: class distribution per node" + (f" — {sw.title}" if sw.title else ""), fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.88, 1))
    save_figure(fig, path)
    return True


def group_label(labels: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in labels.items() if k not in AGGREGATED)


def groups_of(sw: Sweep) -> list[Group]:
    """The sweep's configurations, each with the runs of its seeds (cells that differ only in ``seed``)."""
    out: dict[str, Group] = {}
    for c in sw.cells:
        label = group_label(c.labels) or sw.title
        g = out.setdefault(label, Group(label))
        if c.metrics:
            g.runs.append(c.metrics)
        if c.summary:
            g.summaries.append(c.summary)
    return list(out.values())


def sweep_figures(sw: Sweep, fig_dir: Path, metric: str = "mean_node_accuracy") -> list[tuple[str, str]]:
    """The figures of any sweep or comparison: curves on shared axes, accuracy vs bytes."""
    made = []
    groups = groups_of(sw)
    if plot_groups(groups, fig_dir / "curves.png", f"{sw.title} — accuracy, loss and accuracy vs bytes "
                   f"(mean ± std over seeds)" if any(len(g.runs) > 1 for g in groups) else f"{sw.title} — accuracy, "
                   f"loss and accuracy vs bytes", metric):
        made.append(("Curves on shared axes", f"{fig_dir.name}/curves.png"))
    if plot_accuracy_vs_bytes(groups, fig_dir / "accuracy_vs_bytes.png", f"{sw.title} — final accuracy vs bytes "
                              f"sent per node", metric):
        made.append(("Accuracy vs bytes sent per node", f"{fig_dir.name}/accuracy_vs_bytes.png"))
    return made


def is_run_folder(path: str | os.PathLike) -> bool:
    p = Path(path)
    return (p / "config.yaml").is_file() and ((p / "summary.json").is_file() or (p / "metrics.jsonl").is_file())


def load_runs(paths: Sequence[str | os.PathLike], title: str = "comparison") -> Sweep:
    """Arbitrary run folders as one sweep: the options that differ between them are its axes
    (runs that differ only in ``seed`` aggregate)."""
    runs = []
    for p in paths:
        if not is_run_folder(p):
            raise ConfigError("report", f"{str(p)!r} is not a run folder (no config.yaml with summary.json or "
                                        f"metrics.jsonl)")
        runs.append(Path(p))
    return _sweep_from_runs(Path("."), runs, title)


# --------------------------------------------------------------------------- report
def build_report(folder: str | os.PathLike, metric: str = "mean_node_accuracy", figures: bool = True) -> tuple[str, Path]:
    """Write ``report.md`` and the figures into the sweep folder; returns (markdown, report path)."""
    return write_report(load_sweep(folder), Path(folder), metric, figures)


def compare_runs(paths: Sequence[str | os.PathLike], out: str | os.PathLike, metric: str = "mean_node_accuracy",
                 figures: bool = True) -> tuple[str, Path]:
    """Arbitrary run folders compared: one table, curves on shared axes, written to ``out``."""
    sw = load_runs(paths, title=f"comparison of {len(paths)} runs")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text, path = write_report(sw, out, metric, figures)
    listing = "\n".join(["", "## Runs", ""] + [f"* `{c.path}` — " + (group_label(c.labels) or "(same config)")
                                                + (f", seed {_config_value(c.config, 'seed')}" if c.config else "")
                                                for c in sw.cells]) + "\n"
    atomic_write_text(path, text + listing)
    return text, path


def _setting(c: CellResult, key: str) -> Any:
    """A cell's value of config ``key`` (its config.yaml, else its sweep label)."""
    v = _config_value(c.config, key)
    return c.labels.get(key) if v is None else v


def write_report(sw: Sweep, folder: Path, metric: str = "mean_node_accuracy",
                 figures: bool = True) -> tuple[str, Path]:
    table, deltas = markdown_table(sw, metric)
    finished = sum(1 for c in sw.cells if c.summary)
    what = {"mean_node_accuracy": "mean over nodes of each node's own model",
            "averaged_model_accuracy": "the parameter-averaged model"}.get(metric, metric)
    lines = [f"# {sw.title}", ""]
    if sw.source:
        lines += [f"Paper: {sw.source}.", ""]
    epochs = next((c.summary.get("epochs") for c in sw.cells if c.summary), None)
    scale_txt = f"scale {sw.scale:g} ({epochs} epochs, a {sw.scale:g} part of the train set). " if sw.scale else ""
    lines += [f"{finished} of {len(sw.cells)} cells finished. {scale_txt}Each cell: test accuracy (%) of our run "
              f"({what}, after the final consensus rounds)" + (" [the paper's number]" if sw.paper else "")
              + "; runs that differ only in their seed are aggregated as mean ± standard error of the mean "
              "(s/√n, n = runs).", ""]
    lines += [table, ""]
    walls = [float(c.summary["wall_time_s"]) for c in sw.cells if c.summary and "wall_time_s" in c.summary]
    if walls:
        lines += [f"Compute: {sum(walls):,.0f} s of wall time over the {len(walls)} finished cells (the sum of "
                  f"their `wall_time_s`; cells that ran side by side overlap in real time).", ""]
    if deltas:
        lines += [f"Ours − paper over {len(deltas)} cells: mean {_mean(deltas):+.2f}, "
                  f"min {min(deltas):+.2f}, max {max(deltas):+.2f} points.", ""]
    checked = findings.compare([c for c in sw.cells if c.summary], _setting, metric)
    if checked:
        lines += ["## The paper's findings", "",
                  "Differences of mean accuracy between cells (points), their standard error over the seeds and "
                  "95 % interval (Welch); a finding holds where the interval lies inside its claim, does not hold "
                  "where it lies outside, and cannot be told otherwise (or from one run per cell).", "",
                  findings.markdown(checked), ""]
    if figures:
        fig_dir = Path(folder) / "figures"
        made = []
        if plot_accuracy_vs_skew(sw, fig_dir / "accuracy_vs_skew.png", metric):
            made.append(("Accuracy vs skew (Figures 4–6)", "figures/accuracy_vs_skew.png"))
        if plot_fp32_vs_int8(sw, fig_dir / "fp32_vs_int8.png", metric):
            made.append(("FP32 vs 8-bit per setting", "figures/fp32_vs_int8.png"))
        if plot_validation_error(sw, fig_dir / "validation_error.png", metric):
            made.append(("Validation error during training (Figure 1)", "figures/validation_error.png"))
        if plot_class_distribution(sw, fig_dir / "class_distribution.png"):
            made.append(("Class distribution per node (Figure 2)", "figures/class_distribution.png"))
        made += sweep_figures(sw, fig_dir, metric)
        for title, rel in made:
            lines += [f"## {title}", "", f"![{title}]({rel})", ""]
    text = "\n".join(lines)
    out = Path(folder) / "report.md"
    atomic_write_text(out, text)
    return text, out
