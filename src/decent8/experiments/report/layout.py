"""The paper's table layout of a sweep: constant row prefix, row axes, one column per
method, and the accuracies of the cells that match a (row, column)."""
from __future__ import annotations

import json
from typing import Any, Sequence

from ...algorithms import display_name, display_order
from ..presets import canonical_label
from .load import Sweep, _config_value, _short

_AXIS_TITLES = {"comp": "Comp. (%)", "skew": "Degree of skew", "model.norm": "Norm", "nodes": "Nodes",
                "algorithm": "Algorithm", "precision": "Precision"}
AGGREGATED = ("seed",)      # axes averaged over (mean ± s.e., n) instead of shown as rows
_ROW_TITLES = {"model": "Model", "graph": "Graph", "nodes": "Nodes (n)", "skew": "Skew"}


def column_name(spec: dict[str, str]) -> str:
    algo = spec.get("algorithm")
    name = display_name(algo) if algo else ""
    extra = [f"{k}={v}" for k, v in spec.items() if k not in ("algorithm", "precision")]
    if spec.get("precision") == "int8":
        name = "LP-" + (name or "int8")
    elif spec.get("precision") and not name:
        name = spec["precision"]
    return " ".join([name, *extra]).strip() or "accuracy"


def layout(sw: Sweep) -> tuple[dict[str, Any], list[str], dict[str, dict[str, Any]]]:
    """(constant row prefix, row axes, columns label -> spec) from the preset or inferred."""
    rep = sw.report or {}
    if rep.get("columns") is not None:
        return (dict(rep.get("rows") or {}), [a for a in rep.get("row_axes") or [] if a not in AGGREGATED],
                dict(rep["columns"]))
    col_keys = [k for k in ("algorithm", "precision", "optimizer.kind") if k in sw.axes]
    col_keys += _set_with_method(sw, col_keys)
    row_axes = [k for k in sw.axes if k not in col_keys and k not in AGGREGATED]
    specs: dict[str, dict[str, Any]] = {}
    for c in sw.cells:
        spec = {k: c.labels[k] for k in col_keys if k in c.labels}
        specs.setdefault(column_name(spec), spec)
    order = list(display_order())

    def rank(item: tuple[str, dict[str, Any]]) -> tuple:
        spec = item[1]
        algo = spec.get("algorithm", "")
        return (order.index(algo) if algo in order else len(order), algo, spec.get("precision") == "int8", item[0])

    columns = dict(sorted(specs.items(), key=rank))
    prefix: dict[str, Any] = {}
    cfgs = [c.config for c in sw.cells if c.config]
    for title, key in (("model", "model"), ("graph", "topology"), ("nodes", "nodes")):
        vals = {json.dumps(_config_value(cfg, key), default=str) for cfg in cfgs}
        if len(vals) == 1 and key not in sw.axes and _short(key) not in sw.axes \
                and _config_value(cfgs[0], key) is not None:
            prefix[title] = _config_value(cfgs[0], key)
    return prefix, row_axes, columns


def _set_with_method(sw: Sweep, col_keys: Sequence[str]) -> list[str]:
    """Axes set together with the method (``--cell "algorithm=choco compression=topk"``):
    each method has one value of them, and they differ between methods. They belong to the
    method's column, so that swept methods share the table's rows."""
    if not col_keys:
        return []
    out = []
    for a in sw.axes:
        if a in col_keys or a in AGGREGATED:
            continue
        by_method: dict[tuple, str | None] = {}
        if all(by_method.setdefault(tuple(c.labels.get(k) for k in col_keys), c.labels.get(a)) == c.labels.get(a)
               for c in sw.cells) and len(set(by_method.values())) > 1:
            out.append(a)
    return out


def _sort_key(v: str) -> tuple:
    try:
        return (0, float(v), "")
    except ValueError:
        return (1, 0.0, v)


def rows_of(sw: Sweep, row_axes: Sequence[str]) -> list[tuple[str, ...]]:
    seen: list[tuple[str, ...]] = []
    for c in sw.cells:
        key = tuple(c.labels.get(a, canonical_label(_config_value(c.config, a))) for a in row_axes)
        if key not in seen:
            seen.append(key)
    return seen


def _paper_value(sw: Sweep, row_axes: Sequence[str], row: tuple[str, ...], column: str) -> float | None:
    for rec in sw.paper:
        if all(canonical_label(rec.get(a)) == v for a, v in zip(row_axes, row) if a in rec) and column in rec:
            try:
                return float(rec[column])
            except (TypeError, ValueError):
                return None
    return None


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def cell_values(sw: Sweep, row_axes: Sequence[str], row: tuple[str, ...], spec: dict[str, Any],
                metric: str) -> tuple[list[float], int]:
    """(accuracies % of the matching finished cells — one per seed, matching count)."""
    match = [c for c in sw.cells
             if c.matches(dict(zip(row_axes, row))) and c.matches(spec)]
    return [100.0 * c.summary[metric] for c in match if c.summary and metric in c.summary], len(match)


def cell_value(sw: Sweep, row_axes: Sequence[str], row: tuple[str, ...], spec: dict[str, Any],
               metric: str) -> tuple[float | None, int, int]:
    """(mean accuracy % over the matching finished cells, finished count, matching count)."""
    done, n_all = cell_values(sw, row_axes, row, spec, metric)
    return (_mean(done) if done else None), len(done), n_all


def group_label(labels: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in labels.items() if k not in AGGREGATED)
