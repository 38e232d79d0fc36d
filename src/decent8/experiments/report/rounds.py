"""The report's section on the final consensus rounds (SPEC §3, §8): for every finished
cell, how many rounds of which kind ran (``algorithm.consensus``: compressed, the
algorithm's own gossip round; exact, x_i ← Σ_j W_ij x_j) and the accuracies before and
after them. The headline numbers of the report are the after-rounds ones.
"""
from __future__ import annotations

import math
from typing import Any

from .load import CellResult, Sweep


def _num(v: Any) -> float | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    return float(v) if ok else None


def rounds_of(cell: CellResult) -> tuple[int, str, dict[str, float | None], dict[str, float | None]] | None:
    """(rounds, kind, before, after) of a finished cell with final rounds, else None. Summaries
    written before ``algorithm.consensus`` existed ran the compressed kind."""
    s = cell.summary or {}
    rounds = _num(s.get("consensus_rounds"))
    if not rounds:
        return None
    b = s.get("before_consensus_rounds")
    b = b if isinstance(b, dict) else {}
    # older summaries lack the distance before the rounds: the last epoch's metrics row has it
    epochs = [r for r in cell.metrics if "after_consensus_rounds" not in r]
    last = epochs[-1] if epochs else {}
    keys = ("mean_node_accuracy", "averaged_model_accuracy", "consensus_distance")
    return (int(rounds), str(s.get("consensus") or "compressed"),
            {k: _num(b.get(k, last.get(k))) for k in keys}, {k: _num(s.get(k)) for k in keys})


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.2f}"


def _arrow(a: float | None, b: float | None, fmt) -> str:
    return f"{fmt(a)} → {fmt(b)}"


def rounds_section(sw: Sweep) -> list[str]:
    """Markdown lines (empty when no finished cell ran final rounds)."""
    rows = [(c, r) for c in sw.cells if c.summary for r in [rounds_of(c)] if r is not None]
    if not rows:
        return []
    kinds = sorted({f"{n} {k}" for _, (n, k, _, _) in rows})
    lines = ["## The final consensus rounds", "",
             f"Rounds run after training: {', '.join(kinds)} (`algorithm.consensus`: compressed = the algorithm's "
             "own gossip round, exact = uncompressed averaging x_i ← Σ_j W_ij x_j with the same W). The numbers "
             "above are after them; here before → after, accuracies in %.", "",
             "| cell | rounds | mean node acc. | averaged-model acc. | consensus distance |",
             "| --- | --- | --- | --- | --- |"]
    for c, (n, kind, before, after) in rows:
        dist = _arrow(before["consensus_distance"], after["consensus_distance"],
                      lambda v: "–" if v is None else f"{v:.3g}")
        lines.append(f"| {c.name} | {n} {kind} | {_arrow(before['mean_node_accuracy'], after['mean_node_accuracy'], _pct)} "
                     f"| {_arrow(before['averaged_model_accuracy'], after['averaged_model_accuracy'], _pct)} | {dist} |")
    return lines + [""]
