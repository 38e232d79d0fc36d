"""D² (Tang et al. 2018) / Exact diffusion (Yuan et al. 2019), for symmetric W.

D² in the paper's notation (Alg. 1 of Tang et al., γ the step size there, η here)::

    x^1     = W (x^0 − η g^0)
    x^{t+1} = W (2 x^t − x^{t−1} − η g^t + η g^{t−1})

Writing ψ^t = x^t − η g^t (the engine's local step x½), the message is
φ^t = ψ^t + x^t − ψ^{t−1} (Exact diffusion's adapt–correct–combine) and
x^{t+1} = W_γ φ^t with W_γ = (1 − γ) I + γ W. γ = 1 is D²; γ = ½ is Exact diffusion's
W̄ = (I + W)/2. One buffer c = x^t − ψ^{t−1} (zero at t = 0) carries the correction::

    φ = x½ + c;   x ← φ + γ (Σ_j W_ij φ_j − φ_i);   c ← x − x½

The correction cancels the heterogeneity bias of D-PSGD: at a constant step size the
fixed point is the exact minimiser of the average objective. With η g = 0 (the gossip-only
rounds at the end of training) the update is mean-preserving consensus.

Requirements (checked, one-line ConfigError): W symmetric and static (one phase) with
λ_min(W_γ) > −1/3 (an 8-node ring with 1/3 weights has λ_min = −1/3 exactly: use γ = ½);
no push-sum (column-stochastic W is not symmetric); no compression (the compressed
form is LEAD, Liu et al. 2021, not built here). The local direction g is the optimizer's
(plain SGD with momentum 0; with local momentum the correction uses the momentum
direction). Bytes per step: one dense message per out-neighbour, as D-PSGD.

Numerics (as for Choco-SGD's residual). c is a pure integrator:
exactly, c ← c + γ (Σ_j W_ij φ_j − φ_i), so Σ_i c_i = γ Σ_j (Σ_i W_ij − 1) φ_j summed
over time = 0, and the node average moves by x̄ ← x̄ − η ḡ + c̄. Any rounding that enters
c̄ stays there and shifts the fixed point by c̄ / (η H): with a float32 c (and float32
weights, 1/3 rounding so rows sum to 1 + 3e-8) the distance to the optimum grew
linearly in time (docs/results/exact_state.md). So c is kept in **float64** and updated
by its increment, with the neighbour sum formed in float64 from the float32 message φ̃
every neighbour received (``exchange(..., dtype=float64)``, W exact to 2⁻⁵³)::

    φ̃ = fl32(x½ + c);   c ← c + γ (Σ_j W_ij φ̃_j − φ̃_i);   x ← fl32(x½ + c)

(the same algorithm in exact arithmetic: x = φ + γ(Wφ − φ) and c = x − x½). Σ_i c_i then
stays ~2⁻⁵³-small; the rounding of φ̃ and x is not integrated (the gradient corrects it).
Memory: c 8 B per parameter; wire unchanged.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..errors import ConfigError
from ..state_spec import F64, StateSpec
from .base import GossipAlgorithm
from ..registry import algorithms
from .info import AlgorithmInfo


def topology_gamma(topology) -> float:
    """D²'s γ when ``algorithm.gamma`` is null: the largest multiple of 0.01, at most 1, with
    λ_min((1 − γ)I + γW) = 1 − γ·(1 − λ_min(W)) > −1/3, i.e. γ < (4/3) / (1 − λ_min(W)).
    1 where W allows it (λ_min(W) > −1/3: complete graph, torus with self-weights); 0.99
    on an 8-node ring with 1/3 weights (λ_min = −1/3 exactly). A W that D² cannot use (not
    symmetric, time-varying) gets 1 and the constructor's one-line error."""
    if topology.period != 1:
        return 1.0
    w = np.asarray(topology.weights_np(0), dtype=np.float64)
    if not np.allclose(w, w.T, atol=1e-9):
        return 1.0
    lam = float(np.linalg.eigvalsh(w).min())
    bound = (4.0 / 3.0 - 1e-6) / (1.0 - lam) if lam < 1.0 else math.inf  # the check keeps a 1e-9 margin
    return min(1.0, (math.ceil(100.0 * bound) - 1) / 100.0)


#: the correction c is the paper's buffer; exact models only; QGM is not defined for it; γ from W
INFO = AlgorithmInfo(state_buffers=1, supports_compression=False, allows_qgm=False, gamma_from_topology=topology_gamma)


@algorithms.register("d2", order=7, info=INFO)
class D2(GossipAlgorithm):
    name = "d2"
    #: c in float64; one update holds φ̃ (4 B) and the float64 Σ_j W_ij φ̃_j and c + x½ (8 B each)
    state = StateSpec({"correction": F64}, step=20)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.push_sum:
            raise ConfigError("algorithm.push_sum", "d2 needs a symmetric doubly stochastic W; push-sum is not "
                                                    "defined for it (use topology.weights=metropolis or an undirected graph)")
        topo = self.comm.topology
        if topo.period != 1:
            raise ConfigError("topology.time_varying", "d2 needs a static mixing matrix")
        w = np.asarray(topo.weights_np(0), dtype=np.float64)
        if not np.allclose(w, w.T, atol=1e-9):
            raise ConfigError("topology", f"d2 needs a symmetric W, but {topo.name!r} is not; use an undirected "
                                          "graph (ring, torus, complete, …) or topology.weights=metropolis")
        w_g = (1.0 - self.gamma) * np.eye(w.shape[0]) + self.gamma * w
        lam = float(np.linalg.eigvalsh(w_g).min())
        if not lam > -1.0 / 3.0 + 1e-9:
            raise ConfigError("algorithm.gamma", f"d2 needs λ_min((1−γ)I + γW) > −1/3, got {lam:.4f} with "
                                                 f"γ = {self.gamma:g}; use algorithm.gamma=0.5 (Exact diffusion)")

    def init_state(self, x: torch.Tensor) -> None:
        super().init_state(x)
        #: c = x^t − ψ^{t−1}, float64 (see the module docstring)
        self.correction = torch.zeros_like(x, dtype=torch.float64)

    def buffers(self) -> dict[str, torch.Tensor]:
        return {**super().buffers(), "correction": self.correction}

    def _gossip(self, z: torch.Tensor, step: int) -> None:
        phi = (z + self.correction).to(z.dtype)                   # φ̃ = fl32(x½ + x^t − ψ^{t−1})
        mixed = self.comm.exchange(self._encode(phi), self.compressor, step, dtype=torch.float64)
        self.correction.add_(mixed.sub_(phi), alpha=self.gamma)  # c ← c + γ (Σ_j W_ij φ̃_j − φ̃_i)
        z.copy_(self.correction.add(z))                           # x^{t+1} = x½ + c, rounded once
