"""The communication interface the algorithms talk to (docs/architecture.md).

An algorithm never knows how many nodes live in its process: it holds tensors with a
leading node axis of length k (k = n in the simulator, k = 1 on a torch.distributed
rank) and reaches its neighbours only through these calls. Every call that moves
data counts the bytes of the payload tensors it moves (``bytes_sent``, per local node).

The public calls (:meth:`Communicator.exchange`, :meth:`~Communicator.exchange_increment`,
:meth:`~Communicator.exchange_messages`, :meth:`~Communicator.mix_scalars`, :meth:`~Communicator.ring_pass`,
:meth:`~Communicator.permute_pass`) are defined here once and never overridden: each
tells the attached :class:`TrafficObserver` s what goes on the wire, times itself
(``comm_time_s``), counts which implementation ran (``paths``) and calls the backend's
``_exchange``, ``_exchange_increment``, … A backend therefore cannot skip the recording,
and a recorder never hides a backend's fast path.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import Counter
from typing import TYPE_CHECKING, Protocol

import torch

from ..compression.base import Compressor
from ..compression.payload import Payload
from ..topology import Topology

if TYPE_CHECKING:
    from ..byzantine.messages import NeighbourMessages


class SparseIncrement:
    """A mixing increment Δ as entries: ``slots`` is a list of ``(rows [m], cols [m, K],
    values float64 [m, K])`` with Δ[rows[r], cols[r, c]] += values[r, c]; inside one slot
    no position repeats (rows distinct, columns distinct within a row), so each slot can
    be applied with one gather and one scatter."""

    __slots__ = ("slots",)

    def __init__(self, slots: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> None:
        self.slots = slots


class TrafficObserver(Protocol):
    """Sees every message a communicator sends (per node; all nodes of a step send equal
    sizes). ``kind``: ``"gossip"`` (an exchange payload), ``"scalars"`` (push-sum weights
    riding along), ``"hop"`` (a ring or permutation pass; ``dst`` None for the ring)."""

    def on_traffic(self, kind: str, step: int | None, nbytes: float, dst: tuple[int, ...] | None) -> None: ...


class Communicator(ABC):
    """Neighbour exchange, ring passes and node-axis reductions for the k local nodes."""

    #: True when this process holds every node (the simulator); a backend sets it
    single_process: bool = False
    #: processes taking part in the run (1 in the simulator; a torch.distributed backend: its world size)
    world_size: int = 1

    def __init__(self, topology: Topology, local_nodes: list[int], device: torch.device) -> None:
        self.topology = topology
        self.num_nodes = topology.n
        self.local_nodes = list(local_nodes)
        self.device = torch.device(device)
        #: cumulative bytes each local node has handed to the network (float64, [k])
        self.bytes_sent = torch.zeros(len(self.local_nodes), dtype=torch.float64)
        #: observers told of every message (the simulated clock's recorder, tests)
        self.observers: list[TrafficObserver] = []
        #: wall seconds spent inside communication calls
        self.comm_time_s = 0.0
        #: wait for the device after each call (CUDA), so that its time is the call's own
        self.sync_calls = self.device.type == "cuda"
        #: calls by implementation: ``exchange``, ``increment:dense``, ``increment:sparse``,
        #: ``scalars``, ``ring``, ``permute`` (which path a run took; tests and benchmarks read it)
        self.paths: Counter[str] = Counter()

    @property
    def k(self) -> int:
        return len(self.local_nodes)

    def observe(self, observer: TrafficObserver) -> TrafficObserver:
        """Attach ``observer`` (returned) to every later message."""
        self.observers.append(observer)
        return observer

    def _notify(self, kind: str, step: int | None, nbytes: float, dst: tuple[int, ...] | None = None) -> None:
        for observer in self.observers:
            observer.on_traffic(kind, step, nbytes, dst)

    def _timed(self, path: str, fn, *args):
        self.paths[path] += 1
        t0 = time.perf_counter()
        out = fn(*args)
        if self.sync_calls:
            torch.cuda.synchronize(self.device)
        self.comm_time_s += time.perf_counter() - t0
        return out

    # --- gossip ---------------------------------------------------------------
    def exchange(
        self, payload: Payload, compressor: Compressor, step: int, decoded: torch.Tensor | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        """Send each local node's payload to its out-neighbours; return ``[k, d]``
        with row i = Σ_j W_ij · decode(payload_j) over i's in-neighbours j, self included.

        ``decoded`` may pass ``compressor.decode(payload)`` for the local nodes when the
        caller already has it, so it is not decoded twice. ``dtype``: the precision of
        the mixing sum and of the result (the wire is unchanged): ``torch.float64`` for
        callers that accumulate the result over many rounds (Choco-SGD), whose float32
        rounding would otherwise persist; W's entries are then exact to 2⁻⁵³."""
        self._notify("gossip", step, float(payload.nbytes_per_node()))
        return self._timed("exchange", self._exchange, payload, compressor, step, decoded, dtype)

    def exchange_increment(
        self, payload: Payload, compressor: Compressor, step: int, decoded: torch.Tensor | None = None,
        sparse: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> "torch.Tensor | SparseIncrement":
        """Exchange like :meth:`exchange` and return the *mixing increment*
        Δ_i = Σ_j W_ij q_j − q_i (q = decode(payload)) in float64, for callers that
        accumulate it (Choco-SGD's residual): a dense ``[k, d]`` float64 tensor, or — when
        ``sparse = compressor.decode_sparse(payload)`` is given and the backend has
        :meth:`_sparse_increment` — a :class:`SparseIncrement` holding only the entries
        that received something. Either way Σ_i Δ_i = Σ_j (Σ_i W_ij − 1) q_j with W exact
        to 2⁻⁵³."""
        self._notify("gossip", step, float(payload.nbytes_per_node()))
        if sparse is not None and self.has_sparse_increment:
            return self._timed("increment:sparse", self._sparse_increment, payload, step, sparse)
        return self._timed("increment:dense", self._dense_increment, payload, compressor, step, decoded)

    def _dense_increment(self, payload: Payload, compressor: Compressor, step: int,
                         decoded: torch.Tensor | None) -> torch.Tensor:
        """Δ = (W − I) q in float64 through the backend's exchange (a backend may do better)."""
        if decoded is None:
            decoded = compressor.decode(payload)
        return self._exchange(payload, compressor, step, decoded, torch.float64).sub_(decoded)

    def _sparse_increment(self, payload: Payload, step: int,
                          sparse: tuple[torch.Tensor, torch.Tensor]) -> SparseIncrement:
        raise NotImplementedError(f"{type(self).__name__} has no sparse increment")

    @property
    def has_sparse_increment(self) -> bool:
        """True when this backend forms :class:`SparseIncrement` s from sparse messages."""
        return type(self)._sparse_increment is not Communicator._sparse_increment

    def exchange_messages(self, payload: Payload, compressor: Compressor, step: int,
                          decoded: torch.Tensor | None = None) -> "NeighbourMessages":
        """Exchange like :meth:`exchange` (the same messages, bytes and observers) and return
        the individual messages instead of their W-weighted sum: a
        :class:`~decent8.byzantine.messages.NeighbourMessages` with, per local node i and
        in-neighbour j (sorted by id), decode(payload_j) and W_ij. Robust aggregation and
        Byzantine attacks read it (:mod:`decent8.byzantine`)."""
        self._notify("gossip", step, float(payload.nbytes_per_node()))
        return self._timed("messages", self._exchange_messages, payload, compressor, step, decoded)

    def _exchange_messages(self, payload: Payload, compressor: Compressor, step: int,
                           decoded: torch.Tensor | None) -> "NeighbourMessages":
        raise NotImplementedError(f"{type(self).__name__} does not return per-edge messages")

    @property
    def has_exchange_messages(self) -> bool:
        """True when this backend implements :meth:`exchange_messages`."""
        return type(self)._exchange_messages is not Communicator._exchange_messages

    def mix_scalars(self, values: torch.Tensor, step: int) -> torch.Tensor:
        """``[k, m]`` float32 side values (push-sum weights ω) mixed like the parameters:
        row i = Σ_j W_ij v_j. Sent uncompressed (4 bytes per value per out-edge)."""
        self._notify("scalars", step, float(values.shape[1] * 4))
        return self._timed("scalars", self._mix_scalars, values, step)

    # --- ring -----------------------------------------------------------------
    def ring_pass(self, chunk: torch.Tensor) -> torch.Tensor:
        """Send ``chunk[k, ...]`` to node i+1 (mod n) and return what node i−1 sent."""
        self._notify("hop", None, float(chunk[0].numel() * chunk.element_size()))
        return self._timed("ring", self._ring_pass, chunk)

    def permute_pass(self, chunk: torch.Tensor, dst: "list[int] | tuple[int, ...]") -> torch.Tensor:
        """Send local node i's row of ``chunk[k, ...]`` to node ``dst[i]`` and return what
        the node j with ``dst[j] == i`` sent (``dst``: a permutation of 0..n−1 over all
        n nodes, e.g. "next node in my torus row/column"). Counts bytes like
        :meth:`ring_pass`. The 2-D torus all-reduce needs it; a backend without
        :meth:`_permute_pass` supports only the plain ring (``dst[i] == i+1 mod n``)."""
        n = self.num_nodes
        dst = tuple(int(d) for d in dst)
        if not self.has_permute_pass:
            if list(dst) == [(i + 1) % n for i in range(n)]:
                return self.ring_pass(chunk)
            raise NotImplementedError(f"{type(self).__name__} does not implement permute_pass")
        self._notify("hop", None, float(chunk[0].numel() * chunk.element_size()), dst)
        return self._timed("permute", self._permute_pass, chunk, dst)

    @property
    def has_permute_pass(self) -> bool:
        """True when this backend implements :meth:`permute_pass` for any permutation."""
        return type(self)._permute_pass is not Communicator._permute_pass

    # --- what a backend implements ----------------------------------------------
    @abstractmethod
    def _exchange(self, payload: Payload, compressor: Compressor, step: int, decoded: torch.Tensor | None,
                  dtype: torch.dtype) -> torch.Tensor:
        """:meth:`exchange` without the recording."""

    @abstractmethod
    def _mix_scalars(self, values: torch.Tensor, step: int) -> torch.Tensor:
        """:meth:`mix_scalars` without the recording."""

    @abstractmethod
    def _ring_pass(self, chunk: torch.Tensor) -> torch.Tensor:
        """:meth:`ring_pass` without the recording."""

    def _permute_pass(self, chunk: torch.Tensor, dst: tuple[int, ...]) -> torch.Tensor:
        """:meth:`permute_pass` without the recording (optional)."""
        raise NotImplementedError

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
