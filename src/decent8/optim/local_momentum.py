"""Local (Nesterov) momentum SGD on stacked parameters, SPEC §6.

Per node, with weight decay λ and momentum β (PyTorch's SGD convention):

    g ← g + λ·x;   m ← β·m + g;   d = g + β·m  (Nesterov)  or  d = m  (heavy ball)

The local step is x½ = x − lr·d. All tensors are ``[k, d]``.
"""
from __future__ import annotations

import torch

from ..registry import optimizers
from ..state_spec import F32, StateSpec


@optimizers.register("local", order=0)
class LocalMomentum:
    name = "local"

    #: True when the update needs the model before and after gossip
    tracks_gossip = False

    @classmethod
    def state_spec(cls, momentum: float = 0.9, weight_decay: float = 1e-4, **_) -> StateSpec:
        """m, and the direction's workspace with momentum (without: d = g + λ·x, a temporary)."""
        if momentum:
            return StateSpec({"buf": F32}, {"_d": F32})
        return StateSpec({"buf": F32}, step=4 if weight_decay else 0)

    def __init__(self, momentum: float = 0.9, nesterov: bool = True, weight_decay: float = 1e-4) -> None:
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)
        self.weight_decay = float(weight_decay)
        self.buf: torch.Tensor | None = None

    def init_state(self, x: torch.Tensor) -> None:
        self.buf = torch.zeros_like(x)
        self._d: torch.Tensor | None = None

    def direction(self, grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The descent direction d for gradient ``grad`` at (de-biased) parameters ``x``.
        With momentum the result is a workspace of this optimizer, overwritten by the next
        call (no fresh ``[k, d]`` allocation per step: on CPU each one costs page faults
        comparable to the arithmetic, docs/results/gossip_speed.md)."""
        if self.momentum == 0.0:
            return grad.add(x, alpha=self.weight_decay) if self.weight_decay else grad
        if self._d is None or self._d.shape != grad.shape or self._d.dtype != grad.dtype:
            self._d = torch.empty_like(grad)
        g = torch.add(grad, x, alpha=self.weight_decay, out=self._d) if self.weight_decay else self._d.copy_(grad)
        torch.add(g, self.buf, alpha=self.momentum, out=self.buf)      # m ← β·m + g, one pass
        return g.add_(self.buf, alpha=self.momentum) if self.nesterov else g.copy_(self.buf)

    def after_gossip(self, x_before: torch.Tensor, x_after: torch.Tensor, lr: float) -> None:
        """Local momentum ignores what gossip did."""

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"buf": self.buf.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.buf.copy_(state["buf"])
