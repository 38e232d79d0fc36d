"""Per-node class-count tables: fixed-width text and a heatmap PNG (paper Figure 2, SPEC §2)."""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from ..errors import ConfigError
from ..figstyle import new_figure, save, set_axes_title, styled


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


@styled
def plot_class_heatmap(counts: np.ndarray, path: str | os.PathLike, title: str | None = None,
                       class_names: Sequence[str] | None = None) -> None:
    """Write a node x class heatmap like the paper's Figure 2 (cell counts annotated when
    the table is small, with a colourbar), as PNG and PDF, in the house style. At most ~32
    node and class labels are written (every k-th beyond that), so labels never overlap."""
    c, names = _check_counts(counts, class_names)
    n, k = c.shape
    fig = new_figure(max(4.0, min(0.6 * k + 2.0, 12.0)), max(3.0, min(0.3 * n + 1.5, 9.0)))
    ax = fig.add_subplot(1, 1, 1)
    im = ax.imshow(c, aspect="auto", cmap="viridis", interpolation="nearest")
    ax.grid(False)
    fig.colorbar(im, ax=ax, label="samples")
    long_names = max((len(s) for s in names), default=0) > 3
    xs = list(range(0, k, max(1, -(-k // (16 if long_names else 32)))))
    ax.set_xticks(xs)
    ax.set_xticklabels([names[j] for j in xs], rotation=90 if long_names else 0)
    ys = list(range(0, n, max(1, -(-n // 32))))
    ax.set_yticks(ys)
    ax.set_yticklabels([str(i) for i in ys])
    ax.set_xlabel("class")
    ax.set_ylabel("node")
    set_axes_title(ax, title or "")
    if n * k <= 400:
        vmax = float(c.max()) if c.size else 0.0
        for i in range(n):
            for j in range(k):
                color = "black" if c[i, j] > 0.6 * vmax else "white"
                ax.text(j, i, str(int(c[i, j])), ha="center", va="center", fontsize=7, color=color)
    save(fig, path)
