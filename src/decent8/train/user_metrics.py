"""A user's own evaluation metrics: ``metrics=pkg.module:fn`` on the command line or in
YAML, ``decent8.train(..., metrics=fn)`` (a callable, an import path or a list of them).

A metric is ``fn(outputs, targets) -> float | dict[str, float]``: ``outputs`` are one
model's outputs on the whole test set ``[N, ...]``, ``targets`` the test targets ``[N, ...]``
(both CPU float64/int tensors). It is computed on the evaluation passes that give the
test loss (SPEC §8), for every evaluated node model and for the averaged model x̄, and
reported like the built-in metrics: ``mean_node_<name>`` (the mean over the evaluated
nodes) and ``averaged_model_<name>`` in ``metrics.jsonl``, ``summary.json``, the printed
summary, the sweep's and ``decent8 report``'s tables, a panel each in the run's
``curves.png`` and a curves figure each in the report (``figures/metric_<name>.png``).
``<name>`` is the function's name, or each key of the mapping it returns.

Code named by import path is loaded through decent8's one import gate
(:func:`decent8.plugins.load_factory`); what it raises becomes one line naming it
(:mod:`decent8.user_code`).
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Sequence

from ..errors import ConfigError
from ..user_code import UserCodeError, call
from ..plugins import is_import_path, load_factory

OPTION = "metrics"
#: names the built-in metrics use (a user metric may not shadow them)
RESERVED = frozenset({"loss", "accuracy", "rmse", "mae", "r2", "personalized_accuracy"})
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Metric = Callable[[Any, Any], Any]   # (outputs, targets) tensors -> float | dict[str, float]


def _check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ConfigError(OPTION, f"metric name {name!r} must be a Python identifier (letters, digits, _)")
    if name in RESERVED:
        raise ConfigError(OPTION, f"metric name {name!r} is a built-in metric's; allowed: any other identifier")
    return name


def load_metrics(value: "str | Metric | Sequence[str | Metric] | None") -> list[tuple[str, Metric]]:
    """``(label, fn)`` pairs from the option: an import path, a callable, or a list of them."""
    if value is None or value == "" or value == []:
        return []

    items: list[Any] = list(value) if isinstance(value, (list, tuple)) else [value]
    out: list[tuple[str, Metric]] = []
    for item in items:
        if isinstance(item, str):
            path = item.strip()
            if not path:
                continue
            if not is_import_path(path):
                raise ConfigError(OPTION, f"{path!r} is not an import path pkg.module:function "
                                          f"(a function (outputs, targets) -> float or dict of floats)")
            out.append((path, load_factory(path, option=OPTION)))
        elif callable(item):
            out.append((getattr(item, "__name__", type(item).__name__), item))
        else:
            raise ConfigError(OPTION, f"must be import paths pkg.module:function or callables, got {type(item).__name__}")
    return out


def metric_values(metrics: list[tuple[str, Metric]], outputs: Any, targets: Any) -> dict[str, float]:
    """Each metric of one model's test outputs ``[N, ...]`` (tensors), by name (module docstring)."""
    import torch

    values: dict[str, float] = {}
    for label, fn in metrics:
        got = call(OPTION, label, fn, outputs, targets)
        base = label.rsplit(":", 1)[-1].rsplit(".", 1)[-1]
        pairs = got.items() if isinstance(got, dict) else [(base, got)]
        for name, v in pairs:
            name = _check_name(str(name))
            try:
                number = float(v.item() if isinstance(v, torch.Tensor) else v)
            except (TypeError, ValueError, RuntimeError):
                raise UserCodeError(OPTION, f"{label} returned {type(v).__name__} for {name!r}; "
                                            f"a number (or a dict of numbers) is expected") from None
            if name in values:
                raise ConfigError(OPTION, f"two metrics are named {name!r}; give them different names")
            values[name] = number
    return values


def summarise(node_values: list[dict[str, float]], averaged: dict[str, float]) -> dict[str, float]:
    """``mean_node_<name>`` (mean over the evaluated nodes; NaN-free nodes only) and ``averaged_model_<name>``."""
    out: dict[str, float] = {}
    for name in averaged:
        vals = [v[name] for v in node_values if name in v and math.isfinite(v[name])]
        out[f"mean_node_{name}"] = sum(vals) / len(vals) if vals else float("nan")
        out[f"averaged_model_{name}"] = averaged[name]
    return out


#: the regression metrics of a metrics row (train/engine.py), in the order tables show them
REGRESSION_KEYS = ("mean_node_rmse", "averaged_model_rmse", "mean_node_mae", "averaged_model_mae",
                   "mean_node_r2", "averaged_model_r2", "min_node_r2")
_OTHER = ("mean_node_loss", "averaged_model_loss", "mean_node_accuracy", "averaged_model_accuracy")


def user_keys(row: dict[str, Any]) -> list[str]:
    """The keys of a metrics row (or summary) that hold a user metric (``mean_node_<name>`` / ``averaged_model_<name>``)."""
    return [k for k in row if k.startswith(("mean_node_", "averaged_model_")) and k not in REGRESSION_KEYS
            and k not in _OTHER and "personalized" not in k and isinstance(row[k], (int, float))
            and not isinstance(row[k], bool)]


def quality_metrics(row: dict[str, Any]) -> dict[str, float]:
    """The regression metrics and the user's metrics of a metrics row, for summary.json."""
    return {k: row[k] for k in (*REGRESSION_KEYS, *user_keys(row)) if k in row}


__all__ = ["OPTION", "RESERVED", "REGRESSION_KEYS", "load_metrics", "metric_values", "summarise", "user_keys",
           "quality_metrics"]
