"""Ring and 2-D torus all-reduce on the communicator's ring passes (docs/algorithms.md §10).

Written once on :meth:`Communicator.ring_pass` / :meth:`Communicator.permute_pass`, so
the same code runs in the simulator (all n nodes at once on the node axis, k = n)
and on a torch.distributed rank (k = 1).

**Ring all-reduce** over one flat bucket: each node's vector (padded by the caller to
a multiple of M, or 8·M when bits travel) is split into M chunks.

* Reduce-scatter, M − 1 hops: at hop h (0-based) node i at ring position p_i works on
  chunk ``(p_i − h) mod M`` — a gather by that index over the node axis, no loop over
  nodes. At h = 0 it sends its own (encoded) chunk; at h ≥ 1 it receives the partial
  result of chunk ``(p_i − h) mod M`` from its predecessor, which already stands for h
  workers, merges its own contribution (then it stands for h + 1; the worker is at
  *chain position* h + 1) and sends it on. Afterwards node i owns the complete chunk
  ``(p_i + 1) mod M``.
* All-gather, M − 1 hops: the owned results are forwarded unchanged; at hop h node i
  receives chunk ``(p_i + 1 − h) mod M`` and stores it (a scatter by that index).

**2-D torus all-reduce** (rows × cols, node = r·cols + c): reduce-scatter along the row
rings (C chunks), reduce-scatter the owned row chunk along the column rings (R
sub-chunks), then all-gather along the columns and along the rows. Written as a
recursion over a list of :class:`Ring` levels, so a plain ring is the one-level case.
At the second level every contribution already stands for C workers, which the
codec's ``merge`` is told (``n_in``, ``n_own``).

What travels and how partial results merge is a :class:`Codec`: fp32 sums here
(:class:`SumCodec`), packed sign bits in :mod:`decent8.algorithms.marsit`, scaled signs
in :mod:`decent8.algorithms.ef_signsgd`. Messages are tuples of tensors; every tensor
goes through one ring pass per hop and is counted by the communicator.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import torch

from ..comm.base import Communicator
from ..errors import ConfigError
from ..topology import torus_shape

#: topologies the all-reduce algorithms run on, by the shape of their all-reduce
RING_TOPOLOGIES = ("ring", "directed_ring")
TORUS_TOPOLOGIES = ("torus",)
ALLREDUCE_TOPOLOGIES = RING_TOPOLOGIES + TORUS_TOPOLOGIES

Message = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class Ring:
    """One ring level: ``size`` workers; ``pos[k]`` each local node's position on its ring;
    ``hop(t)`` sends ``t[k, ...]`` to the next position and returns what the previous sent."""

    size: int
    pos: torch.Tensor
    hop: Callable[[torch.Tensor], torch.Tensor]


class Codec(Protocol):
    """What travels on the ring and how a worker merges its own contribution into it.

    ``own``: ``[k, c]`` (the chunk each local node works on; the last axis is the codec's
    unit: fp32 values, packed bytes, …); ``offset``: ``[k]`` long, where that chunk
    starts in the padded flat vector, in the same unit (to mask the padding);
    ``n_in`` / ``n_own``: how many workers the incoming message / own contribution
    stand for (at the chain position p of a one-level ring: p − 1 and 1)."""

    def start(self, own: torch.Tensor, offset: torch.Tensor) -> Message: ...

    def merge(self, msg: Message, own: torch.Tensor, offset: torch.Tensor, n_in: int, n_own: int) -> Message: ...

    def lift(self, msg: Message, offset: torch.Tensor) -> torch.Tensor:
        """A finished message as the ``own`` input of the next (torus column) level."""
        ...


class SumCodec:
    """Full-precision sums: the message is the partial sum (fp32 ring all-reduce)."""

    def start(self, own: torch.Tensor, offset: torch.Tensor) -> Message:
        return (own.contiguous(),)

    def merge(self, msg: Message, own: torch.Tensor, offset: torch.Tensor, n_in: int, n_own: int) -> Message:
        return (msg[0] + own,)

    def lift(self, msg: Message, offset: torch.Tensor) -> torch.Tensor:
        return msg[0]


def _take(chunks: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Row i of the result is ``chunks[i, idx[i]]`` (``chunks`` is ``[k, M, c]``)."""
    return chunks[torch.arange(chunks.shape[0], device=chunks.device), idx]


def reduce_scatter(own: torch.Tensor, ring: Ring, codec: Codec, weight: int = 1,
                   base_offset: torch.Tensor | int = 0) -> tuple[Message, torch.Tensor]:
    """Ring reduce-scatter of ``own[k, L]`` (L divisible by ``ring.size``); every
    contribution stands for ``weight`` workers. Returns the finished message of the
    chunk each node owns and that chunk's index ``(pos + 1) mod M``."""
    k, L = own.shape
    M = ring.size
    if L % M:
        raise ValueError(f"length {L} is not a multiple of the ring size {M}")
    c = L // M
    chunks = own.reshape(k, M, c)
    pos = ring.pos.to(own.device)
    idx = pos % M
    msg = codec.start(_take(chunks, idx), base_offset + idx * c)
    for h in range(1, M):
        msg = tuple(ring.hop(t) for t in msg)
        idx = (pos - h) % M
        msg = codec.merge(msg, _take(chunks, idx), base_offset + idx * c, h * weight, weight)
    return msg, idx


def all_gather(msg: Message, ring: Ring) -> Message:
    """Ring all-gather: each node contributes the message of chunk ``(pos + 1) mod M``;
    returns every field as ``[k, M, ...]`` in chunk order. Messages are forwarded unchanged."""
    M = ring.size
    k = msg[0].shape[0]
    pos = ring.pos.to(msg[0].device)
    rows = torch.arange(k, device=pos.device)
    out = tuple(t.new_empty((k, M, *t.shape[1:])) for t in msg)
    idx = (pos + 1) % M
    for o, t in zip(out, msg):
        o[rows, idx] = t
    for h in range(1, M):
        msg = tuple(ring.hop(t) for t in msg)
        idx = (pos + 1 - h) % M
        for o, t in zip(out, msg):
            o[rows, idx] = t
    return out


def allreduce(own: torch.Tensor, rings: Sequence[Ring], codec: Codec, weight: int = 1,
              base_offset: torch.Tensor | int = 0) -> Message:
    """Multi-level all-reduce (one level: ring; two: torus rows then columns).

    Returns the final messages, identical on every node, each field shaped
    ``[k, M_1, M_2, …, ...]`` in chunk order (flatten to undo the splitting)."""
    ring, rest = rings[0], rings[1:]
    msg, idx = reduce_scatter(own, ring, codec, weight, base_offset)
    if rest:
        offset = base_offset + idx * (own.shape[1] // ring.size)
        msg = allreduce(codec.lift(msg, offset), rest, codec, weight * ring.size, offset)
    return all_gather(msg, ring)


class RingAllReduce:
    """The all-reduce of one run: ring (``ring``, ``directed_ring``) or 2-D torus.

    ``levels`` are the ring sizes (``[n]`` or ``[cols, rows]``); ``size`` = n;
    :meth:`padded` gives the bucket length (a multiple of ``8·n``, so every chunk of
    every level holds whole bytes of bits); :meth:`mean` is the fp32 all-reduce."""

    def __init__(self, comm: Communicator, shape: str = "ring", rows: int | None = None, cols: int | None = None) -> None:
        self.comm = comm
        n = comm.num_nodes
        nodes = torch.as_tensor(comm.local_nodes, dtype=torch.long, device=comm.device)
        if shape in RING_TOPOLOGIES:
            self.shape, self.rows, self.cols = "ring", 1, n
            self.rings = [Ring(n, nodes, comm.ring_pass)]
        elif shape in TORUS_TOPOLOGIES:
            R, C = torus_shape(n, rows, cols)
            self.shape, self.rows, self.cols = "torus", R, C
            row_next = [(i // C) * C + (i % C + 1) % C for i in range(n)]
            col_next = [((i // C + 1) % R) * C + i % C for i in range(n)]
            rings = [Ring(C, nodes % C, lambda t: comm.permute_pass(t, row_next)),
                     Ring(R, nodes // C, lambda t: comm.permute_pass(t, col_next))]
            self.rings = [g for g in rings if g.size > 1]  # a 1 × n torus is a ring
            if any(g.size < n for g in self.rings) and not comm.has_permute_pass:
                raise ConfigError("topology", f"the 2-D torus all-reduce needs Communicator.permute_pass, which "
                                              f"{type(comm).__name__} does not implement; use topology=ring")
        else:
            raise ConfigError("topology", f"an all-reduce runs on {', '.join(ALLREDUCE_TOPOLOGIES)}, got {shape!r}")
        self.levels = [g.size for g in self.rings]
        self.size = n

    def padded(self, d: int, bits: bool = True) -> int:
        """Bucket length for ``d`` elements: a multiple of ``8·n`` (bits) or ``n`` (fp32)."""
        m = self.size * (8 if bits else 1)
        return -(-d // m) * m

    def run(self, own: torch.Tensor, codec: Codec) -> Message:
        return allreduce(own, self.rings, codec)

    def sum(self, x: torch.Tensor) -> torch.Tensor:
        """fp32 ring (torus) all-reduce sum of ``x[k, d]`` → ``[k, d]``, identical rows."""
        k, d = x.shape
        L = self.padded(d, bits=False)
        own = torch.nn.functional.pad(x.to(torch.float32), (0, L - d))
        return self.run(own, SumCodec())[0].reshape(k, L)[:, :d]

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        return self.sum(x).div_(self.size)

    def bytes_per_worker(self, L: int, unit_bytes: float, extra_bytes: int = 0) -> float:
        """Bytes each worker sends in one all-reduce of an ``L``-unit bucket where a unit
        is ``unit_bytes`` on the wire and every message carries ``extra_bytes`` more
        (e.g. one fp32 scale). Σ over levels l of (M_l − 1) hops of reduce-scatter with
        a chunk of L/(M_1⋯M_l) units, and (M_l − 1) hops of all-gather forwarding that
        chunk as the M_{l+1}⋯ messages of the deeper levels."""
        total, prod = 0.0, 1
        sizes = self.levels
        for lvl, m in enumerate(sizes):
            prod *= m
            deeper = 1
            for mm in sizes[lvl + 1:]:
                deeper *= mm
            chunk = L // prod * unit_bytes
            total += (m - 1) * (chunk + extra_bytes) + (m - 1) * (chunk + extra_bytes * deeper)
        return total


def check_allreduce_topology(algorithm: str, topology_name: str) -> None:
    """One-line error for an all-reduce algorithm on a graph that is not a ring or torus."""
    if topology_name not in ALLREDUCE_TOPOLOGIES:
        raise ConfigError(
            "topology", f"algorithm '{algorithm}' runs a ring or 2-D torus all-reduce; use topology=ring, "
            f"directed_ring or torus (with topology.rows/cols), got {topology_name!r}")
