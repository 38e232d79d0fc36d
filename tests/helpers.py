"""Shared helpers for the tests."""
from __future__ import annotations

import torch

from decent8.config import load_config
from decent8.train.build import build
from decent8.train.engine import Engine


def call(argv: list[str]) -> tuple[object, str, list[str]]:
    """``decent8 argv`` in this process: exit code, stdout, the non-blank stderr lines."""
    import contextlib
    import io

    from decent8.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue(), [ln for ln in err.getvalue().splitlines() if ln.strip()]


def override(args: list[str], *items: str) -> list[str]:
    """``args`` with the ``key=value`` items set: a key already there takes the new value in
    its place (no option given twice), a new one is appended."""
    keys = {item.split("=", 1)[0] for item in items}
    return [a for a in args if a.split("=", 1)[0] not in keys] + list(items)


def small_config(overrides: list[str]) -> list[str]:
    return ["nodes=4", "device=cpu", "progress=false", "model.width=4", *overrides]


def engine_trajectory(overrides: list[str], steps: int) -> list[torch.Tensor]:
    """Run ``steps`` engine iterations of the config; return the parameters after each."""
    cfg = load_config(None, small_config(overrides))
    c = build(cfg)
    engine = Engine(c.model, c.algorithm, c.optimizer, c.comm, c.x0)
    x_train, y_train = c.dataset.x_train, c.dataset.y_train
    out = [engine.params().clone()]
    idx = c.sampler.epoch_indices(0)
    for s in range(steps):
        batch = idx[:, s % idx.shape[1]]
        engine.train_step(x_train[batch], y_train[batch], lr=0.1)
        out.append(engine.params().clone())
    return out


def table3_report_spec() -> dict:
    """A sweep.json's "report" and "paper" entries shaped like the Table 3 preset's (ResNet-20 rows by
    skew; the DS / LP-DS / Choco / LP-Choco columns; the paper's skew-0 row), for synthetic sweeps."""
    columns = {"DS": ("deepsqueeze", "fp32"), "LP-DS": ("deepsqueeze", "int8"), "Choco": ("choco", "fp32"),
               "LP-Choco": ("choco", "int8")}
    return {"report": {"rows": {"model": "ResNet-20"}, "row_axes": ["skew"], "figure": "Figure 4",
                       "columns": {k: {"algorithm": a, "precision": p} for k, (a, p) in columns.items()}},
            "paper": [{"skew": 0.0, "DS": 90.56, "LP-DS": 90.57, "Choco": 90.96, "LP-Choco": 90.30}]}


def run_steps(c, model, steps: int, lr: float = 0.05) -> torch.Tensor:
    """``steps`` engine steps of the built run ``c`` with ``model`` (the product's
    :func:`decent8.train.engine.run_steps`); the final parameters ``[k, d]``."""
    from decent8.train.engine import run_steps as engine_run_steps
    return engine_run_steps(c, model, steps, lr)


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative distance ‖a − b‖ / ‖b‖."""
    return ((a - b).norm() / b.norm()).item()

