"""Deep-Squeeze (Tang et al. 2019), SPEC §3: error-compensated compressed weights.

    v = x½ + e;  c = C(v);  e ← v − c;  send c;  r = Σ_j (W_ij − δ_ij) c_j;  x ← x½ + γ r

e starts at 0. With ``push_sum=True`` this is Sparse-Push (Aketi et al. 2021).
Extra memory: one model-sized error buffer per node.
"""
from __future__ import annotations

import torch

from ..state_spec import F32, StateSpec
from .base import GossipAlgorithm
from ..registry import algorithms
from .info import AlgorithmInfo, replace

#: the error e is the paper's buffer; it gossips compressed *weights*: γ = 1 − ratio with top-k
#: (0.01, the reference code's; 0.05 diverges on digits)
INFO = AlgorithmInfo(display_name="DS", state_buffers=1, topk_gamma_scale=1.0)


@algorithms.register("deepsqueeze", order=1, info=INFO)
class DeepSqueeze(GossipAlgorithm):
    name = "deepsqueeze"
    #: e; one update holds v, c, Σ_j W_ij c_j and their difference
    state = StateSpec({"error": F32}, step=16)

    def init_state(self, x: torch.Tensor) -> None:
        super().init_state(x)
        self.error = torch.zeros_like(x)

    def buffers(self) -> dict[str, torch.Tensor]:
        return {**super().buffers(), "error": self.error}

    def _gossip(self, z: torch.Tensor, step: int) -> None:
        v = z + self.error
        payload = self._encode(v)
        c = self.compressor.decode(payload)          # what every receiver reconstructs
        torch.sub(v, c, out=self.error)
        mixed = self.comm.exchange(payload, self.compressor, step, decoded=c)  # Σ_j W_ij c_j
        z.add_(mixed - c, alpha=self.gamma)


@algorithms.register("sparse_push", order=4, info=replace(INFO, display_name="Sparse-Push", forced_push_sum=True))
class SparsePush(DeepSqueeze):
    """Sparse-Push: Deep-Squeeze under push-sum (the paper's directed-graph variant)."""

    name = "sparse_push"
