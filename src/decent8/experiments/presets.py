"""Experiment presets (``configs/paper/*.yaml``), the ``scale`` knob, and sweep plans.

A *preset* is a YAML file with a top-level ``config:`` mapping (a :class:`TrainConfig`),
the grid ``axes:``, and optionally ``title``, ``source``, ``report`` (the table layout)
and ``paper`` (the paper's numbers, read only by the report)::

    title: Table 3 — CIFAR-10, ResNet-20, 8-node directed ring
    config:
      data: {name: cifar10, batch_size: 32}
      model: resnet20
      ...
    axes:
      comp:                                   # named alternatives: label -> overrides
        "0":  {compression: identity, algorithm.gamma: 1.0}
        "99": {compression: topk, compression.ratio: 0.99, algorithm.gamma: 0.01}
      skew: [0.0, 0.4, 0.8, 0.9]              # a config key and its values
      algorithm: [deepsqueeze, choco]
      precision: [fp32, int8]
    report:
      rows: {model: ResNet-20, graph: Directed Ring, nodes: 8}
      row_axes: [comp, skew]
      columns: {DS: {algorithm: deepsqueeze, precision: fp32}, ...}
    paper:
      - {comp: "0", skew: 0.0, DS: 90.56, LP-DS: 90.57, Choco: 90.96, LP-Choco: 90.30}

On the command line an axis key replaces the preset's axis: ``skew=0,0.9`` sweeps two
values, ``skew=0.8`` or ``comp=99`` keeps one (the cells keep that label and their folder
names, so a partial sweep and the full one share cells). Any other ``key=value`` is a
fixed override of every cell.

``scale=s`` (0 < s <= 1) shrinks a run for CPU while keeping its schedule's shape:
epochs E -> max(1, round(s*E)) and every time in epochs (lr milestones, warm-up,
decay period) by the same factor; the train split to a stratified ``data.subset=s``
and the test split to ``data.test_subset=max(s, 0.1)`` unless those are set.
"""
from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..config import TrainConfig, load_config
from ..errors import ConfigError
from ..errors import did_you_mean

PRESET_DIR_ENV = "DECENT8_CONFIGS"
#: test split kept by ``scale`` at least this fraction (≥ 1,000 CIFAR-10 test images)
MIN_TEST_FRACTION = 0.1


# --------------------------------------------------------------------------- values
def format_value(v: Any) -> str:
    """A Python value as the right-hand side of a ``key=value`` override."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, list, dict)):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


def flatten(mapping: dict[str, Any], prefix: str = "") -> list[str]:
    """``{"data": {"name": "cifar10"}, "model": "resnet20"}`` -> ``["data.name=cifar10", "model=resnet20"]``."""
    out: list[str] = []
    for k, v in mapping.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out += flatten(v, key + ".")
        else:
            out.append(f"{key}={format_value(v)}")
    return out


def canonical_label(v: Any) -> str:
    """Axis labels compare as text; numbers are written with ``:g`` (0.0 -> "0", "0.40" -> "0.4")."""
    if isinstance(v, bool):
        return "true" if v else "false"
    s = str(v).strip()
    try:
        f = float(s)
    except ValueError:
        return s
    return f"{f:g}"


# --------------------------------------------------------------------------- presets
@dataclass
class Axis:
    key: str
    labels: list[str]
    overrides: list[list[str]]         # per label
    named: bool = False                # named alternatives (not a config key)


@dataclass
class Preset:
    path: Path
    name: str
    title: str
    source: str
    config: dict[str, Any]
    axes: list[Axis]
    report: dict[str, Any] = field(default_factory=dict)
    paper: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def config_overrides(self) -> list[str]:
        return flatten(self.config)


def preset_dirs() -> list[Path]:
    dirs = []
    if os.environ.get(PRESET_DIR_ENV):
        dirs.append(Path(os.environ[PRESET_DIR_ENV]))
    dirs.append(Path.cwd() / "configs")
    dirs.append(Path(__file__).resolve().parents[3] / "configs")  # the source checkout (editable install)
    out: list[Path] = []
    for d in dirs:
        if d not in out:
            out.append(d)
    return out


def list_presets() -> list[str]:
    names: set[str] = set()
    for d in preset_dirs():
        if d.is_dir():
            for p in d.rglob("*.yaml"):
                if is_preset_file(p):
                    names.add(p.relative_to(d).with_suffix("").as_posix())
    return sorted(names)


def is_preset_file(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            raw = yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(raw, dict) and "config" in raw and isinstance(raw.get("config"), dict)


def resolve_config_arg(arg: str) -> Path:
    """A config/preset argument as a file: a path, or a preset name under a configs folder."""
    p = Path(arg).expanduser()
    if p.is_file():
        return p
    name = arg[:-5] if arg.endswith(".yaml") else arg
    for d in preset_dirs():
        for cand in (d / f"{name}.yaml", d / "paper" / f"{name}.yaml"):
            if cand.is_file():
                return cand
    known = list_presets()
    hint = f"; presets: {', '.join(known)}" if known else ""
    raise ConfigError("config", f"{arg!r} is neither a file nor a preset under {', '.join(str(d) for d in preset_dirs())}"
                                + hint)


def _axis(key: str, spec: Any, where: str) -> Axis:
    if isinstance(spec, dict):
        labels, overrides = [], []
        for label, ov in spec.items():
            if ov is None:
                ov = {}
            if not isinstance(ov, dict):
                raise ConfigError(f"axes.{key}", f"{where}: alternative {label!r} must map options to values")
            labels.append(canonical_label(label))
            overrides.append(flatten(ov))
        return Axis(key, labels, overrides, named=True)
    if isinstance(spec, list) and spec:
        return Axis(key, [canonical_label(v) for v in spec], [[f"{key}={format_value(v)}"] for v in spec])
    raise ConfigError(f"axes.{key}", f"{where}: must be a non-empty list of values or a mapping label -> options")


def load_preset(path: Path, name: str | None = None) -> Preset:
    try:
        with open(path, encoding="utf-8") as f:
            raw = yaml.safe_load(f)
    except yaml.YAMLError as e:
        raise ConfigError("config", f"{path} is not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("config"), dict):
        raise ConfigError("config", f"{path} is not a preset (no top-level 'config:' mapping)")
    axes_raw = raw.get("axes") or {}
    if not isinstance(axes_raw, dict):
        raise ConfigError("axes", f"{path}: 'axes' must be a mapping of axis -> values")
    axes = [_axis(str(k), v, str(path)) for k, v in axes_raw.items()]
    known = {"title", "source", "config", "axes", "report", "paper"}
    return Preset(path=path, name=name or path.stem, title=str(raw.get("title") or path.stem),
                  source=str(raw.get("source") or ""), config=raw["config"], axes=axes,
                  report=raw.get("report") or {}, paper=list(raw.get("paper") or []),
                  extra={k: v for k, v in raw.items() if k not in known})


# --------------------------------------------------------------------------- scale
def scale_overrides(cfg: TrainConfig, scale: float, explicit: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """Overrides that shrink ``cfg`` by ``scale`` (see the module docstring)."""
    if not 0 < scale <= 1:
        raise ConfigError("scale", f"must be in (0, 1], got {scale}")
    if scale == 1:
        return []
    epochs = max(1, int(round(cfg.epochs * scale)))
    r = epochs / cfg.epochs
    o = cfg.optimizer
    out = [f"epochs={epochs}",
           f"optimizer.milestones={format_value([round(m * r, 6) for m in o.milestones])}",
           f"optimizer.warmup_epochs={round(o.warmup_epochs * r, 6)}",
           f"optimizer.decay_every={round(o.decay_every * r, 6)}"]
    if cfg.data.subset is None and "data.subset" not in explicit:
        out.append(f"data.subset={scale}")
    if cfg.data.test_subset is None and "data.test_subset" not in explicit:
        out.append(f"data.test_subset={min(1.0, max(scale, MIN_TEST_FRACTION))}")
    return out


# --------------------------------------------------------------------------- plans
@dataclass
class Cell:
    labels: dict[str, str]
    overrides: list[str]

    @property
    def name(self) -> str:
        """The cell's folder name, portable: ``skew=0.9`` → ``skew-0p9``; any character other
        than letters, digits, ``-`` and ``_`` (the ``:`` of ``algorithm=pkg.module:Class``) is ``-``."""
        import re

        if not self.labels:
            return "base"
        return "_".join(re.sub(r"[^A-Za-z0-9_-]", "-", f"{k}-{v}".replace(".", "p").replace(" ", ""))
                        for k, v in self.labels.items())

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.labels.items()) or "base"


@dataclass
class Plan:
    """A resolved sweep: base overrides (preset config, scale, fixed CLI values) and the cells."""
    config_path: str | None
    base: list[str]
    cells: list[Cell]
    axes: list[str]
    preset: Preset | None
    scale: float | None
    unscaled_epochs: int | None = None


def split_axis_value(value: str) -> list[str] | None:
    """``"0,0.4"`` -> ["0", "0.4"]; None when not a list (``[a,b]`` YAML lists stay single values)."""
    v = value.strip()
    if v.startswith("[") and v.endswith("]"):
        return None
    if "," not in v:
        return None
    parts = [p.strip() for p in v.split(",")]
    return parts


def make_plan(config_arg: str | None, overrides: list[str], cells: list[str] = ()) -> Plan:  # type: ignore[assignment]
    """Resolve a sweep command: the preset or config, ``scale=``, axes, fixed overrides, ``--cell`` alternatives."""
    preset: Preset | None = None
    config_path: str | None = None
    if config_arg is not None:
        p = resolve_config_arg(config_arg)
        if is_preset_file(p):
            by_name = not Path(config_arg).expanduser().is_file()   # "paper/table3_…" rather than a path
            preset = load_preset(p, (config_arg[:-5] if config_arg.endswith(".yaml") else config_arg) if by_name
                                 else p.stem)
        else:
            config_path = str(p)
    axes: list[Axis] = list(preset.axes) if preset else []
    fixed: list[str] = []
    scale: float | None = None
    explicit: set[str] = set()
    for item in overrides:
        if "=" not in item or item.startswith("="):
            raise ConfigError("override", f"{item!r} is not of the form key=value")
        key, value = (s.strip() for s in item.split("=", 1))
        if key == "scale":
            try:
                scale = float(value)
            except ValueError:
                raise ConfigError("scale", f"must be a number in (0, 1], got {value!r}") from None
            if not 0 < scale <= 1:
                raise ConfigError("scale", f"must be in (0, 1], got {value}")
            continue
        values = split_axis_value(value)
        if values is not None and any(v == "" for v in values):
            raise ConfigError(key, f"empty value in sweep list {value!r}")
        existing = next((a for a in axes if a.key == key), None)
        if existing is not None and existing.named:
            chosen = [canonical_label(v) for v in (values or [value])]
            bad = [c for c in chosen if c not in existing.labels]
            if bad:
                raise ConfigError(key, f"unknown value {bad[0]!r}{did_you_mean(bad[0], existing.labels)}; "
                                       f"allowed: {', '.join(existing.labels)}")
            idx = [existing.labels.index(c) for c in chosen]
            axes[axes.index(existing)] = Axis(key, [existing.labels[i] for i in idx],
                                              [existing.overrides[i] for i in idx], named=True)
            continue
        explicit.add(key)
        if values is None and existing is not None:
            # a preset axis fixed to one value stays an axis of one value: the cell keeps its label
            # (the report finds the paper's row) and its folder name (a later full sweep reuses it)
            axes[axes.index(existing)] = Axis(key, [canonical_label(value)], [[f"{key}={value}"]])
        elif values is None:
            fixed.append(f"{key}={value}")
        else:
            ax = Axis(key, [canonical_label(v) for v in values], [[f"{key}={v}"] for v in values])
            if existing is not None:
                axes[axes.index(existing)] = ax
            else:
                axes.append(ax)
    if cells:
        alt = Axis("cell", [c.strip() for c in cells], [c.split() for c in cells], named=True)
        for c in cells:
            for kv in c.split():
                if "=" not in kv:
                    raise ConfigError("cell", f"{kv!r} in --cell {c!r} is not of the form key=value")
        axes.insert(0, alt)

    base = preset.config_overrides if preset else []
    head = load_config(config_path, base + fixed)          # validates the fixed part once
    if scale is not None:
        fixed = fixed + scale_overrides(head, scale, explicit)
    grid: list[Cell] = []
    for combo in itertools.product(*[list(range(len(a.labels))) for a in axes]):
        labels: dict[str, str] = {}
        ov: list[str] = []
        for a, i in zip(axes, combo):
            if a.key == "cell":
                for kv in a.overrides[i]:
                    k, v = kv.split("=", 1)
                    labels[k] = canonical_label(v)
            else:
                labels[a.key] = a.labels[i]
            ov += a.overrides[i]
        grid.append(Cell(labels, ov))
    names = [c.name for c in grid]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError("sweep", f"two cells would share the run folder {dup[0]!r}; make the sweep values distinct")
    keys: list[str] = []
    for c in grid:
        for k in c.labels:
            if k not in keys:
                keys.append(k)
    return Plan(config_path=config_path, base=base + fixed, cells=grid, axes=keys, preset=preset, scale=scale,
                unscaled_epochs=head.epochs)


def cell_config(plan: Plan, cell: Cell) -> TrainConfig:
    return load_config(plan.config_path, plan.base + cell.overrides)
