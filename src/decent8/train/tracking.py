"""Experiment tracking beside ``metrics.jsonl``: TensorBoard, MLflow, Weights & Biases.

``tracking=`` is a comma-separated list of backends (empty: only what ``tensorboard=``
says, the default):

* ``tensorboard`` — the same as ``tensorboard=true`` (events in ``<run>/tensorboard/``);
* ``mlflow`` — a run in an MLflow tracking store (``pip install -e ".[mlflow]"``):
  ``$MLFLOW_TRACKING_URI`` if set, else the local file store ``<run>/mlruns`` (MLflow ≥ 3
  wants ``MLFLOW_ALLOW_FILE_STORE=true`` for it, which this sets if unset — in this process
  only: a reader, ``mlflow ui`` or ``MlflowClient``, needs it set too, docs/usage.md); experiment
  ``decent8``, run name = the run folder's name, the flattened config as parameters,
  every scalar of a metrics line as a metric at its training step, ``summary.json``'s
  scalars as the final metrics;
* ``wandb`` — a Weights & Biases run in *offline* mode (``pip install -e ".[wandb]"``;
  nothing leaves the machine; ``wandb sync <run>/wandb/offline-run-*`` uploads it later),
  files under ``<run>/wandb/``.

A selected backend that is not installed stops the run before it starts (one line).
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from ..errors import ConfigError, choice_error
from ..plugins import import_library
from .tb_log import EventLog

BACKENDS = ("tensorboard", "mlflow", "wandb")
_PIP = {"mlflow": "mlflow-skinny (or mlflow)", "wandb": "wandb"}


def parse_tracking(value: object) -> list[str]:
    """``"mlflow, wandb"`` → ``["mlflow", "wandb"]``; ``none``/empty → ``[]``; checks names and installs."""
    if value is None:
        return []
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    out: list[str] = []
    for raw in items:
        name = str(raw).strip().lower()
        if name in ("", "none", "false"):
            continue
        if name not in BACKENDS:
            raise choice_error("tracking", name, BACKENDS)
        if name in _PIP:
            try:
                import_library(name)   # never from the current folder or a run folder
            except ImportError:
                raise ConfigError("tracking", f"{name} is not installed: pip install {_PIP[name]} "
                                              f"(or pip install -e \".[{name}]\")") from None
        if name not in out:
            out.append(name)
    return out


def _scalars(row: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in row.items()
            if k not in ("epoch", "step") and isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v)}


class _MLflow:
    def __init__(self, run_path: Path, params: dict[str, Any]) -> None:
        MlflowClient = import_library("mlflow.tracking").MlflowClient
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:  # MLflow 3 keeps the file store but asks for an explicit opt-in
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            uri = (run_path / "mlruns").resolve().as_uri()
        self.client = MlflowClient(tracking_uri=uri)
        exp = self.client.get_experiment_by_name("decent8")
        exp_id = exp.experiment_id if exp is not None else self.client.create_experiment("decent8")
        self.run_id = self.client.create_run(exp_id, run_name=run_path.name).info.run_id
        Param = import_library("mlflow.entities").Param
        items = [Param(k[:250], str(v)[:500]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i:i + 100])

    def log(self, row: dict[str, Any]) -> None:
        import time

        Metric = import_library("mlflow.entities").Metric
        step, now = int(row.get("step", 0)), int(time.time() * 1000)
        metrics = [Metric(k, v, now, step) for k, v in _scalars(row).items()]
        for i in range(0, len(metrics), 500):
            self.client.log_batch(self.run_id, metrics=metrics[i:i + 500])

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


class _WandB:
    def __init__(self, run_path: Path, params: dict[str, Any]) -> None:
        wandb = import_library("wandb")
        self.run = wandb.init(project="decent8", name=run_path.name, dir=str(run_path), mode="offline",
                              config=params, reinit="create_new")

    def log(self, row: dict[str, Any]) -> None:
        self.run.log(_scalars(row), step=int(row.get("step", 0)))

    def close(self) -> None:
        self.run.finish()


class Trackers:
    """TensorBoard (``tensorboard=`` / ``tracking=tensorboard``), MLflow and W&B, one ``log``/``close``."""

    def __init__(self, run_path: Path, tensorboard: str, tracking: object, params: dict[str, Any]) -> None:
        names = parse_tracking(tracking)
        self.tb = EventLog(run_path, "true" if "tensorboard" in names else tensorboard)
        self.others: list[Any] = []
        if "mlflow" in names:
            self.others.append(_MLflow(run_path, params))
        if "wandb" in names:
            self.others.append(_WandB(run_path, params))

    def log(self, row: dict[str, Any]) -> None:
        self.tb.log(row)
        for t in self.others:
            t.log(row)

    def close(self) -> None:
        self.tb.close()
        for t in self.others:
            t.close()
