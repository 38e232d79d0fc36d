"""Gradient tracking (DSGT; Pu & Nedić 2020, Koloskova et al. 2021), SPEC §3 style.

Every node keeps a tracker y_i of the network-average local direction, gossiped like the
parameters (two messages per step), in the paper's notation (Koloskova et al. 2021, Alg. 1)::

    x_i^{t+1} = Σ_j W_ij (x_j^t − η y_j^t)
    y_i^{t+1} = Σ_j W_ij y_j^t + g_i^{t+1} − g_i^t,          y_i^0 = g_i^0

Here g_i is the optimizer's local direction d_i (the stochastic gradient plus weight decay;
with local momentum β > 0 it is the momentum direction, so the tracker follows the average
momentum — "momentum tracking"; β = 0 is plain DSGT). In the engine's order, at step t::

    y_i ← Σ_j W_ij y_i^{t−1} + d_i^t − d_i^{t−1}     (local_direction: message 1, the tracker)
    x½_i = x_i − lr·y_i                              (the engine's local step)
    x_i ← x½_i + γ (Σ_j W_ij x½_j − x½_i)             (step: message 2, the model)

With γ ≠ 1 both variables mix with W_γ = (1 − γ) I + γ W (still doubly stochastic).
Since Σ_j W_ij is column-stochastic, Σ_i y_i = Σ_i d_i at every step: the average model
moves along the average direction and, at a constant step size, every node converges to
the exact minimiser of the average objective (no heterogeneity bias, unlike D-PSGD).

Composition:

* Compression (BEER; Zhao et al. 2022): both x and y are gossiped through Choco-SGD
  public copies, q = C(v − v̂), v̂ ← v̂ + q, s ← s + Σ_j W_ij q_j, v ← v + γ (s − v̂);
  two compressed messages per step (s − v̂ kept as Choco's residual, below). With the
  identity compressor the exact form above is used.
* Push-sum (Push-DIGing; Nedić, Olshevsky & Shi 2017): on column-stochastic W the
  numerator z takes the step z ← C(z − lr·y), ω ← C ω, the gradient is taken at z / ω
  and y mixes with the same column-stochastic C. Exact messages only (compressed
  push-sum gradient tracking is not supported: no published analysis).
* Quasi-global momentum is not defined for a tracked direction (optimizer.kind=local).

Numerics (as for Choco-SGD's residual). The tracker's average is
a pure integrator: Σ_i y_i = Σ_i d_i holds only if nothing that enters y is lost, and
y ← W y + d − d_prev in float32 integrates every rounding — of W (1/3 rounds so rows sum
to 1 + 3e-8), of the mixing sum and of adding d − d_prev, which is not 0 at the fixed
point when the summation order of the gradient changes (a reshuffled batch): the
distance to the optimum grew linearly in time (docs/results/exact_state.md). So the
state is the *tracking error* e_i = y_i − d_i, in **float64**, updated by an increment
whose node sum is exactly 0 (the neighbour sum formed in float64 from the float32
messages the neighbours received, ``exchange(..., dtype=float64)``)::

    e_i ← e_i + (Σ_j W_ij y_j − y_i)  (= y_i^{new} − d_i^{t−1}, the same algorithm),   y_i = fl32(d_i^t + e_i)

With γ ≠ 1 the increment is γ (Σ_j W_ij y_j − y_i). Σ_i e_i stays ~2⁻⁵³-small, d enters
y but is no longer integrated (d^{t−1} is not kept), so the order of the gradient's sum
does not matter. With compression (BEER) each variable keeps a Choco-style float64
consensus residual u = s − v̂ (algorithms/choco.py) and e ← e + γ u_y.

Memory: y (float32, the message and the direction) and e (float64): 12 B per parameter
(was y + d_prev: 8 B); with compression four more buffers (x̂, ŷ float32, u_x, u_y
float64). Bytes per step: 2 × message size per out-neighbour; with ``precision=int8``
the two messages travel in the 8-bit wire format.
"""
from __future__ import annotations

import torch

from ..errors import ConfigError
from ..state_spec import F32, F64, StateSpec
from .base import GossipAlgorithm
from ..registry import algorithms
from .info import AlgorithmInfo


#: tracker + last direction are the paper's buffers (BEER: +4 public copies); QGM is not defined
#: for a tracked direction
INFO = AlgorithmInfo(state_buffers=2, allows_qgm=False)


@algorithms.register("gt", order=6, info=INFO)
class GradientTracking(GossipAlgorithm):
    name = "gt"
    #: y and e (float64); compressed (BEER): also x̂, ŷ and their float64 residuals
    state = StateSpec({"y": F32, "e": F64}, step=16)

    @classmethod
    def state_spec(cls, compressor=None) -> StateSpec:
        if compressor is None or compressor.lossless:
            return cls.state
        beer = {"x_hat": F32, "x_res": F64, "y_hat": F32, "y_res": F64}
        return StateSpec({**cls.state.state, **beer}, step=cls.state.step)
    messages_per_step = 2

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.exact = self.compressor.is_identity
        if self.push_sum and not self.exact:
            raise ConfigError("compression", "gradient tracking with push-sum (Push-DIGing) sends exact messages; "
                                             "use compression=identity or a doubly stochastic topology")

    def init_state(self, x: torch.Tensor) -> None:
        super().init_state(x)
        self.y = torch.zeros_like(x)
        #: e = y − d (the tracking error), float64 (see the module docstring)
        self.e = torch.zeros_like(x, dtype=torch.float64)
        self.started = torch.zeros(x.shape[0], 1, device=x.device)
        if not self.exact:  # BEER: Choco public copies and float64 residuals for both variables
            self.x_hat, self.x_res = torch.zeros_like(x), torch.zeros_like(x, dtype=torch.float64)
            self.y_hat, self.y_res = torch.zeros_like(x), torch.zeros_like(x, dtype=torch.float64)

    def buffers(self) -> dict[str, torch.Tensor]:
        out = {**super().buffers(), "y": self.y, "e": self.e, "started": self.started}
        if not self.exact:
            out.update(x_hat=self.x_hat, x_res=self.x_res, y_hat=self.y_hat, y_res=self.y_res)
        return out

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        super().load_state_dict(state)
        if "e" not in state and "d_prev" in state:      # older checkpoints kept d^{t−1}
            self.e.copy_(state["y"].double() - state["d_prev"].double())
            if not self.exact:
                for v in ("x", "y"):
                    getattr(self, f"{v}_res").copy_(state[f"{v}_sum"].double() - state[f"{v}_hat"].double())

    def _increment(self, v: torch.Tensor, hat: torch.Tensor | None, res: torch.Tensor | None,
                   step: int) -> torch.Tensor:
        """Exchange v and return γ (Σ_j W_ij v_j − v_i) in float64 (exact messages), or
        γ u with the Choco residual u ← u + Σ_j W_ij q_j − q_i, q = C(v − v̂) (compressed)."""
        if hat is None:
            mixed = self.comm.exchange(self._encode(v), self.compressor, step, dtype=torch.float64)
            return mixed.sub_(v).mul_(self.gamma)
        payload = self._encode(v - hat)
        q = self.compressor.decode(payload)
        hat += q
        res += self.comm.exchange(payload, self.compressor, step, decoded=q, dtype=torch.float64).sub_(q)
        return res * self.gamma

    def local_direction(self, direction: torch.Tensor, x: torch.Tensor, lr: float, step: int) -> torch.Tensor:
        if bool(self.started.all()):               # e ← e + γ (Σ_j W_ij y_j − y_i)
            self.e += self._increment(self.y, None if self.exact else self.y_hat,
                                      None if self.exact else self.y_res, step)
        else:                                      # y^0 = g^0 (e = 0): nothing to send yet
            self.started.fill_(1.0)
        self.y.copy_(self.e + direction)           # y = fl32(d + e)
        return self.y

    def _gossip(self, z: torch.Tensor, step: int) -> None:
        inc = self._increment(z, None if self.exact else self.x_hat, None if self.exact else self.x_res, step)
        z.copy_(inc.add_(z))                       # x ← x½ + γ (Σ_j W_ij x½_j − x½_i), rounded once
