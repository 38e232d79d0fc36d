"""The paper's experiments: presets (``configs/paper/``), the ``scale`` knob, sweep plans, reports."""
from __future__ import annotations

from .presets import Cell, Plan, Preset, list_presets, load_preset, make_plan, resolve_config_arg, scale_overrides
from .report import build_report, load_sweep, markdown_table

__all__ = ["Cell", "Plan", "Preset", "build_report", "list_presets", "load_preset", "load_sweep", "make_plan",
           "markdown_table", "resolve_config_arg", "scale_overrides"]
