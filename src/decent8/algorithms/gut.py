"""Global Update Tracking (GUT) and QG-GUTm (Aketi, Hashemi & Roy, NeurIPS 2023).

GUT applies gradient tracking to the *whole model update* instead of the gradient, so the
tracker of a neighbour can be read off the change of its model and nothing but the model
is sent (one message per step, D-PSGD's size). In the paper's notation (Alg. 1; η the
learning rate, γ the consensus step, μ the tracking scale)::

    δ_i^t = g_i^t − (γ/η) Σ_j w_ij (x_j^t − x_i^t)
    y_i^t = δ_i^t + μ [ Σ_j w_ij y_j^{t−1} − δ_i^{t−1} ]          (y^{−1} = δ^{−1} = 0)
    x_i^{t+1} = x_i^t − η y_i^t

with η y_j^{t−1} = x_j^{t−1} − x_j^t, the neighbour's last model change. Here everything
is kept in displacement units (Y = η y, D = η δ, so a learning-rate schedule needs no
rescaling); g is the optimizer's local direction d. Each step, in ``local_direction``::

    s = Σ_j W_ij x_j                            (the one message: the models x^t)
    D = lr·d − γ (s − x_i)
    Y = D + μ (−(s − s_prev) − D_prev)          (first step: Y = D)
    s_prev ← s;  D_prev ← D

and ``step`` turns the engine's x½ = x − lr·d into x − Y. With μ = 1 the tracking is
exact: Σ_i Y_i = Σ_i D_i = lr Σ_i d_i (W doubly stochastic), so the average model follows
the average direction and the heterogeneity bias of D-PSGD disappears.

QG-GUTm (``algorithm=qg_gutm``) is GUT with quasi-global momentum (Lin et al. 2021,
SPEC §6) as the local optimizer (forced: optimizer.kind is taken as ``qgm``): d = g +
β(β m̂ + g) enters D, and m̂ ← β m̂ + (1 − β)(x^t − x^{t+1})/lr follows the whole tracked
update. The momentum thus enters *before* the tracking, which keeps the tracker exact
(Σ_i Y_i = lr Σ_i d_i); the authors' code may apply it after. Plain GUT works with
local momentum (tracking the momentum direction) or optimizer.momentum=0.

Limits (one-line ConfigError): no compression (the paper sends full models; a compressed
update breaks the read-off of η y_j from the model change) and no push-sum (defined for
doubly stochastic W). Gossip-only rounds at the end of training are plain D-PSGD mixing.
Precision: float32 ``[k, d]`` state; extra memory two model-sized buffers per node
(s_prev, D_prev); bytes per step: one dense message per out-neighbour, as D-PSGD.
"""
from __future__ import annotations

import torch

from ..errors import ConfigError
from ..state_spec import F32, StateSpec
from .base import GossipAlgorithm
from ..registry import algorithms
from .info import AlgorithmInfo, replace


#: s_prev and D_prev are the paper's buffers; full models only (no compression); μ is the
#: constructor's ``mu``, set as ``algorithm.mu``
INFO = AlgorithmInfo(state_buffers=2, supports_compression=False)


@algorithms.register("gut", order=8, info=INFO)
class GUT(GossipAlgorithm):
    name = "gut"
    #: the previous Σ_j W_ij x_j and update; one step holds the mixed models, the update, Y and lr·d
    state = StateSpec({"mixed_prev": F32, "update_prev": F32}, step=20)

    def __init__(self, *args, mu: float = 0.1, **kwargs) -> None:
        """``mu``: the tracking scale μ in [0, 1] (``algorithm.mu``; 0.1 is the authors' code's
        default "scaling"; μ = 1 stops consensus, see above)."""
        super().__init__(*args, **kwargs)
        if self.push_sum:
            raise ConfigError("algorithm.push_sum", f"{self.name} is defined for doubly stochastic W; push-sum is not "
                                                    "supported (use an undirected graph or a directed ring)")
        self.mu = float(mu)
        if not 0.0 <= self.mu <= 1.0:
            raise ConfigError("algorithm.mu", f"the tracking scale μ must be in [0, 1], got {self.mu}")
        self._correction: torch.Tensor | None = None

    def init_state(self, x: torch.Tensor) -> None:
        super().init_state(x)
        self.mixed_prev = torch.zeros_like(x)
        self.update_prev = torch.zeros_like(x)
        self.started = torch.zeros(x.shape[0], 1, device=x.device)

    def buffers(self) -> dict[str, torch.Tensor]:
        return {**super().buffers(), "mixed_prev": self.mixed_prev, "update_prev": self.update_prev,
                "started": self.started}

    def local_direction(self, direction: torch.Tensor, x: torch.Tensor, lr: float, step: int) -> torch.Tensor:
        mixed = self.comm.exchange(self._encode(x), self.compressor, step)   # Σ_j W_ij x_j^t
        local = direction * lr
        update = local - self.gamma * (mixed - x)                          # D = η δ
        tracked = update.clone()                                            # Y = η y
        if bool(self.started.all()):
            neighbours = self.mixed_prev - mixed                            # Σ_j W_ij η y_j^{t−1}
            tracked.add_(neighbours - self.update_prev, alpha=self.mu)
        else:
            self.started.fill_(1.0)
        self.mixed_prev.copy_(mixed)
        self.update_prev.copy_(update)
        self._correction = local.sub_(tracked)                              # x½ + (lr·d − Y) = x − Y
        return direction

    def _gossip(self, z: torch.Tensor, step: int) -> None:
        if self._correction is not None:          # a training step: the tracked update, no second message
            z.add_(self._correction)
            self._correction = None
            return
        mixed = self.comm.exchange(self._encode(z), self.compressor, step)  # gossip-only round
        z.add_(mixed - z, alpha=self.gamma)


@algorithms.register("qg_gutm", order=9, info=replace(INFO, optimizer_kind="qgm"))
class QGGUTm(GUT):
    name = "qg_gutm"
