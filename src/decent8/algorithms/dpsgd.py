"""D-PSGD (Lian et al. 2017), SPEC §3: r = Σ_j W_ij x½_j − x½_i, no compression.

With ``push_sum=True`` this is Stochastic Gradient Push (Assran et al. 2019).

With Byzantine settings (``byzantine.*``, :mod:`decent8.byzantine`) the neighbour sum is
replaced by a robust rule over the individual messages (after the attack):
x_i ← aggregator(x½_i, {m_{j→i}}), then x ← x½ + γ (that − x½).
"""
from __future__ import annotations

import torch

from ..state_spec import StateSpec
from .base import GossipAlgorithm
from ..registry import algorithms
from .info import AlgorithmInfo, replace

#: D-PSGD's facts: no compression; robust rules mix its per-edge messages; at precision=int8 the
#: models it mixes travel as 8-bit values, Σ_j W_ij Q(x½_j), Q the per-tensor 8-bit quantizer
#: (SPEC §4: "we send 8-bit")
INFO = AlgorithmInfo(display_name="D-PSGD", supports_compression=False, robust_mixing=True, int8_models=True)


@algorithms.register("dpsgd", order=0, info=INFO)
class DPSGD(GossipAlgorithm):
    name = "dpsgd"
    #: no state; one update holds Σ_j W_ij x½_j and the communicator's temporaries
    state = StateSpec(step=8)

    def _gossip(self, z: torch.Tensor, step: int) -> None:
        if self.robust is not None:
            mixed = self.robust.mix(self.comm.exchange_messages(self._encode(z), self.compressor, step), step)
        else:
            mixed = self.comm.exchange(self._encode(z), self.compressor, step)
        if self.gamma == 1.0:
            z.copy_(mixed)
        else:
            z.add_(mixed - z, alpha=self.gamma)


@algorithms.register("sgp", order=3, info=replace(INFO, display_name="SGP", forced_push_sum=True,
                                                              robust_mixing=False))
class SGP(DPSGD):
    """Stochastic Gradient Push (Assran et al. 2019): D-PSGD under push-sum."""

    name = "sgp"
