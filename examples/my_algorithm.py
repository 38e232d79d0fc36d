"""Periodic gossip: H local steps between compressed gossip rounds (Koloskova et al., "A Unified
Theory of Decentralized SGD with Changing Topology and Local Updates", ICML 2020, §3: Choco-SGD's
gossip every H-th iteration, local SGD in between). A decent8 algorithm from outside decent8:

    decent8 train algorithm=my_algorithm:MyAlgorithm compression=topk     # from this folder
    decent8 train algorithm=my_algorithm:MyAlgorithm algorithm.params.period=8   # its own option
    decent8 launch --nodes 4 algorithm=my_algorithm:MyAlgorithm backend=distributed ...
    decent8 cost --algorithm my_algorithm:MyAlgorithm

Every node takes its local step x½ = x − lr·d each iteration; at iterations t with
(t + 1) mod H = 0 it runs Choco-SGD's compressed gossip (q = C(x½ − x̂), x̂ += q,
x ← x½ + γ Σ_j W_ij (x̂_j − x̂_i)); the consensus rounds after training gossip every round.
State (x̂ and the neighbour sum) is Choco's, so checkpoints and --resume work unchanged.
"""
from __future__ import annotations

import torch

from decent8.algorithms import ChocoSGD


class MyAlgorithm(ChocoSGD):
    name = "periodic_gossip"
    params = {"period": 4}          # H, local steps per gossip round: algorithm.params.period=H

    def step(self, z: torch.Tensor, step: int) -> None:
        if (step + 1) % self.params["period"] == 0:
            super().step(z, step)

    def consensus_step(self, z: torch.Tensor, step: int) -> None:
        super().step(z, step)       # a gossip-only round always gossips

    def message_bytes(self, compressor) -> float:
        return super().message_bytes(compressor) / self.params["period"]   # per training step, on average
