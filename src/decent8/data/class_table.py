"""Per-node class-count tables: fixed-width text and a heatmap PNG (paper Figure 2, SPEC §2)."""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from ..atomic import save_figure
from ..errors import ConfigError


def _check_counts(counts: np.ndarray, class_names: Sequence[str] | None) -> tuple[np.ndarray, list[str]]:
    c = np.asarray(counts)
    if c.ndim != 2:
        raise ConfigError("counts", f"must be a 2-D [nodes, classes] array, got shape {c.shape}")
    names = [str(i) for i in range(c.shape[1])] if class_names is None else [str(s) for s in class_names]
    if len(names) != c.shape[1]:
        raise ConfigError("class_names", f"must have {c.shape[1]} entries, got {len(names)}")
    return c.astype(np.int64), names


def format_class_table(counts: np.ndarray, class_names: Sequence[str] | None = None) -> str:
    """Fixed-width text table: one row per node, one column per class, a ``total`` column,
    and a final ``total`` row with the column sums."""
    c, names = _check_counts(counts, class_names)
    header = ["node", *names, "total"]
    rows = [[str(i), *(str(v) for v in row), str(int(row.sum()))] for i, row in enumerate(c)]
    rows.append(["total", *(str(int(v)) for v in c.sum(axis=0)), str(int(c.sum()))])
    widths = [max(len(r[j]) for r in [header, *rows]) for j in range(len(header))]
    fmt = lambda r: "  ".join(f"{v:<{w}}" if j == 0 else f"{v:>{w}}" for j, (v, w) in enumerate(zip(r, widths)))
    sep = "-" * len(fmt(header))
    return "\n".join([fmt(header), sep, *(fmt(r) for r in rows[:-1]), sep, fmt(rows[-1])])


#: tables with more nodes than this are drawn at a fixed size, without a label per node
MAX_LABELLED_NODES = 128


def plot_class_heatmap(counts: np.ndarray, path: str | os.PathLike, title: str | None = None,
                       class_names: Sequence[str] | None = None) -> None:
    """Write a node x class heatmap PNG like the paper's Figure 2 (cell counts annotated
    when the table is small, with a colourbar). Written atomically: temp file + os.replace."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # no pyplot: no global backend state
    from matplotlib.figure import Figure

    c, names = _check_counts(counts, class_names)
    n, k = c.shape
    # at most MAX_LABELLED_NODES rows get their own label and height (issue 32: 10,000 nodes
    # made a 1,800-inch-tall figure, 6 GB and minutes); beyond, the figure is 12 in tall
    labelled = n <= MAX_LABELLED_NODES
    fig = Figure(figsize=(max(4.0, 0.6 * k + 2.0), max(3.0, 0.45 * n + 1.5) if labelled else 12.0))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    im = ax.imshow(c, aspect="auto", cmap="viridis", interpolation="nearest")
    fig.colorbar(im, ax=ax, label="samples")
    ax.set_xticks(range(k))
    long_names = max((len(s) for s in names), default=0) > 3
    ax.set_xticklabels(names, rotation=45 if long_names else 0, ha="right" if long_names else "center")
    if labelled:
        ax.set_yticks(range(n))
        ax.set_yticklabels([f"node {i}" for i in range(n)])
    ax.set_xlabel("class")
    ax.set_ylabel("node")
    if title:
        ax.set_title(title)
    if n * k <= 400:
        vmax = float(c.max()) if c.size else 0.0
        for i in range(n):
            for j in range(k):
                color = "black" if c[i, j] > 0.6 * vmax else "white"
                ax.text(j, i, str(int(c[i, j])), ha="center", va="center", fontsize=7, color=color)
    fig.tight_layout()

    save_figure(fig, path, dpi=120)
