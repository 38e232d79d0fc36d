"""Figures of runs, in the house style (:mod:`decent8.figstyle`), each a PNG with a PDF beside it.

* :func:`plot_curves` — a run's ``curves.png``: accuracies, losses, consensus distance and
  the user's metrics (``metrics=``) per epoch. Every evaluation is drawn as a marker too, so a run evaluated once
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
from .user_metrics import user_keys

MARKER_MAX_POINTS = 30      # curves with more evaluations draw smaller markers (still one per evaluation)


def _marker(n: int) -> str:
    """Every evaluation is a marker, whatever their number."""
    return "o"


def marker_size(n: int, size: float = 6.0) -> float:
    """The marker size for a curve of ``n`` evaluations: ``size`` up to 30, then smaller (at least 1.5)."""
    return size if n <= MARKER_MAX_POINTS else max(1.5, size * math.sqrt(MARKER_MAX_POINTS / n))


def _epoch_axis(ax: Any, ep: Sequence[float]) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))     # whole epochs (fractions only when evaluated so)
    if len(ep) == 1:          # one point: a readable epoch axis around it
        ax.set_xlim(ep[0] - 1, ep[0] + 1)


def split_final(rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The evaluations during training, and the final one after the consensus rounds (None
    without rounds): drawn as its own labelled point, never joined to the curve."""
    during = [r for r in rows if not r.get("after_consensus_rounds")]
    post = [r for r in rows if r.get("after_consensus_rounds")]
    return during, (post[-1] if post else None)


def _quality(rows: Sequence[dict[str, Any]]) -> tuple[str, str, float, bool]:
    """What the first panel shows: (row key suffix, y label, scale, log axis) — accuracy for
    a classifier, R² for a regression run that has it, else the test loss."""
    first = rows[0]
    if first.get("mean_node_accuracy") is not None:
        return "accuracy", "test accuracy (%)", 100.0, False
    if first.get("mean_node_r2") is not None:
        return "r2", "test R²", 1.0, False
    return "loss", "test loss", 1.0, True


def user_metric_names(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The user's metrics (``metrics=``) in a run's rows: ``<name>`` of each ``averaged_model_<name>``."""

    return [k[len("averaged_model_"):] for k in user_keys(rows[0]) if k.startswith("averaged_model_")] if rows else []


def _user_panel(ax: Any, name: str, ep: Sequence[float], rows: Sequence[dict[str, Any]],
                post: dict[str, Any] | None, mk: str, ms: float) -> None:
    """One user metric per evaluation: the mean of the node models and the averaged model
    (the keys ``mean_node_<name>`` / ``averaged_model_<name>`` of metrics.jsonl)."""
    for who, style in (("mean_node", {}), ("averaged_model", {"ls": "--", "mfc": "none"})):
        pts = [(e, r.get(f"{who}_{name}")) for e, r in zip(ep, rows)]
        pts = [(e, v) for e, v in pts if isinstance(v, (int, float)) and math.isfinite(v)]
        if pts:
            ax.plot([e for e, _ in pts], [v for _, v in pts], marker=mk, ms=ms,
                    label="mean of node models" if who == "mean_node" else "averaged model", **style)
    if post is not None and isinstance(post.get(f"averaged_model_{name}"), (int, float)):
        x = post["epoch"] + 0.15 * max(1.0, (ep[-1] - ep[0]) / max(1, len(ep) - 1))
        vals = [v for v in (post.get(f"mean_node_{name}"), post[f"averaged_model_{name}"])
                if isinstance(v, (int, float)) and math.isfinite(v)]
        ax.plot([x] * len(vals), vals, "*", color="k", markersize=9,
                label=f"after {post['after_consensus_rounds']} consensus rounds")
    ax.set_ylabel(f"test {name}")
    if ax.has_data():
        ax.legend(loc="best")


@styled
def plot_curves(rows: list[dict[str, Any]], path: str | os.PathLike, title: str = "") -> None:
    """A run's curves.png: test accuracy (R² or test loss for regression), losses and the
    consensus distance per evaluation, one marker per evaluation, and a panel per user metric
    (``metrics=``); the evaluation after the final consensus rounds (= summary.json) a
    labelled star beside the last epoch."""
    rows, post = split_final(rows)
    if not rows:
        return
    ep = [r["epoch"] for r in rows]
    mk = _marker(len(rows))
    plt_ms = marker_size(len(rows))
    user = user_metric_names(rows)
    nrows = math.ceil((3 + len(user)) / 3)     # the user's metrics (metrics=): a panel each, 3 per row
    fig = new_figure(11, 3.5 * nrows)
    axes = list(fig.subplots(nrows, 3).flat) if nrows > 1 else list(fig.subplots(1, 3))
    ax1, ax2, ax3 = axes[:3]
    key, ylabel, scale, logy = _quality(rows)
    ax1.plot(ep, [scale * r[f"mean_node_{key}"] for r in rows], marker=mk, ms=plt_ms, label="mean of node models")
    ax1.plot(ep, [scale * r[f"averaged_model_{key}"] for r in rows], "--", marker=mk, ms=plt_ms, mfc="none",
             label="averaged model")
    ax1.set_ylabel(ylabel)
    ax2.plot(ep, [r["train_loss"] for r in rows], marker=mk, ms=plt_ms, label="train (mean over nodes)")
    ax2.plot(ep, [r["averaged_model_loss"] for r in rows], "--", marker=mk, ms=plt_ms, mfc="none",
             label="test, averaged model")
    ax2.set_ylabel("loss")
    ax3.plot(ep, [max(r["consensus_distance"], 1e-30) for r in rows], marker=mk, ms=plt_ms, label="during training")
    ax3.set_ylabel("consensus distance 1/n Σ‖x_i − x̄‖²")
    if post is not None:   # the final evaluation, after the gossip-only rounds (= summary.json)
        what = f"after {post['after_consensus_rounds']} consensus rounds"
        x = post["epoch"] + 0.15 * max(1.0, (ep[-1] - ep[0]) / max(1, len(ep) - 1))
        if post.get(f"mean_node_{key}") is not None:
            ax1.plot([x, x], [scale * post[f"mean_node_{key}"], scale * post[f"averaged_model_{key}"]], "*",
                     color="k", markersize=9, label=what)
        ax2.plot([x], [post["averaged_model_loss"]], "*", color="k", markersize=9, label=what)
        ax3.plot([x], [max(post["consensus_distance"], 1e-30)], "*", color="k", markersize=9, label=what)
        ax3.legend(loc="best")
    ax1.legend(loc="best")
    ax2.legend(loc="best")
    for ax, name in zip(axes[3:], user):
        _user_panel(ax, name, ep, rows, post, mk, plt_ms)
    for ax in axes[3 + len(user):]:
        ax.set_visible(False)
    if logy:
        log_axis(ax1, "y")
    log_axis(ax3, "y")
    for ax in axes[:3 + len(user)]:
        _epoch_axis(ax, ep + ([post["epoch"]] if post is not None else []))
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
    ax.plot(xs, ms, color=style["color"], linestyle=style["linestyle"], marker=style["marker"],
            markersize=marker_size(len(xs), 3.5), label=label)
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
    order = sorted(range(len(labels)), key=lambda i: labels[i].startswith("★"))   # the marker key last
    handles, labels = [handles[i] for i in order], [labels[i] for i in order]
    longest = max(len(s) for s in labels)
    per_row = max(1, min(len(labels), int(fig.get_figwidth() * 72 / (longest * 4.4 + 30))))
    fig.legend(handles, labels, loc="outside lower center", ncols=per_row)


def _accuracy_label(metric: str) -> str:
    if metric.endswith("_r2"):
        return "test R²" if metric == "mean_node_r2" else "averaged-model test R²"
    if not metric.endswith("_accuracy"):     # a user metric (metrics=): mean_node_<name> / averaged_model_<name>
        name = metric.removeprefix("mean_node_").removeprefix("averaged_model_")
        return f"test {name}" if metric.startswith("mean_node_") else f"averaged-model test {name}"
    return "test accuracy (%)" if metric == "mean_node_accuracy" else "averaged-model accuracy (%)"


def _metric_scale(metric: str) -> tuple[float, float, tuple[float, float]]:
    """(scale, the y-range's least span, its bounds): accuracies in %, R² as it is (≤ 1), a
    user metric as it is (unbounded)."""
    if metric.endswith("_r2"):
        return 1.0, 0.02, (-math.inf, 1.0)
    if not metric.endswith("_accuracy"):
        return 1.0, 0.0, (-math.inf, math.inf)
    return 100.0, 2.0, (0.0, 100.0)


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
    post_drawn = False
    for i, g in enumerate(groups):
        style = series_style(i)
        n = sum(1 for r in g.runs if r)
        label = with_n(g.label, n)
        during = [split_final(r)[0] for r in g.runs]
        xs, ms, ss = _band(during, "epoch", metric, _metric_scale(metric)[0])
        if xs:
            _draw(ax1, xs, ms, ss, style, label, n)
            finals = [f for f in (split_final(r)[1] for r in g.runs) if f is not None and f.get(metric) is not None]
            if finals:   # after the final consensus rounds: a star beside the last epoch, not on the line
                x = xs[-1] + 0.12 * max(1.0, (xs[-1] - xs[0]) / max(1, len(xs) - 1))
                ax1.plot([x], [_metric_scale(metric)[0] * sum(f[metric] for f in finals) / len(finals)], "*",
                         color=style["color"],
                         markersize=9, markeredgecolor="k", markeredgewidth=0.5,
                         label=None if post_drawn else
                         f"★ after the {finals[0]['after_consensus_rounds']} final consensus rounds")
                post_drawn = True
        lx, lm, ls = _band(during, "epoch", "train_loss")
        if lx:
            _draw(ax2, lx, lm, ls, style, label, n)
        # x = the mean bytes sent by each evaluation (the same for every seed of a configuration)
        bx, bs, _ = _band(during, "epoch", "bytes_sent_per_node")
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
    if any(sum(1 for r in g.runs if r) > 1 for g in groups):   # what the bands are, on the axes they shade
        ax1.text(0.99, 0.02, "bands: ± 1 s.d. over n seeds", transform=ax1.transAxes, ha="right", va="bottom",
                 fontsize="small", color="0.35")
    set_title(fig, title or "Training curves")
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
            m, sd, n = spread([_metric_scale(metric)[0] * s[metric] for s in done])
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
    _, span, bounds = _metric_scale(metric)
    honest_ylim(ax, [m - (sd or 0) for _, _, m, sd, _ in pts], [m + (sd or 0) for _, _, m, sd, _ in pts],
                min_span=span, bounds=bounds)
    ax.set_xlabel("bytes sent per node (whole run)")
    ax.set_ylabel(_accuracy_label(metric))
    _legend_below(fig, ax, len(pts))
    if any(sd is not None for *_, sd, _ in pts):   # what the bars are, where they are drawn (not in the title)
        ax.text(0.99, 0.02, "bars: ± 1 s.d. over the n seeds", transform=ax.transAxes, ha="right", va="bottom",
                fontsize="small", color="0.35")
    set_title(fig, title or "Final accuracy vs bytes sent")
    save(fig, path)
    return True
