"""Local optimizers on stacked parameters (SPEC §6) and learning-rate schedules (SPEC §8)."""
from __future__ import annotations

from ..errors import ConfigError
from ..registry import construct, keyword_options, optimizers
from .adam import LocalAdam
from .local_momentum import LocalMomentum
from .qgm import QuasiGlobalMomentum
from .schedule import LRSchedule



def __getattr__(name: str):
    """Read from the optimizer registry when asked: ``OPTIMIZER_KINDS`` (every optimizer.kind),
    ``MOMENTUM_KINDS`` (those with a momentum), ``OPTIMIZER_CLASSES`` (kind -> class)."""
    if name == "OPTIMIZER_KINDS":
        return optimizers.names()
    if name == "MOMENTUM_KINDS":
        return tuple(n for n, e in optimizers.items() if "momentum" in keyword_options(e.obj))
    if name == "OPTIMIZER_CLASSES":
        return {n: e.obj for n, e in optimizers.items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def optimizer_class(kind: str):
    """The class of ``optimizer.kind`` (one line for an unknown kind)."""
    return optimizers.lookup(kind)


def make_optimizer(kind: str, momentum: float, nesterov: bool, weight_decay: float,
                   betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
    """The local optimizer ``optimizer.kind`` (a registered class, ``decent8 list``), built from the
    optimizer options its constructor names, each range-checked here (one line naming it)."""
    entry = optimizers.entry(kind)
    takes = keyword_options(entry.obj)
    if weight_decay < 0:
        raise ConfigError("optimizer.weight_decay", f"must be >= 0, got {weight_decay}")
    options: dict = {"weight_decay": weight_decay, "nesterov": nesterov}
    if "betas" in takes:
        try:
            b = [float(v) for v in betas]
        except (TypeError, ValueError):
            b = []
        if len(b) != 2 or not all(0.0 <= v < 1.0 for v in b):
            raise ConfigError("optimizer.betas", f"must be two numbers in [0, 1), got {betas!r}")
        if not (isinstance(eps, (int, float)) and eps > 0 and eps < 1):
            raise ConfigError("optimizer.eps", f"must be in (0, 1), got {eps!r}")
        options.update(betas=(b[0], b[1]), eps=eps)
    if "momentum" in takes:
        if not 0.0 <= momentum < 1.0:
            raise ConfigError("optimizer.momentum", f"must be in [0, 1), got {momentum}")
        options["momentum"] = momentum
    options.update(entry.info.get("fixed", {}))
    return construct(entry.obj, config=options, group="optimizer", what=f"optimizer.kind={entry.name}")


__all__ = ["LocalAdam", "OPTIMIZER_KINDS", "LocalMomentum", "QuasiGlobalMomentum", "LRSchedule", "make_optimizer", "MOMENTUM_KINDS",
           "OPTIMIZER_CLASSES", "optimizer_class"]
