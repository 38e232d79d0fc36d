"""Choco-SGD (Koloskova et al. 2019/2020), SPEC §3: compressed updates of public copies.

    q = C(x½ − x̂_i);  x̂_i ← x̂_i + q;  send q;
    s_i ← s_i + Σ_j W_ij q_j        (s_i = Σ_j W_ij x̂_j, kept as one running buffer)
    x ← x½ + γ (s_i − x̂_i)

x̂ and s start at 0. With ``push_sum=True`` this is the Quant-SGP-style Choco + push-sum
(Taheri et al. 2020). Extra memory: two model-sized buffers per node (x̂ and s).
"""
from __future__ import annotations

import torch

from .base import GossipAlgorithm


class ChocoSGD(GossipAlgorithm):
    name = "choco"

    def init_state(self, x: torch.Tensor) -> None:
        super().init_state(x)
        self.x_hat = torch.zeros_like(x)
        self.neighbour_sum = torch.zeros_like(x)

    def buffers(self) -> dict[str, torch.Tensor]:
        return {**super().buffers(), "x_hat": self.x_hat, "neighbour_sum": self.neighbour_sum}

    def _gossip(self, z: torch.Tensor, step: int) -> None:
        payload = self._encode(z - self.x_hat)
        q = self.compressor.decode(payload)
        self.x_hat += q
        self.neighbour_sum += self.comm.exchange(payload, self.compressor, step, decoded=q)
        z.add_(self.neighbour_sum - self.x_hat, alpha=self.gamma)
