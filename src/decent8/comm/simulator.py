"""Simulator backend: all n nodes in one process, gossip as tensor operations.

Messages of all nodes are stacked on the node axis, decoded at once and mixed with
one (dense or sparse) product ``W @ decoded`` (SPEC §1: ``W[i, j]`` is what i takes
from j); sparse messages (top-k, random-k) mix as a :class:`~.base.SparseIncrement`
when the caller accumulates the increment (Choco-SGD). Both read one
:class:`~.mixing_plan.MixingPlan` per round. Bytes are counted from the payload
tensors: each node sends its payload once per out-neighbour (self excluded), the same
convention the distributed backend measures at its send calls.
"""
from __future__ import annotations

import torch

from ..compression.base import Compressor
from ..compression.payload import Payload
from ..topology import Topology
from .base import Communicator, SparseIncrement
from .mixing_plan import SPARSE_MIN_NODES, MixingPlan  # noqa: F401  (SPARSE_MIN_NODES re-exported)
from ..byzantine.messages import gather

#: plans kept (per phase); per-round random topologies make every step a new phase
PLAN_CACHE = 64


class SimulatorCommunicator(Communicator):
    single_process = True

    def __init__(self, topology: Topology, device: torch.device | str = "cpu") -> None:
        super().__init__(topology, list(range(topology.n)), torch.device(device))
        self._plans: dict[int, MixingPlan] = {}

    def plan(self, step: int) -> MixingPlan:
        """The mixing of round ``step`` (cached per phase)."""
        phase = step % self.topology.period
        if phase not in self._plans:
            if len(self._plans) >= PLAN_CACHE:
                self._plans.clear()
            self._plans[phase] = MixingPlan.of_topology(self.topology, phase, self.device)
        return self._plans[phase]

    def weights(self, step: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """W of round ``step`` (dense or CSR)."""
        return self.plan(step).matrix(dtype)

    def edge_slots(self, step: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """W − I of round ``step`` as conflict-free slots (:meth:`MixingPlan.slots`)."""
        return self.plan(step).slots()

    def _count(self, plan: MixingPlan, nbytes_per_node: float) -> None:
        self.bytes_sent += plan.sends * float(nbytes_per_node)

    def _exchange(self, payload: Payload, compressor: Compressor, step: int, decoded: torch.Tensor | None,
                  dtype: torch.dtype) -> torch.Tensor:
        plan = self.plan(step)
        self._count(plan, payload.nbytes_per_node())
        if decoded is None:
            decoded = compressor.decode(payload)
        return plan.matrix(dtype) @ decoded.to(dtype)

    def _dense_increment(self, payload: Payload, compressor: Compressor, step: int,
                         decoded: torch.Tensor | None) -> torch.Tensor:
        """(W − I) q with q in float64 once (same-dtype ops)."""
        plan = self.plan(step)
        self._count(plan, payload.nbytes_per_node())
        q64 = (compressor.decode(payload) if decoded is None else decoded).to(torch.float64)
        return (plan.matrix(torch.float64) @ q64).sub_(q64)

    def _sparse_increment(self, payload: Payload, step: int,
                          sparse: tuple[torch.Tensor, torch.Tensor]) -> SparseIncrement:
        """The increment's entries, one slot per :meth:`MixingPlan.slots` slot (what node
        dst receives from src at src's K positions, times W_{dst,src} − δ)."""
        plan = self.plan(step)
        self._count(plan, payload.nbytes_per_node())
        cols, vals = sparse
        vals = vals.to(torch.float64)
        return SparseIncrement([(dst, cols.index_select(0, src), vals.index_select(0, src).mul_(w[:, None]))
                                for dst, src, w in plan.slots()])

    def _exchange_messages(self, payload: Payload, compressor: Compressor, step: int,
                           decoded: torch.Tensor | None):
        """Every node's in-neighbour messages, gathered from the decoded ``[n, d]`` payloads
        by the plan's slot table (:meth:`MixingPlan.neighbours`)."""
        plan = self.plan(step)
        self._count(plan, payload.nbytes_per_node())
        if decoded is None:
            decoded = compressor.decode(payload)
        return gather(plan.neighbours(), self.local_nodes, decoded, decoded)

    def _mix_scalars(self, values: torch.Tensor, step: int) -> torch.Tensor:
        plan = self.plan(step)
        self._count(plan, values.shape[1] * 4)
        return plan.matrix(torch.float32) @ values.to(torch.float32)

    def _ring_pass(self, chunk: torch.Tensor) -> torch.Tensor:
        per_node = chunk[0].numel() * chunk.element_size()
        self.bytes_sent += float(per_node)
        return torch.roll(chunk, shifts=1, dims=0)

    def _permute_pass(self, chunk: torch.Tensor, dst: tuple[int, ...]) -> torch.Tensor:
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
