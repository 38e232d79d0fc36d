"""Axis rules of decent8's figures: y-ranges with honest padding, readable logarithmic
byte axes, and spreads over seeds that are only drawn when there are ≥ 2."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

#: an accuracy axis (in %) spans at least this many points, so 0.1 points look small
MIN_ACCURACY_SPAN = 2.0

_UNITS = [(1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB"), (1.0, "B")]


def unit_of(value: float) -> tuple[float, str]:
    """The decimal byte unit that fits ``value`` (its scale and name: 467 226 → (1e3, "KB"))."""
    for scale, name in _UNITS:
        if abs(value) >= scale:
            return scale, name
    return 1.0, "B"


def human_bytes(value: float, digits: int = 3) -> str:
    """``value`` bytes in the unit that fits, with ``digits`` significant digits: '467 KB'."""
    scale, name = unit_of(value)
    v = value / scale
    return f"{v:.{digits}g} {name}"


def spread(values: Sequence[float]) -> tuple[float, float | None, int]:
    """Mean, sample standard deviation (None for one value: no error bar from one seed), n."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, None, n
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1)), n


def with_n(label: str, n: int) -> str:
    """A legend label that says how many seeds a point or band stands for."""
    return f"{label} (n={n})"


def honest_ylim(ax: Any, lows: Sequence[float], highs: Sequence[float], min_span: float = MIN_ACCURACY_SPAN,
                bounds: tuple[float, float] = (0.0, 100.0), pad: float = 0.15) -> None:
    """A y-range around [min(lows), max(highs)] (error bars included) that spans at least
    ``min_span`` and is padded by ``pad`` of its span on each side, kept inside ``bounds``."""
    if not lows or not highs:
        return
    lo, hi = min(lows), max(highs)
    span = max(hi - lo, min_span)
    mid = (lo + hi) / 2
    lo, hi = mid - span / 2 - pad * span, mid + span / 2 + pad * span
    if lo < bounds[0]:
        lo, hi = bounds[0], min(bounds[1], hi + bounds[0] - lo)
    if hi > bounds[1]:
        lo, hi = max(bounds[0], lo - (hi - bounds[1])), bounds[1]
    ax.set_ylim(lo, hi)


def bytes_axis(ax: Any, which: str = "x") -> None:
    """A logarithmic byte axis labelled in units (``1 KB``, ``10 MB``): decades labelled, the
    ticks in between unlabelled (the default formatter's minor labels overlap), except the 2
    and 5 of a range of 1.2–2.5 decades; 1, 2 and 5 of each decade for a range of 0.5–1.2
    decades holding at least three of them (10 KB, 20 KB, 50 KB); otherwise, under 1.2 decades,
    round values in the unit (200 KB, 300 KB, 400 KB) a sixth of the axis apart at least, where
    the default falls back to a dense linear locator. Call after the data is drawn."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    ax.autoscale_view()
    lo, hi = (ax.get_xlim() if which == "x" else ax.get_ylim())
    fmt = FuncFormatter(lambda v, _pos: human_bytes(v, 3))
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1) if lo > 0 else range(0)
    one_two_five = [m * 10.0 ** e for e in decades for m in (1.0, 2.0, 5.0) if lo <= m * 10.0 ** e <= hi]
    if lo > 0 and 0.5 <= math.log10(hi / lo) < 1.2 and len(one_two_five) >= 3:   # about a decade: 1-2-5 steps
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=12))
    elif lo > 0 and math.log10(hi / lo) < 1.2:   # less: round values in the unit (fewer 1-2-5 values in view)
        scale, _ = unit_of(hi)
        axis.set_major_locator(_Scaled(MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]), scale))
    else:
        axis.set_major_locator(LogLocator(base=10, numticks=8))
    axis.set_major_formatter(fmt)
    axis.set_minor_locator(LogLocator(base=10, subs="auto", numticks=8))
    axis.set_minor_formatter(NullFormatter())
    if lo > 0 and 1.2 <= math.log10(hi / lo) < 2.5:   # two decades or so: 2 and 5 labelled too
        axis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0), numticks=8))
        axis.set_minor_formatter(fmt)
        import matplotlib

        # minor ticks are shorter: pad their labels so they line up with the decades'
        key = "xtick" if which == "x" else "ytick"
        rc = matplotlib.rcParams
        ax.tick_params(axis=which, which="minor",
                       pad=rc[f"{key}.major.pad"] + rc[f"{key}.major.size"] - rc[f"{key}.minor.size"])


class _Scaled:
    """A locator that picks round values in a unit (KB, MB) rather than in bytes."""

    def __new__(cls, inner: Any, scale: float) -> Any:
        from matplotlib.ticker import Locator

        class Scaled(Locator):
            def __call__(self) -> Any:
                lo, hi = self.axis.get_view_interval()
                return self.tick_values(lo, hi)

            def tick_values(self, vmin: float, vmax: float) -> Any:
                ticks = [v * scale for v in inner.tick_values(vmin / scale, vmax / scale) if v > 0]
                # round values are evenly spaced, but a log axis crowds the larger ones: keep a tick
                # only a sixth of the axis (in log units) past the last one kept
                gap = math.log10(vmax / vmin) / 6 if vmin > 0 and vmax > vmin else 0.0
                kept: list[float] = []
                for v in ticks:
                    if not kept or math.log10(v / kept[-1]) >= gap:
                        kept.append(v)
                return np.asarray(kept)

        return Scaled()


def log_axis(ax: Any, which: str = "y") -> None:
    """A logarithmic axis whose in-between ticks are unlabelled (their labels overlap). Call
    after the data is drawn: a range holding fewer than two powers of ten gets 1-2-5 values
    labelled (0.2, 0.5, 1, 2) or, for less than about half a decade, three to five round
    values (0.4, 0.45, 0.5), so that the axis always has at least two numbers."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullFormatter, NullLocator

    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    ax.autoscale_view()
    lo, hi = (ax.get_xlim() if which == "x" else ax.get_ylim())
    def values(mantissas: tuple[float, ...]) -> list[float]:
        decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
        return [m * 10.0 ** e for e in decades for m in mantissas if lo <= m * 10.0 ** e <= hi]

    if lo > 0 and hi > lo and len(values((1.0,))) < 2:   # fewer than two powers of ten in view
        one_two_five = values((1.0, 2.0, 5.0))
        locator = FixedLocator(one_two_five) if len(one_two_five) >= 3 else \
            _Scaled(MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]), 1.0)
        axis.set_major_locator(locator)
        axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.3g}"))
        axis.set_minor_locator(NullLocator())
        return
    axis.set_major_locator(LogLocator(base=10, numticks=7))
    axis.set_minor_formatter(NullFormatter())


def has_tick_labels(axis: Any) -> bool:
    """True when ``axis`` (an x- or y-axis, drawn) shows at least one numbered tick in its view."""
    lo, hi = sorted(axis.get_view_interval())
    labels = [t.get_text() for t in axis.get_ticklabels(which="both")
              if t.get_visible() and t.get_text() and lo <= t.get_position()[0 if axis.axis_name == "x" else 1] <= hi]
    return bool(labels)
