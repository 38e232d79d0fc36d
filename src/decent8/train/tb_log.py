"""TensorBoard event logs beside ``metrics.jsonl`` (optional: ``pip install -e ".[tensorboard]"``).

``tensorboard=auto`` (the default) writes ``<run>/tensorboard/`` events when tensorboardX
(or TensorBoard itself, through ``torch.utils.tensorboard``) is installed, ``true``
requires it, ``false`` never writes. Every scalar of a metrics line is logged at its
training step, so ``tensorboard --logdir runs`` watches runs live.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..plugins import import_library

MODES = ("auto", "true", "false")


def _writer_class():
    """tensorboardX's (else TensorBoard's) SummaryWriter, never from the current folder or a
    run folder (:func:`decent8.plugins.import_library`); None if neither is installed."""

    for module in ("tensorboardX", "torch.utils.tensorboard"):   # the second needs the tensorboard package
        try:
            return import_library(module).SummaryWriter
        except (ImportError, AttributeError):
            continue
    return None


def check_mode(mode: object) -> str:
    m = str(mode).strip().lower()
    if m not in MODES:
        raise ConfigError("tensorboard", f"must be one of {', '.join(MODES)}, got {mode!r}")
    if m == "true" and _writer_class() is None:
        raise ConfigError("tensorboard", "true needs tensorboardX or tensorboard: pip install tensorboardX "
                                         "(or use tensorboard=auto / false)")
    return m


class EventLog:
    """Scalars of each metrics line as TensorBoard events (a no-op without a writer)."""

    def __init__(self, run_path: Path, mode: str) -> None:
        cls = _writer_class() if check_mode(mode) != "false" else None
        self.writer = cls(str(run_path / "tensorboard")) if cls is not None else None

    def log(self, row: dict[str, Any]) -> None:
        if self.writer is None:
            return
        step = int(row.get("step", 0))
        for key, value in row.items():
            if (key not in ("epoch", "step") and isinstance(value, (int, float)) and not isinstance(value, bool)
                    and math.isfinite(value)):  # e.g. no train loss before the first epoch of a resumed run
                self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
