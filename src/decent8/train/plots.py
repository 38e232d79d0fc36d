"""Figures of runs, in the house style (:mod:`decent8.figstyle`), each a PNG with a PDF beside it.

* :func:`plot_curves` — a run's ``curves.png``: accuracies, losses and consensus distance
  per epoch. Every evaluation is drawn as a marker too, so a run evaluated once
  (``epochs=1``) still shows its point.
* :func:`plot_groups` — several configurations on the same axes (test accuracy, train
  loss, accuracy vs bytes sent); a configuration run with ≥ 2 seeds is drawn as its mean
  with a ±1 standard-deviation band, and its legend entry says n.
* :func:`plot_accuracy_vs_bytes` — the compression trade-off: final accuracy (mean, and
  ±1 s.d. where ≥ 2 seeds) vs bytes each node sent, on a y-range of at least 2 points.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..figstyle import new_figure, save, series_style, set_title, styled
from ..figstyle.axes import bytes_axis, honest_ylim, log_axis, spread, with_n

MARKER_MAX_POINTS = 30      # draw markers on curves with at most this many evaluations


def _marker(n: int) -> str | None:
    return "o" if n <= MARKER_MAX_POINTS else None


def _epoch_axis(ax: Any, ep: Sequence[float]) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))     # whole epochs (fractions only when evaluated so)
    if len(ep) == 1:          # one point: a readable epoch axis around it
        ax.set_xlim(ep[0] - 1, ep[0] + 1)


@styled
def plot_curves(rows: list[dict[str, Any]], path: str | os.PathLike, title: str = "") -> None:
    if not rows:
        return
    ep = [r["epoch"] for r in rows]
    mk = _marker(len(rows))
    fig = new_figure(11, 3.5)
    ax1, ax2, ax3 = fig.subplots(1, 3)
    if rows[0].get("mean_node_accuracy") is not None:
        ax1.plot(ep, [100 * r["mean_node_accuracy"] for r in rows], marker=mk, label="mean of node models")
        ax1.plot(ep, [100 * r["averaged_model_accuracy"] for r in rows], "--", marker=mk, mfc="none",
                 label="averaged model")
        ax1.set_ylabel("test accuracy (%)")
    else:  # a regression task: test loss instead of accuracy
        ax1.plot(ep, [r["mean_node_loss"] for r in rows], marker=mk, label="mean of node models")
        ax1.plot(ep, [r["averaged_model_loss"] for r in rows], "--", marker=mk, mfc="none", label="averaged model")
        log_axis(ax1, "y")
        ax1.set_ylabel("test loss")
    last = rows[-1]
    if last.get("after_consensus_rounds"):  # the final evaluation, after the gossip-only rounds (= summary.json)
        key = "accuracy" if last.get("mean_node_accuracy") is not None else "loss"
        scale = 100 if key == "accuracy" else 1
        ax1.plot([last["epoch"]] * 2, [scale * last[f"mean_node_{key}"], scale * last[f"averaged_model_{key}"]],
                 "*", color="k", markersize=9, label=f"after {last['after_consensus_rounds']} consensus rounds")
    ax1.legend(loc="best")
    ax2.plot(ep, [r["train_loss"] for r in rows], marker=mk, label="train (mean over nodes)")
    ax2.plot(ep, [r["averaged_model_loss"] for r in rows], "--", marker=mk, mfc="none", label="test, averaged model")
    ax2.set_ylabel("loss")
    ax2.legend(loc="best")
    ax3.plot(ep, [max(r["consensus_distance"], 1e-30) for r in rows], marker=mk)
    log_axis(ax3, "y")
    ax3.set_ylabel("consensus distance 1/n Σ‖x_i − x̄‖²")
    for ax in (ax1, ax2, ax3):
        _epoch_axis(ax, ep)
    set_title(fig, title)
    save(fig, path)


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
        m, sd, _ = spread([d[x] for d in per_run])
        means.append(m)
        stds.append(sd or 0.0)
    return xs, means, stds


def _draw(ax, xs, ms, ss, style: dict[str, Any], label, n_runs: int, logy: bool = False) -> None:
    ax.plot(xs, ms, color=style["color"], linestyle=style["linestyle"], marker=style["marker"] if
            _marker(len(xs)) else None, markersize=3.5, label=label)
    if n_runs > 1:
        lo = [m - s for m, s in zip(ms, ss)]
        if logy:
            lo = [max(v, m * 0.01) for v, m in zip(lo, ms)]
        ax.fill_between(xs, lo, [m + s for m, s in zip(ms, ss)], color=style["color"], alpha=0.18, linewidth=0)


def _legend_below(fig: Any, ax: Any, n: int) -> None:
    """One legend for the whole figure, under the axes (never over the data)."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    longest = max(len(s) for s in labels)
    per_row = max(1, min(len(labels), int(fig.get_figwidth() * 72 / (longest * 4.4 + 30))))
    fig.legend(handles, labels, loc="outside lower center", ncols=per_row)


def _accuracy_label(metric: str) -> str:
    return "test accuracy (%)" if metric == "mean_node_accuracy" else "averaged-model accuracy (%)"


@styled
def plot_groups(groups: Sequence[Group], path: str | os.PathLike, title: str = "",
                metric: str = "mean_node_accuracy") -> bool:
    """Test accuracy and train loss vs epoch, and test accuracy vs bytes sent per node, all
    configurations on shared axes; ≥ 2 seeds → mean line and ±1 s.d. band, n in the legend."""
    groups = [g for g in groups if any(g.runs)]
    if not groups:
        return False
    fig = new_figure(11, 3.6 + 0.22 * math.ceil(len(groups) / 3))
    ax1, ax2, ax3 = fig.subplots(1, 3)
    for i, g in enumerate(groups):
        style = series_style(i)
        n = sum(1 for r in g.runs if r)
        label = with_n(g.label, n)
        xs, ms, ss = _band(g.runs, "epoch", metric, 100.0)
        if xs:
            _draw(ax1, xs, ms, ss, style, label, n)
        lx, lm, ls = _band(g.runs, "epoch", "train_loss")
        if lx:
            _draw(ax2, lx, lm, ls, style, label, n)
        # x = the mean bytes sent by each evaluation (the same for every seed of a configuration)
        bx, bs, _ = _band(g.runs, "epoch", "bytes_sent_per_node")
        keep = [k for k, b in enumerate(bs) if b > 0]
        if xs and bx == xs and keep:
            _draw(ax3, [bs[k] for k in keep], [ms[k] for k in keep], [ss[k] for k in keep], style, label, n)
    ax1.set_ylabel(_accuracy_label(metric))
    ax2.set_ylabel("train loss (mean over nodes)")
    epochs = sorted({float(r["epoch"]) for g in groups for rows in g.runs for r in rows if "epoch" in r})
    for ax in (ax1, ax2):
        _epoch_axis(ax, epochs)
    ax3.set_ylabel(ax1.get_ylabel())
    ax3.set_xlabel("bytes sent per node")
    if ax3.lines:
        bytes_axis(ax3, "x")
    _legend_below(fig, ax1, len(groups))
    spread_note = " — mean ± 1 s.d. over n seeds" if any(sum(1 for r in g.runs if r) > 1 for g in groups) else ""
    set_title(fig, (title or "comparison") + spread_note)
    save(fig, path)
    return True


@styled
def plot_accuracy_vs_bytes(groups: Sequence[Group], path: str | os.PathLike, title: str = "",
                           metric: str = "mean_node_accuracy") -> bool:
    """Final accuracy vs bytes sent per node, one point per configuration: the mean over its
    seeds, with a ±1 s.d. bar only where it has ≥ 2; the legend says n."""
    pts = []
    for g in groups:
        done = [s for s in g.summaries if s and s.get(metric) is not None and s.get("bytes_sent_per_node", 0) > 0]
        if done:
            m, sd, n = spread([100 * s[metric] for s in done])
            b = sum(s["bytes_sent_per_node"] for s in done) / n
            pts.append((g.label, b, m, sd, n))
    if not pts:
        return False
    fig = new_figure(6.4, 3.4 + 0.2 * math.ceil(len(pts) / 2))
    ax = fig.add_subplot(1, 1, 1)
    for i, (label, b, m, sd, n) in enumerate(pts):
        style = series_style(i)
        if sd is not None:
            ax.errorbar([b], [m], yerr=[sd], fmt=style["marker"], color=style["color"], markersize=6,
                        label=with_n(label, n))
        else:
            ax.plot([b], [m], style["marker"], color=style["color"], markersize=6, label=with_n(label, n))
    bytes_axis(ax, "x")
    honest_ylim(ax, [m - (sd or 0) for _, _, m, sd, _ in pts], [m + (sd or 0) for _, _, m, sd, _ in pts])
    ax.set_xlabel("bytes sent per node (whole run)")
    ax.set_ylabel(_accuracy_label(metric))
    _legend_below(fig, ax, len(pts))
    note = "mean ± 1 s.d. over n seeds" if any(sd is not None for *_, sd, _ in pts) else "one seed each"
    set_title(fig, f"{title or 'accuracy vs bytes sent'} ({note})")
    save(fig, path)
    return True
