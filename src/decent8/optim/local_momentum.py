"""Local (Nesterov) momentum SGD on stacked parameters, SPEC §6.

Per node, with weight decay λ and momentum β (PyTorch's SGD convention):

    g ← g + λ·x;   m ← β·m + g;   d = g + β·m  (Nesterov)  or  d = m  (heavy ball)

The local step is x½ = x − lr·d. All tensors are ``[k, d]``.
"""
from __future__ import annotations

import torch


class LocalMomentum:
    name = "local"

    #: True when the update needs the model before and after gossip
    tracks_gossip = False

    def __init__(self, momentum: float = 0.9, nesterov: bool = True, weight_decay: float = 1e-4) -> None:
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)
        self.weight_decay = float(weight_decay)
        self.buf: torch.Tensor | None = None

    def init_state(self, x: torch.Tensor) -> None:
        self.buf = torch.zeros_like(x)

    def direction(self, grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The descent direction d for gradient ``grad`` at (de-biased) parameters ``x``."""
        g = grad.add(x, alpha=self.weight_decay) if self.weight_decay else grad
        if self.momentum == 0.0:
            return g
        self.buf.mul_(self.momentum).add_(g)
        return g.add(self.buf, alpha=self.momentum) if self.nesterov else self.buf.clone()

    def after_gossip(self, x_before: torch.Tensor, x_after: torch.Tensor, lr: float) -> None:
        """Local momentum ignores what gossip did."""

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"buf": self.buf.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.buf.copy_(state["buf"])
