"""The report's figures: accuracy vs skew (Figures 4–6), FP32 vs 8-bit, validation error
(Figure 1), class distribution (Figure 2), and the curves / accuracy-vs-bytes of any
sweep. All in the house style (:mod:`decent8.figstyle`): a PNG and a PDF beside it, each
written atomically; spreads over seeds only where there are ≥ 2, with n said."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ...algorithms import display_name
from ...figstyle import PALETTE, colors, new_figure, save, set_axes_title, set_title, styled
from ...figstyle.axes import honest_ylim, spread
from ...train.plots import Group, plot_accuracy_vs_bytes, plot_groups
from ..presets import canonical_label
from .layout import (_AXIS_TITLES, AGGREGATED, _paper_value, _sort_key, cell_value, group_label,
                     layout, rows_of)
from .load import Sweep, _config_value
from ...figstyle import series_style
from ...train.plots import _band, _epoch_axis, marker_size, split_final
from ...train.user_metrics import user_keys


def _is_low_precision(label: str, spec: dict[str, Any]) -> bool:
    return str(spec.get("precision", "")) == "int8" or label.startswith("LP")


def _legend_below(fig: Any, handles: list[Any], labels: list[str]) -> None:
    """One legend under the axes, as many entries per row as the width holds."""
    if not handles:
        return
    order = sorted(range(len(labels)), key=lambda i: labels[i].startswith("★"))   # the marker key last
    handles, labels = [handles[i] for i in order], [labels[i] for i in order]
    longest = max(len(s) for s in labels)
    per_row = max(1, min(len(labels), int(fig.get_figwidth() * 72 / (longest * 4.4 + 30))))
    fig.legend(handles, labels, loc="outside lower center", ncols=per_row)


@styled
def plot_accuracy_vs_skew(sw: Sweep, path: Path, metric: str = "mean_node_accuracy") -> bool:
    """Figures 4–6: accuracy vs skew per column, one panel per value of the other row axes;
    ours solid with filled circles (FP32) or dashed with hollow ones (8-bit), the paper's
    faint with crosses."""
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
    fig = new_figure(max(5.5, 3.6 * len(panels)), 3.9)
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
    family_colors: dict[str, str] = {}
    values: list[float] = []
    for ax, panel in zip(axes, panels):
        for label, spec in columns.items():
            family = label[3:] if label.startswith("LP-") else label
            color = family_colors.setdefault(family, PALETTE[len(family_colors) % len(PALETTE)])
            low = _is_low_precision(label, spec or {})
            style = "--" if low else "-"
            face = "white" if low else color          # 8-bit: dashed, hollow markers
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
            values += ys + py
            if xs:
                ax.plot(xs, ys, style, marker="o", color=color, mfc=face, label=label)
            if px:
                ax.plot(px, py, style, marker="x", color=color, alpha=0.45, linewidth=1,
                        label=f"{label}, published")
        name = ", ".join(f"{_AXIS_TITLES.get(a, a)} {v}" for a, v in zip(others, panel))
        set_axes_title(ax, name)
        ax.set_xlabel("degree of skew")
    axes[0].set_ylabel("test accuracy (%)")
    honest_ylim(axes[0], values, values)
    legend: dict[str, Any] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(lab, h)
    _legend_below(fig, list(legend.values()), list(legend))
    set_title(fig, _figure_title(sw, prefix, "accuracy vs skew"))
    save(fig, path)
    return True


@styled
def plot_fp32_vs_int8(sw: Sweep, path: Path, metric: str = "mean_node_accuracy") -> bool:
    """FP32 beside 8-bit for every other setting of the sweep: the mean over seeds (large
    marker), each seed (small dots), and ± one standard error (s/√n) where n ≥ 2."""
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
    fig = new_figure(max(4.8, 1.1 * len(keys) + 2.0), 3.8)
    ax = fig.subplots()
    values: list[float] = []
    any_bars = False
    for j, (prec, name) in enumerate((("fp32", "FP32"), ("int8", "8-bit"))):
        color, marker = PALETTE[j], "os"[j]
        for i, k in enumerate(keys):
            x = i + (j - 0.5) * 0.36
            seeds = pairs[k][prec]
            m, sd, n = spread(seeds)
            se = sd / n ** 0.5 if sd is not None else None
            ax.plot([x], [m], marker, color=color, markersize=8, label=name if i == 0 else None)
            ax.plot([x + 0.07] * n, seeds, ".", color=color, alpha=0.6, markersize=4)
            if se is not None:
                any_bars = True
                ax.errorbar([x], [m], yerr=[se], fmt="none", color=color, label=f"_s.e. (n={n})")
            values += seeds + ([m - se, m + se] if se is not None else [])
    names = ["\n".join(display_name(v) if a == "algorithm" else f"{_short_axis(a)} {v}" for a, v in k)
             or "all other settings equal" for k in keys]
    ax.set_xticks(range(len(keys)), names)
    ax.set_xlim(-0.7, len(keys) - 0.3)
    ax.set_xlabel("configuration (every other setting)")
    honest_ylim(ax, values, values)
    ax.set_ylabel("test accuracy (%)")
    ax.grid(False, axis="x")
    ax.legend(loc="best")
    counts = sorted({len(v[p]) for v in pairs.values() for p in ("fp32", "int8")})
    n_txt = f"n = {counts[0]}" if len(counts) == 1 else f"n = {counts[0]}–{counts[-1]}"
    what = "mean ± s.e. over seeds, dots: seeds" if any_bars else "one seed each, no error bars"
    ax.text(0.01, 0.02, f"{what}; {n_txt}", transform=ax.transAxes, ha="left", va="bottom", fontsize="small",
            color="0.35")   # what the bars are, on the axes (the title stays short)
    set_title(fig, f"FP32 vs 8-bit — {sw.title}")
    save(fig, path)
    return True


def _short_axis(axis: str) -> str:
    return {"comp": "comp %", "skew": "skew"}.get(axis, axis)


def _figure_title(sw: Sweep, prefix: dict[str, Any], what: str) -> str:
    """``what`` and the sweep's title (the user's ``--title``, a preset's name), never a
    figure number: the figure is the user's."""
    bits = [what[:1].upper() + what[1:], f" — {sw.title}" if sw.title else ""]
    if sw.scale:
        bits.append(f" (scale {sw.scale:g})")
    return "".join(bits)


@styled
def plot_validation_error(sw: Sweep, path: Path, metric: str = "mean_node_accuracy", max_lines: int = 12) -> bool:
    """Figure 1: validation error (%) vs epoch, one line per configuration (seeds averaged,
    n in the legend; per ``report.curves`` value when the preset names one), a marker per
    evaluation, whole-epoch ticks; the evaluation after the final consensus rounds is a
    star beside the last epoch, labelled, never joined to the line."""

    key = (sw.report or {}).get("curves")
    series: dict[str, list[list[dict[str, Any]]]] = {}
    for c in sw.cells:
        if not c.metrics:
            continue
        label = (str(c.labels.get(key, c.name)) if key else group_label(c.labels)) or sw.title or c.name
        series.setdefault(label, []).append(c.metrics)
    if not series or len(series) > max_lines:
        return False
    fig = new_figure(6.4, 4.2 + 0.2 * len(series))
    ax = fig.add_subplot(1, 1, 1)
    epochs: list[float] = []
    post_drawn = False
    for i, (label, runs) in enumerate(series.items()):
        during = [split_final(rows)[0] for rows in runs]
        xs, ms, _ = _band(during, "epoch", metric, 100.0)
        if not xs:
            continue
        style = series_style(i)
        n = len(runs)
        ax.plot(xs, [100.0 - m for m in ms], label=label + (f" (mean of n={n})" if n > 1 else ""),
                markersize=marker_size(len(xs)), **style)
        epochs += xs
        finals = [split_final(rows)[1] for rows in runs]
        finals = [f for f in finals if f is not None and f.get(metric) is not None]
        if finals:
            x = xs[-1] + 0.12 * max(1.0, (xs[-1] - xs[0]) / max(1, len(xs) - 1))
            y = 100.0 - 100.0 * sum(f[metric] for f in finals) / len(finals)
            rounds = finals[0]["after_consensus_rounds"]
            ax.plot([x], [y], "*", color=style["color"], markersize=10, markeredgecolor="k", markeredgewidth=0.5,
                    label=None if post_drawn else f"★ after the {rounds} final consensus rounds")
            post_drawn = True
    if not ax.lines:
        return False
    _epoch_axis(ax, epochs)
    ax.set_ylabel("validation error (%)")
    handles, labels = ax.get_legend_handles_labels()
    _legend_below(fig, handles, labels)
    set_title(fig, _figure_title(sw, {}, "validation error"))
    save(fig, path)
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


@styled
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
    fig = new_figure(max(5.5, 2.9 * len(keys) + 1.4), 3.4)
    axes = fig.subplots(1, len(keys), squeeze=False, sharey=True)[0]
    palette = colors(max(len(seen[k][0]) for k in keys))
    for ax, k in zip(axes, keys):
        names, counts = seen[k]
        n = len(counts)
        bottom = [0] * n
        for j, cname in enumerate(names):
            vals = [row[j] for row in counts]
            ax.bar(range(n), vals, bottom=bottom, color=palette[j], label=cname, width=0.8)
            bottom = [b + v for b, v in zip(bottom, vals)]
        set_axes_title(ax, f"skew {k[0]}" + (f", {k[1]} nodes" if len({kk[1] for kk in keys}) > 1 else ""))
        ax.set_xlabel("node")
        ax.set_xticks(range(0, n, max(1, -(-n // 16))))
        ax.grid(False, axis="x")
    axes[0].set_ylabel("training samples")
    handles, labels = axes[-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", title="class")
    set_title(fig, "Class distribution per node" + (f" — {sw.title}" if sw.title else ""))
    save(fig, path)
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
    """The figures of any sweep or comparison: curves on shared axes, accuracy vs bytes, and a
    curves figure per user metric (``metrics=``)."""
    made = []
    groups = groups_of(sw)
    if plot_groups(groups, fig_dir / "curves.png", f"Training curves — {sw.title}", metric):
        made.append(("Curves on shared axes", f"{fig_dir.name}/curves.png"))
    what = "R²" if metric.endswith("_r2") else "accuracy"
    if plot_accuracy_vs_bytes(groups, fig_dir / "accuracy_vs_bytes.png", f"Final {what} vs bytes sent — {sw.title}",
                              metric):
        made.append((f"{what[:1].upper() + what[1:]} vs bytes sent per node", f"{fig_dir.name}/accuracy_vs_bytes.png"))
    for name in _user_metric_names(sw):      # the user's metrics (metrics=): a curves figure each
        if plot_groups(groups, fig_dir / f"metric_{name}.png", f"Test {name} — {sw.title}", f"mean_node_{name}"):
            made.append((f"Your metric: {name}", f"{fig_dir.name}/metric_{name}.png"))
    return made


def _user_metric_names(sw: Sweep) -> list[str]:
    """``<name>`` of every user metric (``averaged_model_<name>``) in the finished cells' summaries."""

    names: list[str] = []
    for c in sw.cells:
        for k in user_keys(c.summary or {}):
            name = k[len("averaged_model_"):] if k.startswith("averaged_model_") else None
            if name and name not in names:
                names.append(name)
    return names
