"""Local optimizers on stacked parameters (SPEC §6) and learning-rate schedules (SPEC §8)."""
from __future__ import annotations

from ..errors import ConfigError, choice_error
from .local_momentum import LocalMomentum
from .qgm import QuasiGlobalMomentum
from .schedule import LRSchedule

MOMENTUM_KINDS = ("local", "qgm")


def make_optimizer(kind: str, momentum: float, nesterov: bool, weight_decay: float):
    if kind not in MOMENTUM_KINDS:
        raise choice_error("optimizer.momentum_kind", kind, MOMENTUM_KINDS)
    if not 0.0 <= momentum < 1.0:
        raise ConfigError("optimizer.momentum", f"must be in [0, 1), got {momentum}")
    if weight_decay < 0:
        raise ConfigError("optimizer.weight_decay", f"must be >= 0, got {weight_decay}")
    if kind == "qgm":
        return QuasiGlobalMomentum(momentum, weight_decay)
    return LocalMomentum(momentum, nesterov, weight_decay)


__all__ = ["LocalMomentum", "QuasiGlobalMomentum", "LRSchedule", "make_optimizer", "MOMENTUM_KINDS"]
