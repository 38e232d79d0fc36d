"""PNG figures: one run's curves, several runs (or seeds) on shared axes, accuracy vs bytes.

* :func:`plot_curves` — a run's ``curves.png``: accuracies, losses and consensus distance
  per epoch. Every evaluation is drawn as a marker too, so a run evaluated once
  (``epochs=1``) still shows its point.
* :func:`plot_groups` — several configurations on the same axes (test accuracy, train
  loss, accuracy vs bytes sent); a configuration run with several seeds is drawn as
  its mean with a ±1 standard-deviation band.
* :func:`plot_accuracy_vs_bytes` — the compression trade-off: final accuracy (mean ±
  std over seeds) vs bytes each node sent, log-scale x.

Each series gets its own colour (tab10, then tab20, then evenly spaced hues); long
titles are wrapped rather than cut. Drawn on matplotlib's Agg canvas (no pyplot
state) and written atomically.
"""
from __future__ import annotations

import math
import os
import textwrap
from dataclasses import dataclass, field
from typing import Any, Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..atomic import save_figure

MARKER_MAX_POINTS = 30      # draw markers on curves with at most this many evaluations


def distinct_colors(n: int) -> list[Any]:
    """``n`` colours, none repeated."""
    import matplotlib

    if n <= 10:
        cmap = matplotlib.colormaps["tab10"]
        return [cmap(i) for i in range(n)]
    if n <= 20:
        cmap = matplotlib.colormaps["tab20"]
        return [cmap(i) for i in range(n)]
    cmap = matplotlib.colormaps["hsv"]
    return [cmap(i / n) for i in range(n)]


def _wrap(title: str, fig_width_in: float, fontsize: float = 10) -> str:
    """Wrap a title to the figure's width (about 0.6·fontsize points per character)."""
    chars = max(20, int(fig_width_in * 72 / (0.6 * fontsize)))
    return "\n".join(textwrap.wrap(title, chars, break_on_hyphens=False)) if title else ""


def _finish(fig: Figure, title: str, width: float, path: str | os.PathLike, fontsize: float = 10) -> None:
    if title:
        wrapped = _wrap(title, width, fontsize)
        fig.suptitle(wrapped, fontsize=fontsize)
        lines = wrapped.count("\n") + 1
        top = 1.0 - (0.035 + 0.045 * lines) * 3.6 / fig.get_figheight()
        fig.tight_layout(rect=(0, 0, 1, top))
    else:
        fig.tight_layout()
    save_figure(fig, path)


def _marker(n: int) -> str | None:
    return "o" if n <= MARKER_MAX_POINTS else None


def plot_curves(rows: list[dict[str, Any]], path: str | os.PathLike, title: str = "") -> None:
    if not rows:
        return
    ep = [r["epoch"] for r in rows]
    mk = _marker(len(rows))
    fig = Figure(figsize=(12, 3.6))
    FigureCanvasAgg(fig)
    ax1, ax2, ax3 = fig.subplots(1, 3)
    if rows[0].get("mean_node_accuracy") is not None:
        ax1.plot(ep, [100 * r["mean_node_accuracy"] for r in rows], marker=mk, label="mean of node models")
        ax1.plot(ep, [100 * r["averaged_model_accuracy"] for r in rows], "--", marker=mk, mfc="none",
                 label="averaged model")
        ax1.set_ylabel("test accuracy (%)")
    else:  # a regression task: test loss instead of accuracy
        ax1.semilogy(ep, [r["mean_node_loss"] for r in rows], marker=mk, label="mean of node models")
        ax1.semilogy(ep, [r["averaged_model_loss"] for r in rows], "--", marker=mk, mfc="none",
                     label="averaged model")
        ax1.set_ylabel("test loss")
    last = rows[-1]
    if last.get("after_consensus_rounds"):  # the final evaluation, after the gossip-only rounds (= summary.json)
        key = "accuracy" if last.get("mean_node_accuracy") is not None else "loss"
        scale = 100 if key == "accuracy" else 1
        ax1.plot([last["epoch"]] * 2, [scale * last[f"mean_node_{key}"], scale * last[f"averaged_model_{key}"]],
                 "*", color="k", markersize=9, label=f"after {last['after_consensus_rounds']} consensus rounds")
    ax1.legend(loc="lower right", fontsize=8)
    ax2.plot(ep, [r["train_loss"] for r in rows], marker=mk, label="train (mean over nodes)")
    ax2.plot(ep, [r["averaged_model_loss"] for r in rows], "--", marker=mk, mfc="none", label="test, averaged model")
    ax2.set_ylabel("loss")
    ax2.legend(loc="upper right", fontsize=8)
    ax3.semilogy(ep, [max(r["consensus_distance"], 1e-30) for r in rows], marker=mk)
    ax3.set_ylabel("consensus distance  1/n Σ‖x_i − x̄‖²")
    for ax in (ax1, ax2, ax3):
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
        if len(ep) == 1:          # one point: a readable epoch axis around it
            ax.set_xlim(ep[0] - 1, ep[0] + 1)
    _finish(fig, title, 12, path)


@dataclass
class Group:
    """One configuration: its label, the metrics rows of each seed's run, and each run's summary."""
    label: str
    runs: list[list[dict[str, Any]]] = field(default_factory=list)
    summaries: list[dict[str, Any]] = field(default_factory=list)


def _band(runs: Sequence[Sequence[dict[str, Any]]], x_key: str, y_key: str,
          scale: float = 1.0) -> tuple[list[float], list[float], list[float]]:
    """x, mean, std over the runs at the x values every run has (epochs shared by all seeds);
    rows without ``y_key`` are left out."""
    per_run = [{float(r[x_key]): scale * float(r[y_key]) for r in rows if x_key in r and y_key in r}
               for rows in runs if rows]
    per_run = [d for d in per_run if d]
    if not per_run:
        return [], [], []
    xs = sorted(set.intersection(*(set(d) for d in per_run)))
    means, stds = [], []
    for x in xs:
        vals = [d[x] for d in per_run]
        m = sum(vals) / len(vals)
        means.append(m)
        stds.append(math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0)
    return xs, means, stds


def _draw(ax, xs, ms, ss, color, label, n_runs: int, logy: bool = False) -> None:
    ax.plot(xs, ms, color=color, marker=_marker(len(xs)), markersize=4, label=label)
    if n_runs > 1:
        lo = [m - s for m, s in zip(ms, ss)]
        if logy:
            lo = [max(v, m * 0.01) for v, m in zip(lo, ms)]
        ax.fill_between(xs, lo, [m + s for m, s in zip(ms, ss)], color=color, alpha=0.2, linewidth=0)


def plot_groups(groups: Sequence[Group], path: str | os.PathLike, title: str = "",
                metric: str = "mean_node_accuracy") -> bool:
    """Test accuracy and train loss vs epoch, and test accuracy vs bytes sent per node, all
    configurations on shared axes; several seeds → mean line and ±1 std band."""
    groups = [g for g in groups if any(g.runs)]
    if not groups:
        return False
    colors = distinct_colors(len(groups))
    fig = Figure(figsize=(14, 4.4))
    FigureCanvasAgg(fig)
    ax1, ax2, ax3 = fig.subplots(1, 3)
    for g, color in zip(groups, colors):
        n = sum(1 for r in g.runs if r)
        label = g.label + (f" (n={n})" if n > 1 else "")
        xs, ms, ss = _band(g.runs, "epoch", metric, 100.0)
        if xs:
            _draw(ax1, xs, ms, ss, color, label, n)
        lx, lm, ls = _band(g.runs, "epoch", "train_loss")
        if lx:
            _draw(ax2, lx, lm, ls, color, label, n)
        # x = the mean bytes sent by each evaluation (the same for every seed of a configuration)
        bx, bs, _ = _band(g.runs, "epoch", "bytes_sent_per_node")
        if xs and bx == xs and all(b > 0 for b in bs):
            _draw(ax3, bs, ms, ss, color, label, n)
    ax1.set_ylabel("test accuracy (%)" if metric == "mean_node_accuracy" else "averaged-model accuracy (%)")
    ax1.set_xlabel("epoch")
    ax2.set_ylabel("train loss (mean over nodes)")
    ax2.set_xlabel("epoch")
    ax3.set_ylabel(ax1.get_ylabel())
    ax3.set_xlabel("bytes sent per node")
    if ax3.lines:
        ax3.set_xscale("log")
    for ax in (ax1, ax2, ax3):
        ax.grid(alpha=0.3, which="both")
    ax1.legend(fontsize=7, loc="lower right")
    _finish(fig, title, 14, path)
    return True


def plot_accuracy_vs_bytes(groups: Sequence[Group], path: str | os.PathLike, title: str = "",
                           metric: str = "mean_node_accuracy") -> bool:
    """Final accuracy (mean ± std over seeds) vs bytes sent per node, one point per configuration."""
    pts = []
    for g in groups:
        done = [s for s in g.summaries if s and metric in s and s.get("bytes_sent_per_node", 0) > 0]
        if done:
            acc = [100 * s[metric] for s in done]
            m = sum(acc) / len(acc)
            sd = math.sqrt(sum((a - m) ** 2 for a in acc) / (len(acc) - 1)) if len(acc) > 1 else 0.0
            b = sum(s["bytes_sent_per_node"] for s in done) / len(done)
            pts.append((g.label, b, m, sd, len(done)))
    if not pts:
        return False
    colors = distinct_colors(len(pts))
    fig = Figure(figsize=(7.5, 4.8))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for (label, b, m, sd, n), color in zip(pts, colors):
        ax.errorbar([b], [m], yerr=[sd] if n > 1 else None, fmt="o", color=color, capsize=4, markersize=7,
                    label=label + (f" (n={n})" if n > 1 else ""))
    ax.set_xscale("log")
    ax.set_xlabel("bytes sent per node (whole run)")
    ax.set_ylabel("test accuracy (%)" if metric == "mean_node_accuracy" else "averaged-model accuracy (%)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="best")
    _finish(fig, title or "accuracy vs bytes sent", 7.5, path)
    return True
