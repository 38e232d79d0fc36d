"""The report's figures: accuracy vs skew (Figures 4–6), FP32 vs 8-bit, validation error
(Figure 1), class distribution (Figure 2), and the curves / accuracy-vs-bytes of any
sweep. PNGs are drawn with matplotlib's Agg canvas (no pyplot state) and written
atomically."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ...algorithms import display_name
from ...atomic import save_figure as _save_figure
from ...train.plots import Group, plot_accuracy_vs_bytes, plot_groups
from ..aggregate import mean_std
from ..presets import canonical_label
from .layout import (_AXIS_TITLES, AGGREGATED, _paper_value, _sort_key, cell_value, group_label,
                     layout, rows_of)
from .load import Sweep, _config_value


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
