"""Quasi-Global Momentum (Lin et al. 2021), SPEC §6.

The momentum buffer follows the model change across the whole step, gossip included,
so it approximates the global direction on heterogeneous (non-IID) data:

    d = g + β·(β·m̂ + g)                        (Nesterov direction for the local step)
    m̂ ← β·m̂ + (1 − β)·(x_before − x_after)/lr   (after gossip)

with g including weight decay λ·x. All tensors are ``[k, d]``.
"""
from __future__ import annotations

import torch

from ..registry import optimizers
from ..state_spec import F32, StateSpec


@optimizers.register("qgm", order=1)
class QuasiGlobalMomentum:
    name = "qgm"

    #: True when the update needs the model before and after gossip
    tracks_gossip = True

    @classmethod
    def state_spec(cls, **_) -> StateSpec:
        """m̂; during the algorithm's update the direction and the model before it are held."""
        return StateSpec({"buf": F32}, step=8)

    def __init__(self, momentum: float = 0.9, weight_decay: float = 1e-4) -> None:
        self.momentum = float(momentum)
        self.weight_decay = float(weight_decay)
        self.buf: torch.Tensor | None = None

    def init_state(self, x: torch.Tensor) -> None:
        self.buf = torch.zeros_like(x)

    def direction(self, grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        b = self.momentum
        g = grad.add(x, alpha=self.weight_decay) if self.weight_decay else grad
        return g + b * (b * self.buf + g)

    def after_gossip(self, x_before: torch.Tensor, x_after: torch.Tensor, lr: float) -> None:
        if lr <= 0:
            return
        b = self.momentum
        self.buf.mul_(b).add_(x_before - x_after, alpha=(1.0 - b) / lr)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"buf": self.buf.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.buf.copy_(state["buf"])
