"""The communication interface the algorithms talk to (ARCHITECTURE "The communication interface").

An algorithm never knows how many nodes live in its process: it holds tensors with a
leading node axis of length k (k = n in the simulator, k = 1 on a torch.distributed
rank) and reaches its neighbours only through these calls. Every call that moves
data counts the bytes of the payload tensors it moves (``bytes_sent``, per local node).
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from ..compression.base import Compressor
from ..compression.payload import Payload
from ..topology import Topology


class SparseIncrement:
    """A mixing increment Δ as entries: ``slots`` is a list of ``(rows [m], cols [m, K],
    values float64 [m, K])`` with Δ[rows[r], cols[r, c]] += values[r, c]; inside one slot
    no position repeats (rows distinct, columns distinct within a row), so each slot can
    be applied with one gather and one scatter."""

    __slots__ = ("slots",)

    def __init__(self, slots: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> None:
        self.slots = slots


class Communicator(ABC):
    """Neighbour exchange, ring passes and node-axis reductions for the k local nodes."""

    def __init__(self, topology: Topology, local_nodes: list[int], device: torch.device) -> None:
        self.topology = topology
        self.num_nodes = topology.n
        self.local_nodes = list(local_nodes)
        self.device = torch.device(device)
        #: cumulative bytes each local node has handed to the network (float64, [k])
        self.bytes_sent = torch.zeros(len(self.local_nodes), dtype=torch.float64)

    @property
    def k(self) -> int:
        return len(self.local_nodes)

    # --- gossip ---------------------------------------------------------------
    @abstractmethod
    def exchange(
        self, payload: Payload, compressor: Compressor, step: int, decoded: torch.Tensor | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        """Send each local node's payload to its out-neighbours; return ``[k, d]``
        with row i = Σ_j W_ij · decode(payload_j) over i's in-neighbours j, self included.

        ``decoded`` may pass ``compressor.decode(payload)`` for the local nodes when the
        caller already has it, so it is not decoded twice. ``dtype``: the precision of
        the mixing sum and of the result (the wire is unchanged): ``torch.float64`` for
        callers that accumulate the result over many rounds (Choco-SGD, issue 12), whose
        float32 rounding would otherwise persist; W's entries are then exact to 2⁻⁵³."""

    def exchange_increment(
        self, payload: Payload, compressor: Compressor, step: int, decoded: torch.Tensor | None = None,
        sparse: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> "torch.Tensor | SparseIncrement":
        """Exchange like :meth:`exchange` and return the *mixing increment*
        Δ_i = Σ_j W_ij q_j − q_i (q = decode(payload)) in float64, for callers that
        accumulate it (Choco-SGD's residual; issue 12/32): a dense ``[k, d]`` float64
        tensor, or — when ``sparse = compressor.decode_sparse(payload)`` is given and the
        backend can — a :class:`SparseIncrement` holding only the entries that received
        something. Either way Σ_i Δ_i = Σ_j (Σ_i W_ij − 1) q_j with W exact to 2⁻⁵³."""
        if decoded is None:
            decoded = compressor.decode(payload)
        return self.exchange(payload, compressor, step, decoded=decoded, dtype=torch.float64).sub_(decoded)

    @abstractmethod
    def mix_scalars(self, values: torch.Tensor, step: int) -> torch.Tensor:
        """``[k, m]`` float32 side values (push-sum weights ω) mixed like the parameters:
        row i = Σ_j W_ij v_j. Sent uncompressed (4 bytes per value per out-edge)."""

    # --- ring -----------------------------------------------------------------
    @abstractmethod
    def ring_pass(self, chunk: torch.Tensor) -> torch.Tensor:
        """Send ``chunk[k, ...]`` to node i+1 (mod n) and return what node i−1 sent."""

    def permute_pass(self, chunk: torch.Tensor, dst: "list[int] | tuple[int, ...]") -> torch.Tensor:
        """Send local node i's row of ``chunk[k, ...]`` to node ``dst[i]`` and return what
        the node j with ``dst[j] == i`` sent (``dst``: a permutation of 0..n−1 over all
        n nodes, e.g. "next node in my torus row/column"). Counts bytes like
        :meth:`ring_pass`. The 2-D torus all-reduce needs it; a backend without it
        supports only the plain ring (``dst[i] == i+1 mod n``), which maps to ``ring_pass``."""
        n = self.num_nodes
        if list(dst) == [(i + 1) % n for i in range(n)]:
            return self.ring_pass(chunk)
        raise NotImplementedError(f"{type(self).__name__} does not implement permute_pass")

    @property
    def has_permute_pass(self) -> bool:
        """True when this backend implements :meth:`permute_pass` for any permutation."""
        return type(self).permute_pass is not Communicator.permute_pass

    # --- reductions over the node axis (evaluation, metrics; not training traffic) ---
    @abstractmethod
    def mean_over_nodes(self, x: torch.Tensor) -> torch.Tensor:
        """Mean over all n nodes of ``x[k, ...]`` → ``[...]`` (identical on every process)."""

    @abstractmethod
    def gather_nodes(self, x: torch.Tensor) -> torch.Tensor:
        """All nodes' rows ``[n, ...]`` from the local ``[k, ...]`` (node order 0..n−1)."""

    @property
    def is_main(self) -> bool:
        """True on the process that writes the run folder."""
        return True

    def barrier(self) -> None:  # pragma: no cover - trivial in one process
        pass

    def broadcast_object(self, obj):
        """``obj`` as the main process has it (small picklable setup values such as the
        run folder's name; never training traffic). Identity in one process."""
        return obj

    def close(self) -> None:  # pragma: no cover
        pass
