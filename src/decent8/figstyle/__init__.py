"""decent8's house style for figures: one matplotlib style sheet, applied by every figure
decent8 writes, and the few axis rules a paper figure needs.

* :func:`styled` — a decorator: the function draws (and saves) under ``decent8.mplstyle``.
* :func:`new_figure` — a Figure on an Agg canvas (no pyplot state), laid out by matplotlib's
  constrained layout, with a title wrapped to its width (:func:`set_title`).
* :func:`save` — the PNG and, beside it, a vector PDF, each written atomically.
* :mod:`.axes` — honest y-ranges, readable log byte axes, spreads over seeds.
* :mod:`.layout` — what a figure test checks: text outside the canvas, overlapping tick labels.
"""
from __future__ import annotations

import functools
import os
import textwrap
from pathlib import Path
from typing import Any, Callable, TypeVar
from ..atomic import atomic_path
from ..own_files import figure_metadata

STYLE = Path(__file__).with_name("decent8.mplstyle")
#: Okabe & Ito's colour-blind-safe palette (the style sheet's colour cycle), black last
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
LINESTYLES = ["-", "--", "-.", ":"]

F = TypeVar("F", bound=Callable[..., Any])


def styled(func: F) -> F:
    """Run ``func`` (which builds and saves figures) under the house style sheet."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import matplotlib.style

        with matplotlib.style.context(str(STYLE)):
            return func(*args, **kwargs)
    return wrapper  # type: ignore[return-value]


def series_style(i: int) -> dict[str, Any]:
    """Colour, marker and line style of series ``i``: the palette first, then distinct
    markers and line styles, so no two of the first 32 series look alike (colour or not)."""
    return {"color": PALETTE[i % len(PALETTE)], "marker": MARKERS[(i // len(PALETTE) + i) % len(MARKERS)],
            "linestyle": LINESTYLES[(i // len(PALETTE)) % len(LINESTYLES)]}


def colors(n: int) -> list[Any]:
    """``n`` colours, none repeated and colour-blind safe: the Okabe–Ito palette for up to 8,
    else ``n`` evenly spaced steps of viridis (perceptually uniform, readable by the common
    colour-vision deficiencies and in grey), e.g. for 10 classes."""
    if n <= len(PALETTE):
        return PALETTE[:n]
    import matplotlib

    cmap = matplotlib.colormaps["viridis"]
    return [cmap(i / (n - 1) * 0.95) for i in range(n)]


def wrap(title: str, width_in: float, fontsize: float = 10) -> str:
    """``title`` wrapped to ``width_in`` inches (about 0.6·fontsize points per character)."""
    chars = max(20, int(width_in * 72 / (0.62 * fontsize)))
    return "\n".join(textwrap.wrap(title, chars, break_on_hyphens=False)) if title else ""


def new_figure(width: float, height: float) -> Any:
    """A Figure on an Agg canvas, with the style's layout (call under :func:`styled`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def set_title(fig: Any, title: str) -> None:
    """The figure's title, wrapped to its width (constrained layout makes room for it)."""
    if title:
        import matplotlib

        size = matplotlib.rcParams["figure.titlesize"]
        size = size if isinstance(size, (int, float)) else 10
        fig.suptitle(wrap(title, fig.get_figwidth() * 0.95, size))


def set_axes_title(ax: Any, title: str) -> None:
    """An axes title wrapped to the axes' width."""
    if title:
        import matplotlib

        size = matplotlib.rcParams["axes.titlesize"]
        size = size if isinstance(size, (int, float)) else 9
        width = ax.get_position().width * ax.figure.get_figwidth()
        ax.set_title(wrap(title, width, size))


def vector_path(path: str | os.PathLike) -> Path:
    """Where the vector copy of the PNG ``path`` goes: the same name, ``.pdf``."""
    return Path(path).with_suffix(".pdf")


def save(fig: Any, path: str | os.PathLike) -> None:
    """``fig`` as ``path`` (PNG) and ``path`` with ``.pdf`` (vector), each written atomically
    and marked as decent8's (:mod:`decent8.own_files`)."""

    for target, fmt in ((Path(path), "png"), (vector_path(path), "pdf")):
        with atomic_path(target) as tmp:
            fig.savefig(tmp, format=fmt, metadata=figure_metadata(fmt))
