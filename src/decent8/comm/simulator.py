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
from .base import Communicator

#: above this many nodes, mixing uses a sparse CSR matrix instead of a dense one
SPARSE_MIN_NODES = 17


class SimulatorCommunicator(Communicator):
    def __init__(self, topology: Topology, device: torch.device | str = "cpu") -> None:
        super().__init__(topology, list(range(topology.n)), torch.device(device))
        self._w_cache: dict[int, torch.Tensor] = {}
        self._deg_cache: dict[int, torch.Tensor] = {}

    def _phase(self, step: int) -> int:
        return step % self.topology.period

    def weights(self, step: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        phase = self._phase(step)
        key = phase if dtype == torch.float32 else (phase, dtype)
        if key not in self._w_cache:
            if len(self._w_cache) >= 64:  # per-round random topologies: every step is a new phase
                self._w_cache.clear()
                self._deg_cache.clear()
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
