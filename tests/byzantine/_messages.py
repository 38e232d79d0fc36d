"""Hand-made neighbour sets for the attack and aggregator tests."""
from __future__ import annotations

import torch

from decent8.byzantine.messages import NeighbourMessages


def hand_made(seed: int = 0, d: int = 5) -> tuple[NeighbourMessages, dict[int, list[int]], torch.Tensor]:
    """Receivers 0, 1, 2 over 6 nodes; node j's message x_j = row j of a seeded [6, d] tensor.
    In-neighbours: 0 ← {1, 2, 3, 4}, 1 ← {0, 5}, 2 ← {1, 3, 4, 5} (irregular: slots padded)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(6, d, generator=g)
    nbrs = {0: [1, 2, 3, 4], 1: [0, 5], 2: [1, 3, 4, 5]}
    m = 4
    src = torch.full((3, m), -1, dtype=torch.long)
    weight = torch.zeros(3, m, dtype=torch.float64)
    for i, js in nbrs.items():
        src[i, : len(js)] = torch.tensor(js)
        weight[i, : len(js)] = 1.0 / (len(js) + 1)
    mask = src >= 0
    received = torch.where(mask[..., None], x[src.clamp_min(0)], torch.zeros(()))
    self_w = torch.tensor([1 / 5, 1 / 3, 1 / 5], dtype=torch.float64)
    return NeighbourMessages(torch.arange(3), x[:3].clone(), received, src, weight, self_w, mask), nbrs, x


def slots_of(msgs: NeighbourMessages, byzantine: set[int]) -> torch.Tensor:
    return torch.tensor([[int(j) in byzantine for j in row] for row in msgs.src.tolist()]) & msgs.mask
