"""Node blocks over torch.distributed: R ranks, each holding a block of the n nodes.

docs/architecture.md "Node blocks"; SPEC §1 (``W[i, j]`` is what i takes
from j). Rank r holds the nodes ``B_r`` of the placement (:mod:`.placement`) as its
stacked ``[k_r, d]`` state, runs them with the simulator's execution strategies, and
computes for every local node i exactly the simulator's row

    out_i = Σ_j W_ij · decode(payload_j)      (self and in-neighbours j)

split into the edges inside the block, mixed from the local rows, and the edges that
cross ranks, mixed from received rows. Per phase a rank builds one matrix
``M = [W[B_r, B_r] | W_cross]`` of shape ``[k, k + m]`` over the rows
``[decode(own payloads); decode(received payloads)]`` (m = crossing in-edges), so the
mixing is one (dense, or CSR for k + m ≥ 17) product — the simulator's ``W @ decoded``
restricted to the block.

Wire (per step, per ordered pair of ranks q → r that has crossing edges): **one**
message, a ``uint8`` buffer holding, tensor by tensor in :meth:`Payload.names` order,
the payload rows of every crossing edge j → i (j on q, i on r) sorted by (j, i) — the
payload formats of today (int8/uint8 values, int16/int32 indices, fp32 scales, packed
bits) reinterpreted as bytes, never pickled. It is preceded by the size header of
:mod:`.distributed` (bytes and dtype, checked before the receive is posted) and, once
per phase and payload layout, by the 32-byte layout header (names, shapes, dtypes
fingerprint): the receiver re-types the bytes from the compressor's ``spec()`` and
checks them (``check_received``) before decoding. A row is sent once per crossing
*edge* (not once per (node, rank) pair), so the bytes between ranks are exactly
``crossing edges × payload bytes``, the per-edge messages SPEC §12's time model counts.

Bytes: ``bytes_sent[a]`` grows by the payload bytes of *every* out-edge of local node a
(inside the block or not) — identical to the simulator's count, so runs compare
across R. ``cross_bytes[a]`` counts only the out-edges that cross ranks; ``wire_bytes``
is what was measured at the send calls (the buffers handed to torch.distributed,
headers excluded) and equals ``cross_bytes.sum()``.

Ring and permutation passes (Marsit's ring/torus all-reduce, RelaySGD's chain): a hop
whose source and destination share a rank is a local copy; the others travel, batched
per rank pair like the exchange. Failures reuse :mod:`.distributed`'s reports, naming
the rank and the nodes it held (``rank 1 (nodes 8–15) …``).
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from ..compression.base import Compressor
from ..compression.payload import Payload
from ..errors import ConfigError
from ..topology import Topology
from .base import Communicator
from .distributed import DistributedCommunicator, PeerError, init_process_group, rank_device, torchrun_env
from .placement import blocks as split_blocks
from .placement import crossing_edges, describe_nodes
from ..byzantine.messages import neighbour_table
from ..byzantine.messages import gather

#: at least this many columns (k + m): mixing with a CSR matrix, like the simulator's SPARSE_MIN_NODES
SPARSE_MIN_COLUMNS = 17


@dataclass
class _Route:
    """Rows that travel in one pass: ``send[q]`` local row indices for rank q (in wire
    order), ``recv[q]`` the number of rows coming from rank q (ascending q)."""

    send: list[tuple[int, torch.Tensor]]
    recv: list[tuple[int, int]]

    @property
    def rows_in(self) -> int:
        return sum(c for _, c in self.recv)


@dataclass
class _BlockPlan:
    """One phase of the topology as seen from this rank."""

    route: _Route
    mix32: torch.Tensor          # [k, k + m] float32 (dense or CSR)
    mix64: torch.Tensor          # the same in float64
    out_degree: torch.Tensor     # float64 [k]: out-edges of each local node (self excluded)
    cross_degree: torch.Tensor   # float64 [k]: those that cross ranks
    crossing: int                # crossing edges of the whole graph this phase
    neighbours: object = None    # NeighbourTable: in-edge slots of the local nodes over [own; received] rows


class BlockCommunicator(DistributedCommunicator):
    """The communicator of the block ``B_rank`` of a placement ``owner[n]`` over R ranks.

    Joins the process group from torchrun's environment unless one is initialised;
    WORLD_SIZE must be R = max(owner) + 1. ``timeout_s`` bounds every exchange."""

    def __init__(self, topology: Topology, owner: list[int], device: torch.device | str = "cpu",
                 timeout_s: float = 60.0) -> None:
        timeout_s = float(timeout_s)
        if not timeout_s > 0:
            raise ConfigError("dist_timeout_s", f"must be > 0 seconds, got {timeout_s:g}")
        if len(owner) != topology.n:
            raise ConfigError("dist.placement", f"places {len(owner)} nodes, the topology has {topology.n}")
        ranks = max(owner) + 1
        dev = torch.device(device)
        self._owns_group = False
        if dist.is_available() and dist.is_initialized():
            rank, world = dist.get_rank(), dist.get_world_size()
            dev = rank_device(dev, int(os.environ.get("LOCAL_RANK", rank)))
        else:
            if not dist.is_available():
                raise ConfigError("backend", "this torch build has no torch.distributed support")
            try:
                world_env = int(os.environ.get("WORLD_SIZE", ""))
            except ValueError:
                world_env = ranks
            if world_env != ranks:
                raise ConfigError("dist.ranks", f"the config places the {topology.n} nodes on dist.ranks={ranks} ranks "
                                                f"but {world_env} processes were started (WORLD_SIZE={world_env}); start "
                                                f"{ranks} (decent8 launch --ranks {ranks}) or set dist.ranks={world_env}")
            env = torchrun_env(ranks)
            rank, world = env.rank, env.world_size
            dev = rank_device(dev, env.local_rank)
            if dev.type == "cuda":
                torch.cuda.set_device(dev)
            init_process_group(env, dev, timeout_s)
            self._owns_group = True
        if world != ranks:
            raise ConfigError("dist.ranks", f"the placement uses {ranks} ranks but the process group has {world}")
        self.owner = [int(r) for r in owner]
        self.world_size = world
        self.blocks = split_blocks(self.owner, world)
        Communicator.__init__(self, topology, self.blocks[rank], dev)
        self.rank = rank
        self.timeout_s = timeout_s
        self.backend = str(dist.get_backend())
        self._pos = {node: a for a, node in enumerate(self.local_nodes)}
        self._plans: dict[int, _BlockPlan] = {}          # type: ignore[assignment]
        self._routes: dict[tuple[int, ...], tuple[_Route, torch.Tensor, torch.Tensor, list[torch.Tensor],
                                                  torch.Tensor, torch.Tensor]] = {}
        self._recv = {}
        self._checked_specs = set()
        self._handshakes: set[tuple] = set()
        self._closed = False
        #: per local node: payload bytes of its out-edges that crossed ranks (float64 [k])
        self.cross_bytes = torch.zeros(self.k, dtype=torch.float64)
        #: bytes measured at the send calls of this rank (the per-pair buffers; headers excluded)
        self.wire_bytes = 0.0
        self.barrier()

    # ------------------------------------------------------------------ naming
    def _peer_name(self, peer: int | None) -> str:
        if peer is None:
            return "one of ranks "
        return f"rank {peer} (nodes {describe_nodes(self.blocks[peer])})"

    # ------------------------------------------------------------------- plans
    def _plan(self, step: int) -> _BlockPlan:  # type: ignore[override]
        phase = self.topology.phase(step)
        plan = self._plans.get(phase)
        if plan is None:
            if len(self._plans) >= 64:   # per-round random topologies: every step is a new phase
                self._plans.clear()
            plan = self._plans[phase] = self._build_plan(phase)
        return plan

    def _build_plan(self, phase: int) -> _BlockPlan:
        """Wire order and mixing matrix of one phase (module docstring)."""
        w = np.asarray(self.topology.weights_np(phase), dtype=np.float64)
        own = np.asarray(self.owner)
        me, k = self.rank, self.k
        off = (w != 0) & ~np.eye(w.shape[0], dtype=bool)
        dst, src = np.nonzero(off)                               # edge src → dst, W[dst, src]
        order = np.lexsort((dst, src))                           # wire order: by (src, dst)
        dst, src = dst[order], src[order]
        send, recv = [], []
        cols_r, cols_c, cols_v = [], [], []
        e_dst, e_src, e_w, e_row = [], [], [], []     # per in-edge of a local node (exchange_messages)
        offset = k
        for q in range(self.world_size):
            if q == me:
                continue
            out = (own[src] == me) & (own[dst] == q)
            if out.any():
                send.append((q, torch.as_tensor([self._pos[int(j)] for j in src[out]], dtype=torch.long,
                                                device=self.device)))
            inc = (own[src] == q) & (own[dst] == me)
            m = int(inc.sum())
            if m:
                recv.append((q, m))
                cols_r += [self._pos[int(i)] for i in dst[inc]]
                cols_c += list(range(offset, offset + m))
                cols_v += list(w[dst[inc], src[inc]])
                e_dst += list(dst[inc]); e_src += list(src[inc]); e_w += list(w[dst[inc], src[inc]])  # noqa: E702
                e_row += list(range(offset, offset + m))
                offset += m
        inside = (own[src] == me) & (own[dst] == me)
        e_dst += list(dst[inside]); e_src += list(src[inside]); e_w += list(w[dst[inside], src[inside]])  # noqa: E702
        e_row += [self._pos[int(j)] for j in src[inside]]
        cols_r += [self._pos[int(i)] for i in dst[inside]] + list(range(k))
        cols_c += [self._pos[int(j)] for j in src[inside]] + list(range(k))
        cols_v += list(w[dst[inside], src[inside]]) + [w[i, i] for i in self.local_nodes]
        mix = torch.zeros(k, offset, dtype=torch.float64)
        mix.index_put_((torch.as_tensor(cols_r, dtype=torch.long), torch.as_tensor(cols_c, dtype=torch.long)),
                       torch.as_tensor(cols_v, dtype=torch.float64), accumulate=True)
        mats = [mix.to(torch.float32), mix]
        if offset >= SPARSE_MIN_COLUMNS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
                mats = [m_.to_sparse_csr() for m_ in mats]
        local = np.asarray(self.local_nodes)
        out_deg = off[:, local].sum(axis=0)
        cross_deg = (off[:, local] & (own[:, None] != me)).sum(axis=0)
        table = neighbour_table(self.local_nodes, np.asarray(e_dst, dtype=np.int64), np.asarray(e_src, dtype=np.int64),
                                np.asarray(e_w, dtype=np.float64), np.asarray([w[i, i] for i in self.local_nodes]),
                                np.asarray(e_row, dtype=np.int64), self.device)
        return _BlockPlan(_Route(send, recv), mats[0].to(self.device), mats[1].to(self.device),
                          torch.as_tensor(out_deg, dtype=torch.float64), torch.as_tensor(cross_deg, dtype=torch.float64),
                          crossing_edges(w, self.owner), table)

    def crossing_edges(self, step: int = 0) -> int:
        """Directed edges of the step's phase whose ends lie on different ranks."""
        return self._plan(step).crossing

    # ------------------------------------------------------------------- wire
    def _ship(self, route: _Route, tensors: list[torch.Tensor], what: str) -> list[torch.Tensor]:
        """Send each peer rank its rows of ``tensors`` (``[k, ...]`` each) as one uint8
        message; return the received rows ``[m, ...]`` per tensor (ascending peer rank)."""
        shapes = [tuple(t.shape[1:]) for t in tensors]
        row_bytes = [t[0].numel() * t.element_size() if t.shape[0] else 0 for t in tensors]
        sends = []
        for q, idx in route.send:
            parts = [t.index_select(0, idx).contiguous().reshape(-1).view(torch.uint8) for t in tensors]
            sends.append((torch.cat(parts) if len(parts) > 1 else parts[0], q))
        recvs = [(torch.empty(cnt * sum(row_bytes), dtype=torch.uint8, device=self.device), q) for q, cnt in route.recv]
        if sends or recvs:
            self._transfer(sends, recvs, what, count=False)
            self.wire_bytes += float(sum(b.numel() for b, _ in sends))
        out: list[list[torch.Tensor]] = [[] for _ in tensors]
        for (buf, _), (_, cnt) in zip(recvs, route.recv):
            at = 0
            for n_, (t, shape, nb) in enumerate(zip(tensors, shapes, row_bytes)):
                piece = buf[at: at + cnt * nb].clone()   # own storage: aligned for the dtype view
                out[n_].append(piece.view(t.dtype).reshape(cnt, *shape))
                at += cnt * nb
        return [torch.cat(p) if p else t.new_empty((0, *s)) for p, t, s in zip(out, tensors, shapes)]

    def _handshake_block(self, plan: _BlockPlan, spec: dict, step: int, what: str) -> None:
        """Once per phase and payload layout: the 32-byte layout header to every peer rank
        this rank sends to, checked against the receiver's own (see distributed.py)."""
        key = (self.topology.phase(step), tuple(sorted((n, tuple(sh), str(d)) for n, (sh, d) in spec.items())))
        if key in self._handshakes:
            return
        mine = self.spec_header(spec).to(self.device)
        inbox = [(torch.zeros(4, dtype=torch.int64, device=self.device), q) for q, _ in plan.route.recv]
        self._transfer([(mine, q) for q, _ in plan.route.send], inbox, f"payload header, {what}", count=False)
        ref = mine.cpu().tolist()
        for got, q in inbox:
            if got.cpu().tolist() != ref:
                raise PeerError(f"{self._peer_name(q)} would send payloads of another layout than this rank expects "
                                f"(different configs) ({what}, seen by {self._peer_name(self.rank)})")
        self._handshakes.add(key)

    def _count(self, plan: _BlockPlan, per_edge: float) -> None:
        self.bytes_sent += plan.out_degree * per_edge
        self.cross_bytes += plan.cross_degree * per_edge

    # ------------------------------------------------------------------ gossip
    def _exchange(
        self, payload: Payload, compressor: Compressor, step: int, decoded: torch.Tensor | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        plan, own, rows = self._received_rows(payload, compressor, step, decoded, dtype)
        return (plan.mix64 if dtype == torch.float64 else plan.mix32.to(dtype)) @ rows

    def _received_rows(self, payload: Payload, compressor: Compressor, step: int, decoded: torch.Tensor | None,
                       dtype: torch.dtype) -> tuple[_BlockPlan, torch.Tensor, torch.Tensor]:
        """One exchange's wire (bytes counted, handshake, send and receive): the phase's plan,
        the local nodes' own decoded rows and ``[own; decode(received)]``."""
        if payload.num_nodes != self.k:
            raise ValueError(f"rank {self.rank} holds {self.k} nodes, got a payload for {payload.num_nodes}")
        spec = compressor.spec()
        plan = self._plan(step)
        names = payload.names()
        what = f"exchange at step {step}"
        self._count(plan, float(payload.nbytes_per_node()))
        self._handshake_block(plan, spec, step, what)
        got = self._ship(plan.route, [payload.tensors[n].to(self.device) for n in names], what)
        own = (decoded if decoded is not None else compressor.decode(payload)).to(self.device).to(dtype)
        return plan, own, self._rows(plan, compressor, names, got, own, what)

    def _rows(self, plan: _BlockPlan, compressor: Compressor, names: list[str], got: list[torch.Tensor],
              own: torch.Tensor, what: str) -> torch.Tensor:
        """``[own; decode(received)]``: the rows the phase's mixing matrix and neighbour table read."""
        if not plan.route.rows_in:
            return own
        received = Payload(dict(zip(names, got)))
        why = compressor.check_received(received)
        if why is not None:
            peers = ", ".join(self._peer_name(q) for q, _ in plan.route.recv)
            raise PeerError(f"a malformed payload from {peers}: {why} ({what}, seen by {self._peer_name(self.rank)})")
        return torch.cat([own, compressor.decode(received).to(own.dtype)], dim=0)

    def _exchange_messages(self, payload: Payload, compressor: Compressor, step: int,
                           decoded: torch.Tensor | None):
        """The local nodes' in-neighbour messages: the exchange's wire, then the rows read by
        the phase's neighbour table (the simulator's slots restricted to the block)."""
        plan, own, rows = self._received_rows(payload, compressor, step, decoded, torch.float32)
        return gather(plan.neighbours, self.local_nodes, own, rows)

    def _mix_scalars(self, values: torch.Tensor, step: int) -> torch.Tensor:
        plan = self._plan(step)
        v = values.to(self.device, torch.float32).contiguous()
        self._count(plan, float(v.shape[1] * 4))
        (got,) = self._ship(plan.route, [v], f"push-sum weights at step {step}")
        return plan.mix32 @ torch.cat([v, got], dim=0)

    # -------------------------------------------------------------------- ring
    def _permutation(self, dst: tuple[int, ...]):
        """Route of a permutation pass: sends per rank by ascending source node, local
        copies, and where the received rows go (ascending source node per peer)."""
        cached = self._routes.get(dst)
        if cached is not None:
            return cached
        n, own, me = self.num_nodes, self.owner, self.rank
        inv = [0] * n
        for i, t in enumerate(dst):
            inv[t] = i
        send, recv, recv_pos = [], [], []
        for q in range(self.world_size):
            if q == me:
                continue
            rows = [self._pos[i] for i in self.local_nodes if own[dst[i]] == q]
            if rows:
                send.append((q, torch.as_tensor(rows, dtype=torch.long, device=self.device)))
            srcs = sorted(inv[t] for t in self.local_nodes if own[inv[t]] == q)
            if srcs:
                recv.append((q, len(srcs)))
                recv_pos += [self._pos[dst[s]] for s in srcs]
        loc_src = [self._pos[i] for i in self.local_nodes if own[dst[i]] == me]
        loc_dst = [self._pos[dst[i]] for i in self.local_nodes if own[dst[i]] == me]
        moving = torch.as_tensor([float(dst[i] != i) for i in self.local_nodes], dtype=torch.float64)
        crossing = torch.as_tensor([float(own[dst[i]] != me) for i in self.local_nodes], dtype=torch.float64)
        t = lambda a: torch.as_tensor(a, dtype=torch.long, device=self.device)  # noqa: E731
        cached = (_Route(send, recv), t(loc_src), t(loc_dst), [t(recv_pos)], moving, crossing)
        if len(self._routes) >= 16:
            self._routes.clear()
        self._routes[dst] = cached
        return cached

    def _permute_pass(self, chunk: torch.Tensor, dst: "list[int] | tuple[int, ...]") -> torch.Tensor:
        """Local node i's row goes to node ``dst[i]`` (simulator semantics); hops between
        nodes of one rank are copies, the others one message per rank pair."""
        dst_t = tuple(int(d) for d in dst)
        n = self.num_nodes
        if sorted(dst_t) != list(range(n)):
            raise ValueError(f"permute_pass needs a permutation of 0..{n - 1}, got {list(dst_t)}")
        route, loc_src, loc_dst, (recv_pos,), moving, crossing = self._permutation(dst_t)
        c = chunk.to(self.device).contiguous()
        per_node = float(c[0].numel() * c.element_size())
        self.bytes_sent += moving * per_node
        self.cross_bytes += crossing * per_node
        out = torch.empty_like(c)
        if loc_src.numel():
            out[loc_dst] = c[loc_src]
        (got,) = self._ship(route, [c], "ring pass")
        if recv_pos.numel():
            out[recv_pos] = got
        return out.to(chunk.device)

    def _ring_pass(self, chunk: torch.Tensor) -> torch.Tensor:
        n = self.num_nodes
        return self._permute_pass(chunk, tuple((i + 1) % n for i in range(n)))

    # -------------------------------------------------------------- reductions
    # mean_over_nodes: the parent's (a sum of the local rows, all-reduced over the ranks)
    def gather_nodes(self, x: torch.Tensor) -> torch.Tensor:
        """All n rows in node order: blocks padded to the largest, all-gathered, placed."""
        kmax = max(len(b) for b in self.blocks)
        y = x.to(self.device).contiguous()
        if y.shape[0] < kmax:
            y = torch.cat([y, y.new_zeros((kmax - y.shape[0], *y.shape[1:]))])
        parts = [torch.empty_like(y) for _ in range(self.world_size)]
        with self._collective("all_gather"):
            dist.all_gather(parts, y)
        out = y.new_empty((self.num_nodes, *y.shape[1:]))
        for q, nodes in enumerate(self.blocks):
            out[torch.as_tensor(nodes, dtype=torch.long, device=self.device)] = parts[q][: len(nodes)]
        return out.to(x.device)

    # ------------------------------------------------------------------ record
    def placement_record(self) -> dict:
        """What the run records about the placement (same on every rank): ranks, block
        sizes, crossing edges of phase 0, and the bytes that crossed ranks (counted and
        measured, summed over ranks)."""
        sums = torch.tensor([self.cross_bytes.sum().item(), self.wire_bytes], dtype=torch.float64, device=self.device)
        with self._collective("all_reduce"):
            dist.all_reduce(sums, op=dist.ReduceOp.SUM)
        return {"dist_ranks": self.world_size, "dist_block_sizes": [len(b) for b in self.blocks],
                "crossing_edges": self.crossing_edges(0),
                "bytes_between_ranks": sums[0].item(), "bytes_between_ranks_measured": sums[1].item()}


__all__ = ["BlockCommunicator"]
