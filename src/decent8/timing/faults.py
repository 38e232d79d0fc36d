"""Faults in the simulation: node dropout and link failure per round (SPEC §12).

Round t (the ``step`` the algorithm passes to the communicator) draws, from a
generator seeded by (run seed, t), which nodes are up (each down with probability
``faults.node_drop``) and which directed links deliver (each fails with probability
``faults.link_drop``). A message j → i is delivered, D_ij = 1, when both nodes are up
and the link works; D_ii = 1 always. A node that is down sends and receives nothing
this round (it still takes its local step: it missed the exchange, not the training);
a failed link still costs its sender the bytes.

Mixing over what was delivered, W → W' (SPEC §12: "a message that is not delivered is
not mixed; the receiver renormalises its weights over what arrived, push-sum keeps
the sums exact by also not counting the sender's share as sent"):

* plain gossip (row-stochastic / doubly stochastic W): the receiver renormalises its row,
      W'_ij = W_ij D_ij / Σ_l W_il D_il ;
  every row still sums to 1 (a consensus stays a consensus), but the column sums, and
  with them the exact average, are not preserved.
* push-sum (column-stochastic W): the sender keeps the share it could not deliver,
      W'_ij = W_ij D_ij (i ≠ j),   W'_jj = W_jj + Σ_{i≠j} W_ij (1 − D_ij) ;
  every column still sums to 1, so Σ_i z_i and Σ_i ω_i are exact and z_i/ω_i still
  converges to the true average (tests/timing/test_timing.py).

The algorithms are unchanged: this is a :class:`~decent8.comm.simulator.SimulatorCommunicator`
whose mixing plan at step t is W'(t), read by ``exchange``, ``mix_scalars`` and the sparse
increment alike.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..comm.mixing_plan import MixingPlan
from ..comm.simulator import SimulatorCommunicator
from ..errors import ConfigError
from ..topology import Topology


class FaultModel:
    """Seeded per-round delivery masks ``D[n, n]`` (``D[i, j]``: j's message reached i)."""

    def __init__(self, n: int, node_drop: float = 0.0, link_drop: float = 0.0, seed: int = 0) -> None:
        for opt, p in (("faults.node_drop", node_drop), ("faults.link_drop", link_drop)):
            try:
                ok = math.isfinite(float(p)) and 0.0 <= float(p) < 1.0
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise ConfigError(opt, f"must be a probability in [0, 1), got {p!r}")
        self.n = int(n)
        self.node_drop = float(node_drop)
        self.link_drop = float(link_drop)
        self.seed = int(seed)

    @property
    def active(self) -> bool:
        return self.node_drop > 0 or self.link_drop > 0

    def draw(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """``(up[n] bool, delivered[n, n] bool)`` for round ``step`` (same for every caller)."""
        n = self.n
        rng = np.random.default_rng([self.seed, int(step)])
        up = rng.random(n) >= self.node_drop
        link = rng.random((n, n)) >= self.link_drop
        delivered = link & up[:, None] & up[None, :]
        np.fill_diagonal(delivered, True)
        return up, delivered


def faulty_weights(W: np.ndarray, delivered: np.ndarray, push_sum: bool) -> np.ndarray:
    """W' of the module docstring: row renormalisation, or the sender keeps its share (push-sum)."""
    W = np.asarray(W, dtype=np.float64)
    kept = W * delivered
    if push_sum:
        lost = (W - kept).sum(axis=0)  # per sender j: Σ_i W_ij (1 − D_ij); D_jj = 1
        return kept + np.diag(lost)
    return kept / kept.sum(axis=1, keepdims=True)  # the self weight keeps every row sum > 0


class FaultySimulatorCommunicator(SimulatorCommunicator):
    """The simulator with faults: every path mixes by W'(t) and counts bytes only for
    what was sent, through one :class:`~decent8.comm.mixing_plan.MixingPlan` per round
    (the dense exchange and Choco's sparse increment alike).

    A node that is up sends its payload to each out-neighbour (a failed link still
    costs the bytes); a node that is down sends nothing."""

    def __init__(self, topology: Topology, faults: FaultModel, push_sum: bool,
                 device: torch.device | str = "cpu") -> None:
        super().__init__(topology, device)
        self.faults = faults
        self.push_sum = bool(push_sum)
        self._step_plan: tuple[int, MixingPlan] | None = None

    def plan(self, step: int) -> MixingPlan:
        """W'(step) (module docstring), cached for the current round."""
        if self._step_plan is None or self._step_plan[0] != step:
            up, delivered = self.faults.draw(step)
            adj = self.topology.adjacency(step)
            w = faulty_weights(self.topology.weights_np(step), delivered | ~adj, self.push_sum)
            sends = self.topology.out_degree(step) * up
            self._step_plan = (step, MixingPlan(self.num_nodes, sends, self.device, dense=w))
        return self._step_plan[1]
