"""Per-node mini-batch sampling over a partition (every node sees only its own shard).

Each node reshuffles its own index set every epoch from a seed derived from
``(run seed, node, epoch)``; if a node holds fewer than steps·b samples its stream
wraps into a fresh permutation. Every node takes the same number of steps per epoch,
ceil(mean shard size / b), so all nodes stay in lock-step (SPEC §8: 32 per node).
Batches are gathered on the device as one ``[k, b]`` index tensor per step.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from ..seeding import derive_seed


class NodeSampler:
    def __init__(
        self,
        parts: Sequence[np.ndarray],
        local_nodes: Sequence[int],
        batch_size: int,
        seed: int,
        device: torch.device | str = "cpu",
    ) -> None:
        self.local_nodes = list(local_nodes)
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.device = torch.device(device)
        self.parts = [torch.as_tensor(np.asarray(parts[i]), dtype=torch.long) for i in self.local_nodes]
        mean_size = sum(len(p) for p in parts) / len(parts)
        self.steps_per_epoch = max(1, math.ceil(mean_size / self.batch_size))

    def epoch_indices(self, epoch: int) -> torch.Tensor:
        """Sample indices ``[k, steps_per_epoch, b]`` for one epoch."""
        rows = [self.node_epoch_indices(pos, epoch) for pos in range(len(self.local_nodes))]
        return torch.stack(rows).view(len(rows), self.steps_per_epoch, self.batch_size).to(self.device)

    def node_epoch_indices(self, pos: int, epoch: int) -> torch.Tensor:
        """The sample indices ``[steps_per_epoch · b]`` of local node ``pos`` in ``epoch``
        (on the CPU): its shard in the order of a generator seeded by (seed, node, epoch),
        repeated with fresh permutations when the shard is smaller than an epoch's draw.
        AD-PSGD's nodes (train/async_gossip.py) each walk their own stream with it."""
        need = self.steps_per_epoch * self.batch_size
        node, part = self.local_nodes[pos], self.parts[pos]
        g = torch.Generator().manual_seed(derive_seed(self.seed, "data", node, epoch))
        reps = math.ceil(need / len(part))
        return torch.cat([part[torch.randperm(len(part), generator=g)] for _ in range(reps)])[:need]
