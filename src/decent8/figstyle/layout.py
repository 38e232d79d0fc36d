"""What a figure's layout must satisfy, measured with matplotlib's renderer extents: every
visible text inside the canvas, no two tick labels of an axis overlapping, and no error bar
drawn from fewer than two seeds."""
from __future__ import annotations

from typing import Any


def _texts(fig: Any, renderer: Any) -> list[Any]:
    """The figure's visible texts; of tick labels only those matplotlib draws (in view)."""
    from matplotlib.text import Text

    ticks = {id(lb) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
             for tick in axis.get_major_ticks() + axis.get_minor_ticks() for lb in (tick.label1, tick.label2)}
    drawn = [lb for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for lb in _tick_labels(axis, renderer)]
    return [t for t in fig.findobj(Text) if id(t) not in ticks and t.get_visible() and t.get_text().strip()] + drawn


def _tick_labels(axis: Any, renderer: Any) -> list[Any]:
    lo, hi = sorted(axis.get_view_interval())
    eps = (hi - lo) * 1e-9
    lo, hi = lo - eps, hi + eps
    out = []
    for tick in axis.get_major_ticks() + axis.get_minor_ticks():
        for label in (tick.label1, tick.label2):
            if label.get_visible() and label.get_text().strip() and lo <= tick.get_loc() <= hi:
                out.append(label)
    return out


def layout_problems(fig: Any, tolerance_px: float = 1.0) -> list[str]:
    """Everything wrong with ``fig``'s layout, in words (empty: fine)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    problems = []
    for t in _texts(fig, renderer):
        bb = t.get_window_extent(renderer)
        if (bb.x0 < canvas.x0 - tolerance_px or bb.y0 < canvas.y0 - tolerance_px
                or bb.x1 > canvas.x1 + tolerance_px or bb.y1 > canvas.y1 + tolerance_px):
            problems.append(f"text outside the canvas: {t.get_text()!r} at {bb.bounds} (canvas {canvas.bounds})")
    for ax in fig.axes:
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            boxes = [(lb.get_text(), lb.get_window_extent(renderer)) for lb in _tick_labels(axis, renderer)]
            for i in range(len(boxes)):
                for j in range(i + 1, len(boxes)):
                    a, b = boxes[i][1], boxes[j][1]
                    if a.overlaps(b) and a.width > 0 and b.width > 0:
                        problems.append(f"{name} tick labels overlap: {boxes[i][0]!r} and {boxes[j][0]!r}")
        if not ax.get_xlabel() and any(lb.get_text() for lb in ax.get_xticklabels()) and _numeric(ax.xaxis):
            problems.append(f"unlabelled x axis in {ax.get_title()!r}")
        if not ax.get_ylabel() and _numeric(ax.yaxis):
            problems.append(f"unlabelled y axis in {ax.get_title()!r}")
    return problems


def _numeric(axis: Any) -> bool:
    """A numeric (not categorical, not hidden) axis: its tick labels are numbers or units."""
    labels = [t.get_text() for t in axis.get_ticklabels() if t.get_text()]
    if not labels or not axis.get_visible():
        return False
    import re

    return all(re.fullmatch(r"[−\-+0-9.,e$\\{}^ mathrtimesKMGTB%]+", s) for s in labels)


def error_bars_from_one_seed(fig: Any) -> list[str]:
    """Error bars whose legend label does not say n ≥ 2 (the house style labels every
    spread with ``(n=…)``)."""
    import re
    from matplotlib.container import ErrorbarContainer

    bad = []
    for ax in fig.axes:
        for c in ax.containers:
            if isinstance(c, ErrorbarContainer) and (c.has_yerr or c.has_xerr):
                m = re.search(r"n=(\d+)", c.get_label() or "")
                if not m or int(m.group(1)) < 2:
                    bad.append(f"error bar without n ≥ 2: {c.get_label()!r}")
    return bad
