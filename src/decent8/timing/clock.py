"""Simulated wall-clock (SPEC §12) and the recorder that feeds it.

:class:`TrafficRecorder` observes any :class:`~decent8.comm.base.Communicator`
(simulator, faulty simulator, torch.distributed rank) and logs per training step what
went on the wire — the bytes of each gossip message (``exchange`` and
``exchange_increment`` payloads plus push-sum scalars, which ride along) and every ring
hop (``ring_pass`` / ``permute_pass``: bytes and destination). The communicator itself
measures the wall time spent inside those calls (``comm_time_s``).

:class:`SimClock` turns one step's log and the nodes' compute times C_i into time:

* gossip step (synchronous): with b_j the message bytes of sender j, m_j the number of
  out-neighbours it sends to this round (0 when it is down), D the delivery mask and
  the network model's α, β, ε (:mod:`.network`),

      A_ij = α_ij + ε_ij + s_j · b_j / β_ij,  s_j = m_j (shared uplink) or 1,
      T = max_i ( C_i + max_{j ≠ i, D_ij} A_ij )            (no overlap)
      T = max_i max( C_i, max_{j ≠ i, D_ij} A_ij )          (clock.overlap=true: the
           exchange of step t runs during the computation of step t + 1);

* ring / torus all-reduce: each hop h is synchronous, H_h = max_j (α_{d_j j} + ε +
  b_h / β_{d_j j}) over the senders j and their destinations d_j; the step takes
  T = max_i C_i + Σ_h H_h (overlap: max(max_i C_i, Σ_h H_h)). For a ring of M workers
  with uniform α, β and a bucket of L elements this is 2(M − 1)(α + (L/M)·u/β) with u
  the bytes per element on the wire (4 for fp32, 1/8 for Marsit's packed sign bits);

* a gossip-only consensus round: the same with C_i = 0.

``clock.as_model`` times the run as if its messages and compute were those of another
model (e.g. ``resnet20`` on CIFAR-10-sized inputs) while training the configured one:
every gossip payload is scaled by (that model's message bytes / this model's), every
ring hop by (that model's padded length / this model's), and the FLOPs are that model's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..topology import Topology
from .device import DeviceModel
from .faults import FaultModel
from .network import NetworkModel


@dataclass
class StepLog:
    """What one step put on the wire (per node: all nodes of a step send equal sizes)."""

    gossip_step: int | None = None     # the step index passed to exchange (mask, phase)
    message_bytes: float = 0.0         # Σ exchange payload bytes of one node's message
    scalar_bytes: float = 0.0          # push-sum weights riding along (not scaled)
    hops: list[tuple[float, tuple[int, ...] | None]] = field(default_factory=list)  # (bytes, dst or None = ring)

    @property
    def empty(self) -> bool:
        return self.gossip_step is None and not self.hops


class TrafficRecorder:
    """A :class:`~decent8.comm.base.TrafficObserver` that logs the wire traffic of the
    current step for the simulated clock (see the module docstring); the communicator's
    own ``comm_time_s`` is the measured time. Attach with ``comm.observe(TrafficRecorder())``."""

    def __init__(self) -> None:
        self.log = StepLog()

    def on_traffic(self, kind: str, step: int | None, nbytes: float, dst: tuple[int, ...] | None) -> None:
        if kind == "gossip":
            self.log.gossip_step = step
            self.log.message_bytes += nbytes
        elif kind == "scalars":
            self.log.gossip_step = step
            self.log.scalar_bytes += nbytes
        else:
            self.log.hops.append((nbytes, dst))

    def pop_log(self) -> StepLog:
        log, self.log = self.log, StepLog()
        return log


def gossip_time(compute: np.ndarray, message_bytes: np.ndarray, adjacency: np.ndarray, delivered: np.ndarray,
                up: np.ndarray, net: NetworkModel, jitter: np.ndarray, overlap: bool = False) -> float:
    """One synchronous gossip step (module docstring). ``adjacency[i, j]``: j → i is an
    edge this phase; ``delivered[i, j]``: its message arrives; ``message_bytes[n]``: b_j;
    ``up[n]``: nodes that send at all. The edges of :func:`gossip_time_edges`."""
    n = len(compute)
    adj = np.asarray(adjacency, dtype=bool) & ~np.eye(n, dtype=bool)
    dst, src = np.nonzero(adj & np.asarray(delivered, dtype=bool))
    return gossip_time_edges(compute, message_bytes, dst, src, up, net, jitter, overlap, sent=adj.sum(axis=0))


def gossip_time_edges(compute: np.ndarray, message_bytes: np.ndarray, dst: np.ndarray, src: np.ndarray,
                      up: np.ndarray, net: NetworkModel, jitter: np.ndarray, overlap: bool = False,
                      sent: np.ndarray | None = None) -> float:
    """One synchronous gossip step over the delivered edges src → dst (no self-loops):
    node i receives for max over its in-edges of α + ε + s_j·b_j/β (s_j: the messages on
    j's uplink, ``sent[j]``, default its out-edges here, when the uplink is shared), and
    computes before or (``overlap``) while it receives. Sparse topologies call it
    directly."""
    n = len(compute)
    m = ((np.bincount(src, minlength=n) if sent is None else sent) * up).astype(np.float64)
    share = m if net.shared_uplink else np.ones(n)
    alpha, beta = net.links(dst, src)
    jit = jitter[dst, src] if np.ndim(jitter) == 2 else jitter
    arrival = alpha + jit + (share * message_bytes)[src] / beta
    recv = np.zeros(n)
    np.maximum.at(recv, dst, arrival)
    per_node = np.maximum(compute, recv) if overlap else compute + recv
    return float(per_node.max())


def ring_hops_time(hops: list[tuple[float, tuple[int, ...] | None]], net: NetworkModel, jitter: np.ndarray,
                   scale: float = 1.0) -> float:
    """Σ over synchronous hops of max over senders j of α + ε + b/β on the link j → dst_j."""
    n = net.n
    src = np.arange(n)
    total = 0.0
    for nbytes, dst in hops:
        d = (src + 1) % n if dst is None else np.asarray(dst)
        moving = d != src
        if not moving.any():
            continue
        alpha, beta = net.links(d, src)
        jit = jitter[d, src] if np.ndim(jitter) == 2 else jitter
        t = alpha + jit + nbytes * scale / beta
        total += float(t[moving].max())
    return total


class SimClock:
    """Accumulates ``sim_time_s`` step by step from :class:`StepLog` s."""

    def __init__(self, topology: Topology, network: NetworkModel, device: DeviceModel,
                 faults: FaultModel | None = None, overlap: bool = False,
                 message_scale: float = 1.0, ring_scale: float = 1.0) -> None:
        self.topology = topology
        self.network = network
        self.device = device
        self.faults = faults if faults is not None and faults.active else None
        self.overlap = bool(overlap)
        self.message_scale = float(message_scale)
        self.ring_scale = float(ring_scale)
        self.sim_time_s = 0.0
        self.rounds = 0

    def step_time(self, log: StepLog, compute: np.ndarray) -> float:
        """Simulated seconds of one step with ``compute[n]`` seconds per node."""
        n = self.topology.n
        jitter = self.network.jitter(self.rounds)
        comm_free = float(compute.max()) if n else 0.0
        t = 0.0
        if log.gossip_step is not None:
            s = log.gossip_step
            if getattr(self.topology, "sparse", False):  # edge lists, no [n, n] masks
                b = np.full(n, log.message_bytes * self.message_scale + log.scalar_bytes)
                dst, src, _ = self.topology.edges(s)
                t = gossip_time_edges(compute, b, dst, src, np.ones(n, dtype=bool), self.network, jitter, self.overlap)
            else:
                if self.faults is not None:
                    up, delivered = self.faults.draw(s)
                else:
                    up, delivered = np.ones(n, dtype=bool), np.ones((n, n), dtype=bool)
                b = np.full(n, log.message_bytes * self.message_scale + log.scalar_bytes)
                t = gossip_time(compute, b, self.topology.adjacency(s), delivered, up, self.network, jitter,
                                self.overlap)
        if log.hops:
            hops = ring_hops_time(log.hops, self.network, jitter, self.ring_scale)
            ring = max(comm_free, hops) if self.overlap else comm_free + hops
            t = max(t, ring) if log.gossip_step is not None else ring
        if log.empty:
            t = comm_free
        return t

    def advance(self, log: StepLog, compute: np.ndarray) -> float:
        dt = self.step_time(log, compute)
        self.sim_time_s += dt
        self.rounds += 1
        return dt

    def state_dict(self) -> dict[str, float]:
        return {"sim_time_s": self.sim_time_s, "rounds": self.rounds}

    def load_state_dict(self, state: dict | None) -> None:
        if state:
            self.sim_time_s = float(state["sim_time_s"])
            self.rounds = int(state["rounds"])
