"""Per-node mini-batch sampling over a partition (every node sees only its own shard).

Each node reshuffles its own index set every epoch from a seed derived from
``(run seed, node, epoch)``; if a node holds fewer than steps·b samples its stream
wraps into a fresh permutation. Every node takes the same number of steps per epoch,
ceil(mean shard size / b), so all nodes stay in lock-step (SPEC §8: 32 per node).
Batches are gathered on the device as one ``[k, b]`` index tensor per step.

The shards are held as one flat index array with offsets (CSR), not one object per
node. How a node's permutation is drawn depends on the number of nodes n (the same
for every process of a run, so the simulator and the distributed backend agree):

* n < :data:`VECTOR_NODES` — a ``torch.Generator`` per node seeded by (seed, node,
  epoch) and ``torch.randperm`` (the streams of the earlier releases);
* n ≥ :data:`VECTOR_NODES` (10,000 nodes) — all local nodes at once: sample
  p of repetition r of node i gets the key h(seed, epoch, i, r, p), h a splitmix64
  hash, and one ``lexsort`` by (node, repetition, key) orders every node's shard; a
  node's order depends only on (seed, node, epoch), not on the other nodes.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from ..seeding import derive_seed

#: from this many nodes on, the permutations are drawn vectorised (keyed hash + one sort)
VECTOR_NODES = 1024

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def keyed_orders(flat: np.ndarray, offsets: np.ndarray, nodes: np.ndarray, need: int, seed: int,
                 epoch: int) -> np.ndarray:
    """``[k, need]`` sample indices: for each node (global id ``nodes[q]``, shard
    ``flat[offsets[q]:offsets[q+1]]``) ⌈need/size⌉ keyed permutations of its shard,
    concatenated and cut to ``need``."""
    sizes = np.diff(offsets)
    reps = -(-need // sizes)                                    # ⌈need / size⌉ per node
    seg_len = sizes * reps                                      # elements drawn per node
    total = int(seg_len.sum())
    node_of = np.repeat(np.arange(len(sizes)), seg_len)
    start = np.repeat(np.cumsum(seg_len) - seg_len, seg_len)
    within = np.arange(total) - start                          # position in the node's draw
    rep = within // sizes[node_of]
    pos = within - rep * sizes[node_of]                         # index into the node's shard
    with np.errstate(over="ignore"):
        base = np.uint64(derive_seed(seed, "data-keyed", epoch))
        h = _mix64(base + nodes.astype(np.uint64)[node_of] * _GOLDEN)
        key = _mix64(h + (rep.astype(np.uint64) << np.uint64(32)) + pos.astype(np.uint64))
    order = np.lexsort((key, rep, node_of))                     # by node, then repetition, then key
    drawn = flat[offsets[node_of[order]] + pos[order]]
    keep = (np.arange(total) - start) < need                    # the first `need` of each node
    return drawn[keep].reshape(len(sizes), need)


class NodeSampler:
    def __init__(
        self,
        parts: Sequence[np.ndarray],
        local_nodes: Sequence[int],
        batch_size: int,
        seed: int,
        device: torch.device | str = "cpu",
    ) -> None:
        self.local_nodes = np.asarray(list(local_nodes), dtype=np.int64)
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.device = torch.device(device)
        sizes = np.fromiter((len(parts[i]) for i in self.local_nodes), dtype=np.int64, count=len(self.local_nodes))
        #: the local nodes' shards, flat, and where each starts (CSR)
        self.offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        self.flat = (np.concatenate([np.asarray(parts[i], dtype=np.int64) for i in self.local_nodes])
                     if len(sizes) else np.zeros(0, dtype=np.int64))
        mean_size = sum(len(p) for p in parts) / len(parts)
        self.steps_per_epoch = max(1, math.ceil(mean_size / self.batch_size))
        #: permutations drawn vectorised (n ≥ VECTOR_NODES; module docstring)
        self.vectorized = len(parts) >= VECTOR_NODES

    def epoch_indices(self, epoch: int) -> torch.Tensor:
        """Sample indices ``[k, steps_per_epoch, b]`` for one epoch."""
        k = len(self.local_nodes)
        need = self.steps_per_epoch * self.batch_size
        if self.vectorized:
            idx = torch.from_numpy(keyed_orders(self.flat, self.offsets, self.local_nodes, need, self.seed, epoch))
        else:
            idx = torch.stack([self.node_epoch_indices(pos, epoch) for pos in range(k)])
        return idx.view(k, self.steps_per_epoch, self.batch_size).to(self.device)

    def node_epoch_indices(self, pos: int, epoch: int) -> torch.Tensor:
        """The sample indices ``[steps_per_epoch · b]`` of local node ``pos`` in ``epoch``
        (on the CPU): its shard in the order of a generator seeded by (seed, node, epoch),
        repeated with fresh permutations when the shard is smaller than an epoch's draw.
        AD-PSGD's nodes (train/async_gossip.py) each walk their own stream with it."""
        need = self.steps_per_epoch * self.batch_size
        lo, hi = int(self.offsets[pos]), int(self.offsets[pos + 1])
        if self.vectorized:
            one = keyed_orders(self.flat[lo:hi], np.array([0, hi - lo]), self.local_nodes[pos:pos + 1], need,
                               self.seed, epoch)
            return torch.from_numpy(one[0])
        node, part = int(self.local_nodes[pos]), torch.from_numpy(self.flat[lo:hi])
        g = torch.Generator().manual_seed(derive_seed(self.seed, "data", node, epoch))
        reps = math.ceil(need / len(part))
        return torch.cat([part[torch.randperm(len(part), generator=g)] for _ in range(reps)])[:need]
