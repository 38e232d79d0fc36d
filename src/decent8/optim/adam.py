"""Local Adam / AdamW on stacked parameters (docs/algorithms.md §6, the paper's Table 6).

Every node keeps its own first and second moments ``m, v`` (``[k, d]``, like the local
momentum buffer); gossip acts on the parameters only. At step t (1-based), with
gradient g at the (de-biased) parameters x, betas β1, β2, ε and weight decay λ::

    adam  (L2, as torch.optim.Adam):   g ← g + λ·x
    m ← β1·m + (1 − β1)·g;   v ← β2·v + (1 − β2)·g²
    u = (m / (1 − β1^t)) / (√v / √(1 − β2^t) + ε)
    d = u                (adam)
    d = u + λ·x          (adamw, decoupled: x ← x − lr·λ·x − lr·u, as torch.optim.AdamW)

The local step is x½ = x − lr·d, exactly torch.optim.AdamW's update on each node alone.
"""
from __future__ import annotations

import math

import torch

from ..registry import optimizers
from ..state_spec import F32, StateSpec


@optimizers.register("adamw", order=3, fixed={"decoupled": True})
@optimizers.register("adam", order=2, fixed={"decoupled": False})
class LocalAdam:
    #: True when the update needs the model before and after gossip
    tracks_gossip = False

    @classmethod
    def state_spec(cls, **_) -> StateSpec:
        """m and v; during the algorithm's update the direction is held."""
        return StateSpec({"m": F32, "v": F32}, step=4)

    def __init__(self, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                 decoupled: bool = True) -> None:
        self.beta1, self.beta2 = float(betas[0]), float(betas[1])
        self.eps = float(eps)
        self.weight_decay = float(weight_decay)
        self.decoupled = bool(decoupled)
        #: ``adam`` or ``adamw``
        self.name = "adamw" if decoupled else "adam"
        self.m: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.t = 0

    def init_state(self, x: torch.Tensor) -> None:
        self.m = torch.zeros_like(x)
        self.v = torch.zeros_like(x)
        self.t = 0

    def direction(self, grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The descent direction d for gradient ``grad`` at parameters ``x`` (advances t)."""
        assert self.m is not None and self.v is not None
        g = grad.add(x, alpha=self.weight_decay) if (self.weight_decay and not self.decoupled) else grad
        self.t += 1
        self.m.lerp_(g, 1.0 - self.beta1)
        self.v.mul_(self.beta2).addcmul_(g, g, value=1.0 - self.beta2)
        bc1 = 1.0 - self.beta1 ** self.t
        bc2 = 1.0 - self.beta2 ** self.t
        denom = (self.v.sqrt() / math.sqrt(bc2)).add_(self.eps)
        d = (self.m / bc1).div_(denom)
        if self.weight_decay and self.decoupled:
            d.add_(x, alpha=self.weight_decay)
        return d

    def after_gossip(self, x_before: torch.Tensor, x_after: torch.Tensor, lr: float) -> None:
        """Local Adam ignores what gossip did."""

    def state_dict(self) -> dict[str, torch.Tensor]:
        assert self.m is not None and self.v is not None
        return {"m": self.m.clone(), "v": self.v.clone(), "t": torch.tensor(self.t, dtype=torch.int64)}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        assert self.m is not None and self.v is not None
        self.m.copy_(state["m"])
        self.v.copy_(state["v"])
        self.t = int(state["t"])
