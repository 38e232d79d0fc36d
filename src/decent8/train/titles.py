"""Figure titles: what the user sets (``title=``), else a short description of the config —
never a run folder's name, a figure number or a claim of authorship."""
from __future__ import annotations

from typing import Any
from ..algorithms import display_name
from ..config import partition_label

#: a figure title longer than this is wrapped (and is too long for a paper figure)
MAX_TITLE = 90


def compression_text(name: str, ratio: Any = None) -> str:
    """``topk`` at ratio 0.99 → ``top-k 1 % kept``; ``identity`` → ``uncompressed``."""
    name = str(name)
    if name in ("identity", "none"):
        return "uncompressed"
    if name in ("topk", "randomk", "random_k") and isinstance(ratio, (int, float)):
        kept = 100.0 * (1.0 - float(ratio))
        return f"{'top' if name == 'topk' else 'random'}-k, {kept:.3g} % kept"
    return name.split(":")[-1]


def config_title(cfg: Any) -> str:
    """``title`` if set, else e.g. ``Choco-SGD, top-k 1 % kept · directed_ring, 8 nodes, skew 0.8 · cnn on digits``."""
    given = getattr(cfg, "title", None)
    if given:
        return str(given)

    algo = cfg.algorithm.name
    try:
        head = display_name(algo)
    except Exception:   # a user's algorithm by import path
        head = algo
    head = head.split(":")[-1]
    comp = compression_text(cfg.compression.name, cfg.compression.params.get("ratio"))
    model = str(cfg.model.name).split(":")[-1]
    prec = " (8-bit)" if getattr(cfg, "precision", "fp32") == "int8" else ""
    return (f"{head}, {comp} · {str(cfg.topology.name).split(':')[-1].replace('_', ' ')}, {cfg.nodes} nodes, "
            f"{partition_label(cfg)} · {model}{prec} on {cfg.data.name}")


__all__ = ["MAX_TITLE", "compression_text", "config_title"]
