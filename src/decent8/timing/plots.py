"""Accuracy vs simulated wall-clock and vs bytes, for one run or several (SPEC §12), in the
house style (:mod:`decent8.figstyle`): a PNG with a PDF beside it."""
from __future__ import annotations

import os
from typing import Any, Sequence

from ..figstyle import new_figure, save, series_style, set_title, styled
from ..figstyle.axes import bytes_axis, log_axis


def plot_time(rows: list[dict[str, Any]], path: str | os.PathLike, title: str = "") -> None:
    """One run: mean node accuracy against ``sim_time_s`` and against bytes sent per node."""
    plot_runs([("mean of node models", rows)], path, title)


@styled
def plot_runs(runs: Sequence[tuple[str, list[dict[str, Any]]]], path: str | os.PathLike, title: str = "",
              target: float | None = None, time_log: bool = False, bytes_label: str = "bytes sent per node") -> None:
    """Several runs (label, metrics rows) on two panels: accuracy vs simulated time, vs bytes
    (evaluations before the first byte left out of the log axis). ``target``: a horizontal
    line at this accuracy (in %)."""
    runs = [(label, [r for r in rows if "sim_time_s" in r]) for label, rows in runs]
    runs = [(label, rows) for label, rows in runs if rows]
    if not runs:
        return
    first = runs[0][1][0]
    accuracy = first.get("mean_node_accuracy") is not None
    # a regression run plots its test R² (or its test loss, on a log axis, where it has none)
    key, scale, ylabel = (("mean_node_accuracy", 100.0, "test accuracy (%)") if accuracy else
                          ("mean_node_r2", 1.0, "test R²") if first.get("mean_node_r2") is not None else
                          ("mean_node_loss", 1.0, "test loss"))
    fig = new_figure(9, 3.4)
    ax1, ax2 = fig.subplots(1, 2)
    for i, (label, rows) in enumerate(runs):
        style = series_style(i)
        acc = [scale * r[key] for r in rows]
        ax1.plot([r["sim_time_s"] for r in rows], acc, label=label, **style)
        sent = [(r["bytes_sent_per_node"], a) for r, a in zip(rows, acc) if r["bytes_sent_per_node"] > 0]
        if sent:
            ax2.plot([b for b, _ in sent], [a for _, a in sent], label=label, **style)
    ax1.set_xlabel("simulated wall-clock (s)")
    ax2.set_xlabel(bytes_label)
    if ax2.lines:
        bytes_axis(ax2, "x")
    if time_log:
        log_axis(ax1, "x")
    for ax in (ax1, ax2):
        ax.set_ylabel(ylabel)
        if key == "mean_node_loss":
            log_axis(ax, "y")
        if target is not None:
            ax.axhline(target, color="grey", linestyle=":", linewidth=1)
    if len(runs) > 1 or runs[0][0] != "mean of node models":
        ax1.legend(loc="best")
    set_title(fig, title)
    save(fig, path)
