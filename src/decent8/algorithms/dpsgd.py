"""D-PSGD (Lian et al. 2017), SPEC §3: r = Σ_j W_ij x½_j − x½_i, no compression.

With ``push_sum=True`` this is Stochastic Gradient Push (Assran et al. 2019).
"""
from __future__ import annotations

import torch

from .base import GossipAlgorithm


class DPSGD(GossipAlgorithm):
    name = "dpsgd"
    supports_compression = False

    def _gossip(self, z: torch.Tensor, step: int) -> None:
        mixed = self.comm.exchange(self._encode(z), self.compressor, step)
        if self.gamma == 1.0:
            z.copy_(mixed)
        else:
            z.add_(mixed - z, alpha=self.gamma)
