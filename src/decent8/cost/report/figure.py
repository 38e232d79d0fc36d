"""Figure 7 of the paper for a cost report: where training memory and energy go, FP32 vs 8-bit."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...figstyle import PALETTE, new_figure, save, set_title, styled
from .tables import MODEL_LABELS

_COMPONENT_COLORS = dict(zip(("weights", "gradients", "optimizer", "algorithm_buffers", "activations"), PALETTE))


def figure_title(report: dict[str, Any]) -> str:
    """``Training cost per node and iteration, FP32 vs 8-bit — ResNet-20 (range_evonorm), cifar10, batch 32``."""
    label = MODEL_LABELS.get(report["model"], report["model"])
    norm = f" ({report['norm']})" if report.get("norm") not in (None, "none") else ""
    return (f"Training cost per node and iteration, FP32 vs 8-bit — {label}{norm}, {report['dataset']}, "
            f"batch {report['batch']}")


@styled
def plot_report(report: dict[str, Any], path: str | os.PathLike, title: str | None = None) -> Path:
    """Figure 7 of the paper for ``report``: where training memory and energy go, FP32 vs 8-bit.

    In the house style (:mod:`decent8.figstyle`), as the PNG ``path`` and a PDF beside it,
    each written atomically; ``title``: the figure's (default :func:`figure_title`). Returns the path.
    """
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ConfigError("--plot", f"writes a PNG; give a path ending in .png, got {os.fspath(path)!r}")
    if path.exists() and path.is_dir():
        raise ConfigError("--plot", f"{os.fspath(path)!r} is a folder; give a file path ending in .png")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError("--plot", f"folder {os.fspath(parent)!r} does not exist")

    sec = report["training"]
    fig = new_figure(11, 4.6)
    ax_m, ax_e, ax_i = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1.2, 1.2, 1.0]})
    labels = ["FP32", "8-bit"]
    # memory by component
    bottoms = [0.0, 0.0]
    for comp, color in _COMPONENT_COLORS.items():
        vals = [sec["memory_breakdown_mb"][p][comp] for p in ("fp32", "int8")]
        if not any(vals):
            continue
        ax_m.bar(labels, vals, bottom=bottoms, color=color, label=comp.replace("_", " "))
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    for x, total in enumerate(bottoms):
        ax_m.annotate(f"{total:.1f} MB", (x, total), ha="center", va="bottom", fontsize=8)
    ax_m.set_ylabel("training memory per node (MB = 2²⁰ B)")
    ax_m.set_title("memory")
    ax_m.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncols=2)
    # energy by layer kind (training)
    kinds = list(dict.fromkeys(list(sec["energy_by_kind_mj"]["fp32"]) + list(sec["energy_by_kind_mj"]["int8"])))
    bottoms = [0.0, 0.0]
    for i, kind in enumerate(kinds):
        vals = [sec["energy_by_kind_mj"][p].get(kind, 0.0) for p in ("fp32", "int8")]
        ax_e.bar(labels, vals, bottom=bottoms, color=PALETTE[i % len(PALETTE)], label=kind)
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    for x, total in enumerate(bottoms):
        ax_e.annotate(f"{total:.3g} mJ", (x, total), ha="center", va="bottom", fontsize=8)
    ax_e.set_ylabel("training energy per node per iteration (mJ)")
    ax_e.set_title(f"compute energy (×{sec['energy_mj']['ratio']:.1f})")
    ax_e.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncols=2)
    # inference
    inf = report["inference"]
    x = [0, 1]
    ax_i.bar([v - 0.2 for v in x], [inf["memory_mb"]["fp32"], inf["memory_mb"]["int8"]], width=0.4,
             color=PALETTE[0], label="weights (MB)")
    ax_i2 = ax_i.twinx()
    ax_i2.bar([v + 0.2 for v in x], [inf["energy_mj"]["fp32"], inf["energy_mj"]["int8"]], width=0.4,
              color=PALETTE[1], label="energy (mJ)")
    ax_i.set_xticks(x, labels)
    ax_i.set_ylabel("inference memory (MB)")
    ax_i2.set_ylabel("inference energy per batch (mJ)")
    ax_i.set_title("inference")
    h1, l1 = ax_i.get_legend_handles_labels()
    h2, l2 = ax_i2.get_legend_handles_labels()
    ax_i.legend(h1 + h2, l1 + l2, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncols=2)
    for ax in (ax_m, ax_e, ax_i, ax_i2):
        ax.set_ylim(0, ax.get_ylim()[1] * 1.12)
    for ax in (ax_m, ax_e, ax_i):
        ax.grid(False, axis="x")
    ax_i2.grid(False)
    ax_i2.spines["right"].set_visible(True)
    set_title(fig, title or figure_title(report))
    save(fig, path)
    return path
