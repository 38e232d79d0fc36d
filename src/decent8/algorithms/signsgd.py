"""signSGD with majority vote on a ring, by re-signing at every hop — the cascading case (docs/algorithms.md §10 baselines).

An exact majority vote needs counts that grow hop by hop; with 1 bit per element per
hop a worker can only re-sign: the incoming vote (±1) plus its own sign (±1), signed
again. When they disagree the sum is 0 and the tie is broken by a fair coin from the
worker's generator (the least biased choice; sign(0) = −1 would push every tie one
way). Each hop therefore keeps the incoming bit with probability 1/2 whatever it
stands for, so the final bit follows the last worker of the chain with probability
1/2, the one before with 1/4, … — the cascading compression the paper describes.
This is Marsit's bit-wise merge with the probability fixed at 1/2 and without the
global compensation (same code path, :class:`~.marsit.BitVoteCodec`).

Update: x ← x − η_s·ĝ, ĝ = 2·bits − 1 of ``sign(lr·d)``; η_s = ``allreduce.eta_s``
following the learning-rate schedule. Traffic as Marsit: 1 bit per element per hop.
"""
from __future__ import annotations

import torch

from ..state_spec import StateSpec
from .allreduce import AllReduceAlgorithm
from .marsit import BitVoteCodec, sign_allreduce
from ..registry import algorithms
from .info import ALLREDUCE, replace


@algorithms.register("signsgd", order=14, info=replace(ALLREDUCE, wire_format="sign-bits", sign_step_size=True))
class SignSGD(AllReduceAlgorithm):
    name = "signsgd"
    #: no state; one step holds lr·d, its signs and the applied step
    state = StateSpec(step=12)

    def init_state(self, x: torch.Tensor) -> None:
        super().init_state(x)
        self.codec = BitVoteCodec(self.generators, unbiased=False)

    def aggregate(self, update: torch.Tensor, step: int, lr: float) -> torch.Tensor:
        bits = sign_allreduce(self.allreduce, update > 0, self.codec)
        eta = self.sign_step(lr)
        return bits.to(update.dtype).mul_(2.0 * eta).sub_(eta)

    def message_bytes(self, compressor=None) -> float:
        return self.allreduce.bytes_per_worker(self.allreduce.padded(self.dim, bits=True) // 8, 1.0)
