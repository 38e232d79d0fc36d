"""Simulator backend: all n nodes in one process, gossip as tensor operations.

Messages of all nodes are stacked on the node axis, decoded at once and mixed with
one (dense or sparse) product ``W @ decoded`` (SPEC §1: ``W[i, j]`` is what i takes
from j). Bytes are counted from the payload tensors: each node sends its payload once
per out-neighbour (self excluded), the same convention the distributed backend
measures at its send calls.
"""
from __future__ import annotations

import warnings

import torch

from ..compression.base import Compressor
from ..compression.payload import Payload
from ..topology import Topology
from .base import Communicator, SparseIncrement

#: above this many nodes, mixing uses a sparse CSR matrix instead of a dense one
SPARSE_MIN_NODES = 17


class SimulatorCommunicator(Communicator):
    def __init__(self, topology: Topology, device: torch.device | str = "cpu") -> None:
        super().__init__(topology, list(range(topology.n)), torch.device(device))
        self._w_cache: dict[int, torch.Tensor] = {}
        self._deg_cache: dict[int, torch.Tensor] = {}
        self._slot_cache: dict[int, list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = {}

    def _phase(self, step: int) -> int:
        return step % self.topology.period

    def weights(self, step: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        phase = self._phase(step)
        key = phase if dtype == torch.float32 else (phase, dtype)
        if key not in self._w_cache:
            if len(self._w_cache) >= 64:  # per-round random topologies: every step is a new phase
                self._w_cache.clear()
                self._deg_cache.clear()
            if getattr(self.topology, "sparse", False):  # many nodes: CSR from edge lists, no [n, n] array
                w = self.topology.weights_torch(phase, dtype, self.device)
                self._w_cache[key] = w
                self._deg_cache[phase] = torch.as_tensor(self.topology.out_degree(phase), dtype=torch.float64)
                return w
            w = torch.tensor(self.topology.weights_np(phase), dtype=dtype, device=self.device)
            if self.num_nodes >= SPARSE_MIN_NODES:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
                    w = w.to_sparse_csr()
            self._w_cache[key] = w
            self._deg_cache[phase] = torch.as_tensor(self.topology.out_degree(phase), dtype=torch.float64)
        return self._w_cache[key]

    def _mix(self, x: torch.Tensor, step: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        w = self.weights(step, dtype)
        return w @ x.to(dtype)

    def _count(self, nbytes_per_node: int, step: int) -> None:
        self.weights(step)  # fills the degree cache
        self.bytes_sent += self._deg_cache[self._phase(step)] * float(nbytes_per_node)

    def exchange(
        self, payload: Payload, compressor: Compressor, step: int, decoded: torch.Tensor | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        self._count(payload.nbytes_per_node(), step)
        if decoded is None:
            decoded = compressor.decode(payload)
        return self._mix(decoded, step, dtype)

    def edge_slots(self, step: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """W − I as slots ``(dst [m], src [m], weight float64 [m])``: slot 0 is every node's
        self weight W_ii − 1, slot r ≥ 1 the r-th in-neighbour of every node that has one,
        so no destination repeats within a slot."""
        phase = self._phase(step)
        if phase not in self._slot_cache:
            import numpy as np
            if getattr(self.topology, "sparse", False):  # the same slots from the CSR W (issue 32)
                dst, src, val = self.topology.edges(phase)
                diag = self.topology.weights_sparse(phase).diagonal()
            else:
                w = np.asarray(self.topology.weights_np(phase), dtype=np.float64)
                off = w.copy()
                np.fill_diagonal(off, 0.0)
                dst, src = np.nonzero(off)                    # row-major: grouped by dst, src ascending
                val, diag = w[dst, src], np.diag(w)
            n = self.num_nodes
            rank = np.arange(len(dst)) - np.searchsorted(dst, dst)   # position among dst's in-neighbours
            idx = np.arange(n)
            slots = [(idx, idx, diag - 1.0)]
            for r in range(int(rank.max()) + 1 if len(rank) else 0):
                sel = rank == r
                slots.append((dst[sel], src[sel], val[sel]))
            t = lambda a, dt=torch.long: torch.as_tensor(np.ascontiguousarray(a), dtype=dt, device=self.device)  # noqa: E731
            self._slot_cache[phase] = [(t(d), t(s_), t(v, torch.float64)) for d, s_, v in slots]
        return self._slot_cache[phase]

    def exchange_increment(
        self, payload: Payload, compressor: Compressor, step: int, decoded: torch.Tensor | None = None,
        sparse: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> "torch.Tensor | SparseIncrement":
        """Sparse messages: the increment's entries, one slot per :meth:`edge_slots` slot
        (what node dst receives from src at src's K positions, times W_{dst,src} − δ)."""
        if sparse is None:                      # dense: (W − I) q with q in float64 once (same-dtype ops)
            self._count(payload.nbytes_per_node(), step)
            q64 = (compressor.decode(payload) if decoded is None else decoded).to(torch.float64)
            return (self.weights(step, torch.float64) @ q64).sub_(q64)
        self._count(payload.nbytes_per_node(), step)
        cols, vals = sparse
        vals = vals.to(torch.float64)
        return SparseIncrement([(dst, cols.index_select(0, src), vals.index_select(0, src).mul_(w[:, None]))
                                for dst, src, w in self.edge_slots(step)])

    def mix_scalars(self, values: torch.Tensor, step: int) -> torch.Tensor:
        self._count(values.shape[1] * 4, step)
        return self._mix(values.to(torch.float32), step)

    def ring_pass(self, chunk: torch.Tensor) -> torch.Tensor:
        per_node = chunk[0].numel() * chunk.element_size()
        self.bytes_sent += float(per_node)
        return torch.roll(chunk, shifts=1, dims=0)

    def permute_pass(self, chunk: torch.Tensor, dst: "list[int] | tuple[int, ...]") -> torch.Tensor:
        """Row ``dst[i]`` of the result is row i of ``chunk``: one gather by the inverse
        permutation. Every node that sends to another node pays its row's bytes."""
        dst_t = torch.as_tensor(list(dst), dtype=torch.long)
        if dst_t.numel() != self.num_nodes or not torch.equal(dst_t.sort().values, torch.arange(self.num_nodes)):
            raise ValueError(f"permute_pass needs a permutation of 0..{self.num_nodes - 1}, got {list(dst)}")
        per_node = chunk[0].numel() * chunk.element_size()
        self.bytes_sent += (dst_t != torch.arange(self.num_nodes)).to(torch.float64) * float(per_node)
        src = torch.argsort(dst_t).to(chunk.device)
        return chunk.index_select(0, src)

    def mean_over_nodes(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=0)

    def gather_nodes(self, x: torch.Tensor) -> torch.Tensor:
        return x
