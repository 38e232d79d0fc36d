"""Learning-rate schedules (SPEC §8): warm-up, then step decay or cosine; or one cycle.

The paper: one warm-up epoch at 0.01, then 0.1, ×0.1 at epochs 100 and 150 (ResNets),
×0.5 every 30 epochs (VGG). ``lr(epoch_float)`` is evaluated at every step.

``onecycle`` (Smith & Topin 2019, "super-convergence", the linear form): no constant
warm-up; the lr rises linearly from ``warmup_lr`` to ``lr`` over ``warmup_epochs`` and
then falls linearly to 0 at ``total_epochs``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class LRSchedule:
    lr: float = 0.1
    warmup_epochs: float = 0.0
    warmup_lr: float = 0.01
    kind: str = "step"            # step | cosine | constant | onecycle
    milestones: list[float] = field(default_factory=list)
    decay: float = 0.1
    every: float = 0.0            # > 0: decay every `every` epochs (VGG-style) instead of milestones
    total_epochs: float = 1.0

    def __call__(self, epoch: float) -> float:
        if self.kind == "onecycle":
            if epoch < self.warmup_epochs:
                return self.warmup_lr + (self.lr - self.warmup_lr) * epoch / self.warmup_epochs
            span = max(self.total_epochs - self.warmup_epochs, 1e-12)
            return self.lr * max(1.0 - (epoch - self.warmup_epochs) / span, 0.0)
        if epoch < self.warmup_epochs:
            return self.warmup_lr
        if self.kind == "constant":
            return self.lr
        if self.kind == "cosine":
            span = max(self.total_epochs - self.warmup_epochs, 1e-12)
            t = min(max((epoch - self.warmup_epochs) / span, 0.0), 1.0)
            return 0.5 * self.lr * (1.0 + math.cos(math.pi * t))
        if self.every > 0:
            return self.lr * self.decay ** math.floor(epoch / self.every)
        passed = sum(1 for m in self.milestones if epoch >= m)
        return self.lr * self.decay**passed
