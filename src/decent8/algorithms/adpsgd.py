"""AD-PSGD, asynchronous decentralized parallel SGD (Lian et al., ICML 2018): the math (SPEC §3, §12).

Every node computes gradients at its own speed; there are no rounds. One *event* is
node i finishing the gradient it started at its model as it was then, x̂_i:

    j ~ Uniform(neighbours of i)            (seeded by (run seed, i, i's computation count))
    x_i, x_j ← (x_i + x_j) / 2              (atomic pairwise average: W_e = I − (e_i − e_j)(e_i − e_j)ᵀ/2)
    x_i ← x_i − lr · d_i,  d_i the local optimizer's direction for g_i = ∇F_i(x̂_i; ξ_i) + λ·x̂_i

Each W_e is symmetric and doubly stochastic, so Σ_i x_i changes only by the gradient
steps (the average model follows SGD with stale gradients), which is why AD-PSGD
needs an undirected graph and no push-sum. The *staleness* of an event is the number
of model updates between i's read of x̂_i and its write: ``node`` counts the writes to
x_i by other events (neighbours averaging with i) in between, ``global`` the events of
any node in between (Lian et al.'s τ). The event order, the clock and the staleness
records live in :mod:`decent8.train.async_gossip`; this module holds the per-event
update and the end-of-training consensus rounds.

Only the simulator runs it: see docs/algorithms.md §13 for why the
torch.distributed backend does not (an atomic average with a partner that does not know
it is being contacted needs a listener thread or one-sided communication, which
point-to-point send/recv with matched calls cannot give reproducibly).
"""
from __future__ import annotations

import numpy as np
import torch

from ..errors import ConfigError
from ..seeding import derive_seed
from ..state_spec import StateSpec
from .base import GossipAlgorithm
from ..registry import algorithms
from .info import AlgorithmInfo


def pair_average_(z: torch.Tensor, i: int, j: int) -> None:
    """x_i, x_j ← (x_i + x_j) / 2 in place (rows of ``z[n, d]``)."""
    if i == j:
        return
    z[i].add_(z[j]).mul_(0.5)
    z[j].copy_(z[i])


def momentum_direction_(buf: torch.Tensor, g: torch.Tensor, momentum: float, nesterov: bool) -> torch.Tensor:
    """One node's local momentum step (SPEC §6, PyTorch's SGD convention; weight decay is
    already in ``g``): m ← β·m + g; d = g + β·m (Nesterov) or m. ``buf`` is the node's
    row of the optimizer's momentum buffer, updated in place; returns d."""
    if momentum == 0.0:
        return g
    buf.mul_(momentum).add_(g)
    return g.add(buf, alpha=momentum) if nesterov else buf.clone()


#: exact pairwise averages (no compression); QGM is not defined for it; the neighbour draws are keyed
#: by the run seed (its constructor's ``seed``)
INFO = AlgorithmInfo(display_name="AD-PSGD", supports_compression=False, allows_qgm=False, options={"seed": "seed"})


@algorithms.register("adpsgd", order=11, info=INFO)
class ADPSGD(GossipAlgorithm):
    """Neighbour choice, the per-event update and pairwise gossip rounds for all n nodes
    (``z[n, d]``: the simulator's stacked models)."""

    name = "adpsgd"
    #: trained by events in simulated time (train/async_gossip.py), not by engine steps; simulator only
    runner = "event_driven"
    #: no state of its own; the event runner keeps every node's pending gradient (train/async_gossip.py)
    state = StateSpec(step=4)

    def __init__(self, comm, compressor, gamma: float = 1.0, push_sum: bool = False, generators=None,
                 seed: int = 0) -> None:
        super().__init__(comm, compressor, gamma, push_sum, generators)
        topo = comm.topology
        if comm.k != comm.num_nodes:
            raise ConfigError("backend", "adpsgd runs in the simulator only (backend=simulator): its atomic pairwise "
                                         "averages need one-sided communication (docs/algorithms.md §13)")
        if topo.period != 1 or not topo.is_undirected:
            what = "draws a new graph every round" if topo.period != 1 else "is directed"
            raise ConfigError("topology", f"adpsgd needs a static undirected graph (each event averages a node "
                                          f"with one neighbour, both ways); topology={topo.name} {what}")
        if push_sum and topo.is_doubly_stochastic:
            raise ConfigError("algorithm.push_sum", "adpsgd averages pairs of models (doubly stochastic); "
                                                    "push_sum must be auto or false")
        if push_sum:   # auto on a W that is not doubly stochastic (an irregular graph)
            raise ConfigError("topology", f"adpsgd averages pairs of models and needs a doubly stochastic W; "
                                          f"topology={topo.name}'s is not (its nodes' degrees differ): use "
                                          f"topology.weights=metropolis, and algorithm.push_sum=auto or false")
        if gamma != 1.0:
            raise ConfigError("algorithm.gamma", f"adpsgd averages pairs exactly (γ = 1), got {gamma}")
        adj = np.asarray(topo.adjacency(0), dtype=bool) & ~np.eye(topo.n, dtype=bool)
        #: each node's neighbours, ascending
        self.neighbours: list[np.ndarray] = [np.flatnonzero(adj[i]) for i in range(topo.n)]
        if any(len(nb) == 0 for nb in self.neighbours):
            raise ConfigError("topology", "adpsgd needs every node to have a neighbour")
        self.seed = int(seed)

    def neighbour(self, i: int, count: int) -> int:
        """The neighbour node i averages with after its ``count``-th gradient: uniform over
        its neighbours, from a generator keyed by (run seed, i, count) (stateless, so the
        choice does not depend on the order events are processed or on a resume)."""
        nb = self.neighbours[i]
        rng = np.random.default_rng(derive_seed(self.seed, "adpsgd", i, count))
        return int(nb[rng.integers(len(nb))])

    def apply_event(self, z: torch.Tensor, i: int, j: int, direction: torch.Tensor, lr: float) -> None:
        """One AD-PSGD event: average x_i with x_j, then x_i ← x_i − lr·d_i."""
        pair_average_(z, i, j)
        z[i].sub_(direction.reshape(-1), alpha=lr)

    def consensus_step(self, z: torch.Tensor, step: int) -> None:
        """A gossip-only round: every node, in a seeded random order, averages with a
        random neighbour (n pairwise events without gradients)."""
        self._gossip(z, step)

    def _gossip(self, z: torch.Tensor, step: int) -> None:
        n = z.shape[0]
        order = np.random.default_rng(derive_seed(self.seed, "adpsgd-round", step)).permutation(n)
        nbytes = float(self.compressor.nbytes())
        for i in order:
            j = self.neighbour(int(i), -1 - int(step))  # negative counts: the rounds' own draws
            pair_average_(z, int(i), j)
            self.comm.bytes_sent[int(i)] += nbytes
            self.comm.bytes_sent[j] += nbytes
