"""PSGD: synchronous data-parallel SGD with an fp32 ring (or torus) all-reduce (docs/algorithms.md §10 baselines).

applied = mean_m(u_m), u_m = lr · d_m. 4·2(M − 1)·d/M bytes per worker per step (plus
padding to a multiple of M). With local momentum this equals momentum on the averaged
gradient (momentum and weight decay are linear and all models are equal).
"""
from __future__ import annotations

import torch

from .allreduce import AllReduceAlgorithm
from ..registry import algorithms
from .info import ALLREDUCE


@algorithms.register("psgd", order=12, info=ALLREDUCE)
class PSGD(AllReduceAlgorithm):
    name = "psgd"
    def aggregate(self, update: torch.Tensor, step: int, lr: float) -> torch.Tensor:
        return self.allreduce.mean(update)
