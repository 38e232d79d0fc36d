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
whose mixing matrix at step t is W'(t), used by ``exchange`` and ``mix_scalars`` alike.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import torch

from ..comm.simulator import SPARSE_MIN_NODES, SimulatorCommunicator
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
    """The simulator with faults: mixing by W'(t), bytes only for what was sent.

    A node that is up sends its payload to each out-neighbour (a failed link still
    costs the bytes); a node that is down sends nothing."""

    def __init__(self, topology: Topology, faults: FaultModel, push_sum: bool,
                 device: torch.device | str = "cpu") -> None:
        super().__init__(topology, device)
        self.faults = faults
        self.push_sum = bool(push_sum)
        self._step_cache: tuple[int, torch.Tensor, torch.Tensor] | None = None

    def _faulty(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self._step_cache is None or self._step_cache[0] != step:
            up, delivered = self.faults.draw(step)
            adj = self.topology.adjacency(step)
            w_np = faulty_weights(self.topology.weights_np(step), delivered | ~adj, self.push_sum)
            w = torch.tensor(w_np, dtype=torch.float32, device=self.device)
            if self.num_nodes >= SPARSE_MIN_NODES:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
                    w = w.to_sparse_csr()
            sends = torch.as_tensor(self.topology.out_degree(step) * up, dtype=torch.float64)
            self._step_cache = (step, w, sends)
        return self._step_cache[1], self._step_cache[2]

    def _mix(self, x: torch.Tensor, step: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        w = self._faulty(step)[0]
        return w.to(dtype) @ x.to(dtype)

    def _count(self, nbytes_per_node: int, step: int) -> None:
        self.bytes_sent += self._faulty(step)[1] * float(nbytes_per_node)
