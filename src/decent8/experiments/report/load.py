"""Reading a sweep folder (or arbitrary run folders) into a :class:`Sweep`: the plan in
``sweep.json`` (or the cells recovered from the run folders' ``config.yaml``) and each
cell's ``summary.json``, ``metrics.jsonl`` and ``config.yaml``; damaged or foreign files
count as missing values, never as errors."""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml

from ...config import COMPONENT_GROUPS, EXECUTION_OPTIONS, flatten, normalize_config
from ...errors import ConfigError
from ...train.run_dir import STALE_AFTER_S, remove_stale_temporaries
from ..presets import canonical_label

SWEEP_FILE = "sweep.json"


@dataclass
class CellResult:
    name: str
    labels: dict[str, str]
    path: Path
    summary: dict[str, Any] | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    def matches(self, spec: dict[str, Any]) -> bool:
        return all(canonical_label(self.labels.get(k, _config_value(self.config, k))) == canonical_label(v)
                   for k, v in spec.items())


@dataclass
class Sweep:
    path: Path
    title: str
    cells: list[CellResult]
    axes: list[str]
    report: dict[str, Any]
    paper: list[dict[str, Any]]
    paper_data_gb: dict[str, Any]
    scale: float | None
    source: str = ""


def _config_value(cfg: dict[str, Any], key: str) -> Any:
    group, dot, option = key.partition(".")
    if group in COMPONENT_GROUPS and dot and "." not in option and isinstance(cfg.get(group), dict) \
            and option not in cfg[group]:
        key = f"{group}.params.{option}"   # a component's keyword argument (compression.ratio)
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    if isinstance(node, dict) and "name" in node:
        return node["name"]
    return node




def _read_json(p: Path) -> Any:
    try:
        return json.loads(p.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


#: summary.json / metrics.jsonl values the report computes with: finite numbers or absent
_NUMERIC = ("mean_node_accuracy", "averaged_model_accuracy", "min_node_accuracy", "max_node_accuracy",
            "bytes_sent_per_node", "wall_time_s", "sim_time_s", "mean_node_loss", "averaged_model_loss",
            "consensus_distance", "train_loss", "epoch", "epochs")
def _clean_numbers(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without the values the report computes with that are not finite numbers (an
    edited, foreign or damaged file): such a value counts as missing, not as an error."""
    return {k: v for k, v in d.items() if k not in _NUMERIC or _number(v)}


def _read_summary(path: Path) -> dict[str, Any] | None:
    s = _read_json(path / "summary.json")
    return _clean_numbers(s) if isinstance(s, dict) else None


def _read_metrics(path: Path) -> list[dict[str, Any]]:
    """The usable rows of metrics.jsonl: JSON objects with a numeric epoch (bytes that are
    not UTF-8 text or JSON are skipped; values that are not numbers count as missing, and
    the plots draw only the values a row has)."""
    try:
        text = (path / "metrics.jsonl").read_bytes().decode("utf-8", "replace")
    except OSError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(row, dict):
            row = _clean_numbers(row)
            if "epoch" in row:
                rows.append(row)
    return rows


def _read_yaml(f: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(f.read_bytes().decode("utf-8"))
    except (OSError, ValueError, yaml.YAMLError, RecursionError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _read_cell(path: Path, name: str, labels: dict[str, str]) -> CellResult:
    c = CellResult(name=name, labels=labels, path=path)
    remove_stale_temporaries(path, STALE_AFTER_S)  # a killed run's; a live run's (a sweep running) are spared
    c.summary = _read_summary(path)
    c.metrics = _read_metrics(path)
    c.config = normalize_config(_read_yaml(path / "config.yaml"))   # an older run's topology.rows: topology.params.rows
    return c


def _plan_cells(plan: dict[str, Any]) -> list[tuple[str, dict[str, str]]] | None:
    """The (name, labels) cells of a sweep.json, or None when it is not one decent8 wrote."""
    cells = plan.get("cells")
    if not isinstance(cells, list):
        return None
    out = []
    for c in cells:
        if not (isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("labels"), dict)):
            return None
        if not c["name"] or "/" in c["name"] or c["name"] in (".", ".."):
            return None
        out.append((c["name"], {str(k): canonical_label(v) for k, v in c["labels"].items()}))
    return out


#: options that do not define an experiment (where it runs and how the simulator executes it)
_IGNORED = EXECUTION_OPTIONS | {"checkpoint", "eval_every", "device"}


def load_sweep(folder: str | os.PathLike) -> Sweep:
    """The cells and layout of a sweep folder (with or without sweep.json)."""
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError("report", f"{str(folder)!r} is not a folder")
    plan = _read_json(root / SWEEP_FILE)
    planned = _plan_cells(plan) if isinstance(plan, dict) else None
    if planned:
        cells = [_read_cell(root / name, name, labels) for name, labels in planned]
        return Sweep(root, str(plan.get("title") or describe(cells, _list(plan.get("axes")))), cells,
                     _list(plan.get("axes")),
                     _dict(plan.get("report")), _list(plan.get("paper"), dict),
                     _dict(plan.get("paper_data_gb")), plan.get("scale") if _number(plan.get("scale")) else None,
                     str(plan.get("source") or ""))
    runs = sorted(p for p in root.iterdir() if (p / "config.yaml").is_file())
    if not runs:
        raise ConfigError("report", f"{str(folder)!r} is not a sweep folder (no {SWEEP_FILE} and no run folders "
                                    f"with config.yaml)")
    return _sweep_from_runs(root, runs, None)


def describe(cells: Sequence[CellResult], axes: Sequence[str]) -> str:
    """A short title from what the cells share: ``digits, 8 nodes, 2 epochs`` (the default of
    figure titles and report.md's heading; what they vary is in each figure's axes and legend)."""
    cfgs = [c.config for c in cells if c.config]
    if not cfgs:
        return "runs"

    def shared(key: str) -> Any:
        vals = {json.dumps(_config_value(cfg, key), default=str) for cfg in cfgs}
        return _config_value(cfgs[0], key) if len(vals) == 1 else None

    bits = [str(shared("data")) if shared("data") is not None else "",
            f"{shared('nodes')} nodes" if shared("nodes") is not None and "nodes" not in axes else "",
            f"{shared('epochs')} epochs" if shared("epochs") is not None and "epochs" not in axes else ""]
    return ", ".join(b for b in bits if b) or "runs"


def _list(v: Any, kind: type = str) -> list[Any]:
    """The items of type ``kind`` of a list read from sweep.json (nothing else)."""
    return [x for x in v if isinstance(x, kind)] if isinstance(v, list) else []


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _sweep_from_runs(root: Path, runs: Sequence[Path], title: str | None) -> Sweep:
    cells = [_read_cell(p, p.name, {}) for p in runs]
    flats = [flatten(c.config) for c in cells]
    keys = sorted({k for f in flats for k in f})
    varying = [k for k in keys if k not in _IGNORED and _differs([f.get(k) for f in flats])]
    for c, f in zip(cells, flats):
        c.labels = {_short(k): canonical_label(f.get(k)) for k in varying}
    axes = [_short(k) for k in varying]
    return Sweep(root, title or describe(cells, axes), cells, axes, {}, [], {}, None)


def _differs(values: Sequence[Any]) -> bool:
    """Whether an option tells runs apart: two or more values that are set. A value missing
    (an older run's config) or null (a default the option's group fills in, such as
    ``topology.degree`` of another graph) beside one set value is no difference."""
    return len({json.dumps(v, default=str) for v in values if v is not None}) > 1


def _short(key: str) -> str:
    return key[:-5] if key.endswith(".name") else key


def is_run_folder(path: str | os.PathLike) -> bool:
    p = Path(path)
    return (p / "config.yaml").is_file() and ((p / "summary.json").is_file() or (p / "metrics.jsonl").is_file())


def load_runs(paths: Sequence[str | os.PathLike], title: str | None = None) -> Sweep:
    """Arbitrary run folders as one sweep: the options that differ between them are its axes
    (runs that differ only in ``seed`` aggregate)."""
    runs = []
    for p in paths:
        if not is_run_folder(p):
            raise ConfigError("report", f"{str(p)!r} is not a run folder (no config.yaml with summary.json or "
                                        f"metrics.jsonl)")
        runs.append(Path(p))
    return _sweep_from_runs(Path("."), runs, title)
