"""Local optimizers on stacked parameters (SPEC §6) and learning-rate schedules (SPEC §8)."""
from __future__ import annotations

from ..errors import ConfigError, choice_error
from .adam import LocalAdam
from .local_momentum import LocalMomentum
from .qgm import QuasiGlobalMomentum
from .schedule import LRSchedule

MOMENTUM_KINDS = ("local", "qgm")
#: every optimizer.kind: local Nesterov momentum, quasi-global momentum, local Adam / AdamW
OPTIMIZER_KINDS = MOMENTUM_KINDS + ("adam", "adamw")


#: optimizer.kind -> its class (read for the declared state without building one)
OPTIMIZER_CLASSES = {"local": LocalMomentum, "qgm": QuasiGlobalMomentum, "adam": LocalAdam, "adamw": LocalAdam}


def optimizer_class(kind: str):
    """The class of ``optimizer.kind`` (one line for an unknown kind)."""
    if kind not in OPTIMIZER_CLASSES:
        raise choice_error("optimizer.kind", kind, OPTIMIZER_KINDS)
    return OPTIMIZER_CLASSES[kind]


def make_optimizer(kind: str, momentum: float, nesterov: bool, weight_decay: float,
                   betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
    if kind not in OPTIMIZER_KINDS:
        raise choice_error("optimizer.kind", kind, OPTIMIZER_KINDS)
    if weight_decay < 0:
        raise ConfigError("optimizer.weight_decay", f"must be >= 0, got {weight_decay}")
    if kind in ("adam", "adamw"):
        try:
            b = [float(v) for v in betas]
        except (TypeError, ValueError):
            b = []
        if len(b) != 2 or not all(0.0 <= v < 1.0 for v in b):
            raise ConfigError("optimizer.betas", f"must be two numbers in [0, 1), got {betas!r}")
        if not (isinstance(eps, (int, float)) and eps > 0 and eps < 1):
            raise ConfigError("optimizer.eps", f"must be in (0, 1), got {eps!r}")
        return LocalAdam((b[0], b[1]), eps, weight_decay, decoupled=kind == "adamw")
    if not 0.0 <= momentum < 1.0:
        raise ConfigError("optimizer.momentum", f"must be in [0, 1), got {momentum}")
    if kind == "qgm":
        return QuasiGlobalMomentum(momentum, weight_decay)
    return LocalMomentum(momentum, nesterov, weight_decay)


__all__ = ["LocalAdam", "OPTIMIZER_KINDS", "LocalMomentum", "QuasiGlobalMomentum", "LRSchedule", "make_optimizer", "MOMENTUM_KINDS",
           "OPTIMIZER_CLASSES", "optimizer_class"]
