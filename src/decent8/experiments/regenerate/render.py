"""A documented table rendered from run summaries: one row per cell, each column a metric
written as mean ± sample std over the seeds (or one column per seed)."""
from __future__ import annotations

from typing import Any, Callable

from ..aggregate import format_mean_std
from .catalog import PINNED, REPO, Result


def _finite(xs: list[float | None]) -> list[float]:
    return [x for x in xs if x is not None]


def _acc(xs: list[float | None]) -> str:
    ok = _finite(xs)
    if not ok:
        return "diverged"
    text = format_mean_std([100 * x for x in ok], show_n=False) + " %"
    return text if len(ok) == len(xs) else f"{text} ({len(xs) - len(ok)} of {len(xs)} diverged)"


def _bytes(xs: list[float | None]) -> str:
    ok = _finite(xs)
    if not ok:
        return "—"
    b = sum(ok) / len(ok)
    return f"{b / 1e6:.2f} MB" if b >= 1e6 else f"{b / 1e3:.1f} KB"


def _general(xs: list[float | None]) -> str:
    ok = _finite(xs)
    return f"{sum(ok) / len(ok):.3g}" if ok else "—"


def _count(xs: list[float | None]) -> str:
    ok = _finite(xs)
    return f"{int(ok[0]):,}" if ok else "—"


FORMAT: dict[str, tuple[str, Callable[[list[float | None]], str]]] = {
    "mean_node_accuracy": ("mean node acc.", _acc),
    "averaged_model_accuracy": ("averaged-model acc.", _acc),
    "min_node_accuracy": ("worst node acc.", _acc),
    "bytes_sent_per_node": ("bytes sent / node", _bytes),
    "consensus_distance": ("consensus distance (mean)", _general),
    "message_bytes": ("message B / step", _count),
}

def _values(runs: list[dict[str, Any] | None], key: str) -> list[float | None]:
    return [None if r is None else float(r[key]) for r in runs]


def _row_cells(result: Result, runs: list[dict[str, Any] | None]) -> list[str]:
    cells: list[str] = []
    for c in result.columns:
        if c == "per_seed":
            xs = _values(runs, result.per_seed_metric)
            cells += ["diverged" if x is None else f"{100 * x:.2f}" for x in xs]
            if len(xs) > 1:
                cells.append(_acc(xs))
        else:
            cells.append(FORMAT[c][1](_values(runs, c)))
    return cells


def _header(result: Result) -> list[str]:
    names: list[str] = []
    for c in result.columns:
        if c == "per_seed":
            metric = FORMAT[result.per_seed_metric][0]
            names += [f"seed {s}" for s in result.seeds] if len(result.seeds) > 1 else [f"{metric} (%)"]
            if len(result.seeds) > 1:
                names.append(f"{metric}: mean ± std")
        else:
            names.append(FORMAT[c][0])
    return names


def render_row(result: Result, label: str, runs: list[dict[str, Any] | None]) -> str:
    """One row of the table (what a cheap test reruns)."""
    return f"| {label} | " + " | ".join(_row_cells(result, runs)) + " |"


def render(result: Result, summaries: dict[str, list[dict[str, Any] | None]]) -> str:
    """The markdown table written between the markers."""
    seeds = ", ".join(map(str, result.seeds))
    names = _header(result)
    lines = [f"| run ({'seed' if len(result.seeds) == 1 else 'seeds'} {seeds}) | " + " | ".join(names) + " |",
             "| --- |" + " --- |" * len(names)]
    lines += [render_row(result, label, runs) for label, runs in summaries.items()]
    setting = ("; every run: `" + " ".join(result.common).replace(str(REPO.parent), "..") + "`"
               if result.common else "")
    chunk = ("sim.chunk as in each row" if any(o.startswith("sim.chunk=") for _, c in result.cells for o in c)
             else PINNED[0])
    note = (f"\n\n(`python -m decent8.experiments.regenerate {result.name}`; mean ± sample std over seeds, "
            f"{chunk}{setting})" if len(result.seeds) > 1 else
            f"\n\n(`python -m decent8.experiments.regenerate {result.name}`, {chunk}{setting})")
    return "\n".join(lines) + note
