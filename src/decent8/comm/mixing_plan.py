"""One gossip round's mixing, as every simulator path reads it (SPEC §1, §12).

A :class:`MixingPlan` holds, for one round t, the matrix the round mixes with — W at
phase t mod period, or W'(t) when faults re-weight it (:mod:`decent8.timing.faults`) —
and everything derived from it that a path needs:

* :meth:`MixingPlan.matrix` — W as a dense or CSR tensor of a dtype (``exchange``:
  row i = Σ_j W_ij x_j);
* :meth:`MixingPlan.slots` — W − I as slots ``(dst [m], src [m], weight float64 [m])``:
  slot 0 is every node's self weight W_ii − 1, slot r ≥ 1 the r-th in-neighbour of every
  node that has one, so no destination repeats within a slot (the sparse increment
  Δ_dst += (W − I)_{dst,src} q_src, scattered at src's K message positions);
* :meth:`MixingPlan.neighbours` — the in-neighbour slots of every node, sorted by sender
  (:func:`decent8.byzantine.messages.neighbour_table`; per-edge messages);
* :attr:`MixingPlan.sends` — messages each node sends this round (its out-degree; 0
  for a node that is down): ``bytes_sent += sends · payload bytes``.

The dense and the sparse path read the same plan, so a fault or a time-varying graph
cannot apply to one path and not the other.
"""
from __future__ import annotations

import warnings

import numpy as np
import torch
from ..byzantine.messages import neighbour_table

#: above this many nodes, mixing uses a sparse CSR matrix instead of a dense one
SPARSE_MIN_NODES = 17


class MixingPlan:
    """The mixing of one round: from a dense W (``dense``) or a sparse topology's phase
    (``topology`` + ``phase``, edge lists, no [n, n] array)."""

    def __init__(self, n: int, sends: np.ndarray, device: torch.device, *, dense: np.ndarray | None = None,
                 topology=None, phase: int = 0) -> None:
        if (dense is None) == (topology is None):
            raise ValueError("a MixingPlan needs either a dense W or a sparse topology")
        self.n = int(n)
        self.device = torch.device(device)
        self.sends = torch.as_tensor(np.asarray(sends, dtype=np.float64))
        self._dense = None if dense is None else np.asarray(dense, dtype=np.float64)
        self._topology, self._phase = topology, int(phase)
        self._matrices: dict[torch.dtype, torch.Tensor] = {}
        self._slots: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] | None = None
        self._neighbours = None

    @classmethod
    def of_topology(cls, topology, step: int, device: torch.device) -> "MixingPlan":
        """The fault-free plan of round ``step``: W at phase ``step mod period``."""
        phase = step % topology.period
        sends = np.asarray(topology.out_degree(phase), dtype=np.float64)
        if getattr(topology, "sparse", False):
            return cls(topology.n, sends, device, topology=topology, phase=phase)
        return cls(topology.n, sends, device, dense=topology.weights_np(phase))

    def matrix(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """W of this round as a ``dtype`` tensor: CSR from 17 nodes on, dense below."""
        if dtype not in self._matrices:
            if self._dense is None:
                w = self._topology.weights_torch(self._phase, dtype, self.device)
            else:
                w = torch.tensor(self._dense, dtype=dtype, device=self.device)
                if self.n >= SPARSE_MIN_NODES:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
                        w = w.to_sparse_csr()
            self._matrices[dtype] = w
        return self._matrices[dtype]

    def slots(self) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """W − I as conflict-free slots (module docstring)."""
        if self._slots is None:
            if self._dense is None:
                dst, src, val = self._topology.edges(self._phase)
                diag = self._topology.weights_sparse(self._phase).diagonal()
            else:
                off = self._dense.copy()
                np.fill_diagonal(off, 0.0)
                dst, src = np.nonzero(off)                    # row-major: grouped by dst, src ascending
                val, diag = self._dense[dst, src], np.diag(self._dense)
            dst, src = np.asarray(dst), np.asarray(src)
            rank = np.arange(len(dst)) - np.searchsorted(dst, dst)   # position among dst's in-neighbours
            idx = np.arange(self.n)
            slots = [(idx, idx, np.asarray(diag, dtype=np.float64) - 1.0)]
            for r in range(int(rank.max()) + 1 if len(rank) else 0):
                sel = rank == r
                slots.append((dst[sel], src[sel], np.asarray(val, dtype=np.float64)[sel]))

            def t(a, dt=torch.long):
                return torch.as_tensor(np.ascontiguousarray(a), dtype=dt, device=self.device)
            self._slots = [(t(d), t(s_), t(v, torch.float64)) for d, s_, v in slots]
        return self._slots

    def neighbours(self):
        """The in-neighbour slots of all n nodes (:class:`~decent8.byzantine.messages.NeighbourTable`),
        from the same W as :meth:`slots` (self weight W_ii, W_ij per in-edge)."""
        if self._neighbours is None:
            slots = self.slots()
            diag = slots[0][2].cpu().numpy() + 1.0
            edges = slots[1:]
            cat = lambda i, dt: (torch.cat([e[i].cpu() for e in edges]).numpy() if edges  # noqa: E731
                                 else np.zeros(0, dtype=dt))
            self._neighbours = neighbour_table(list(range(self.n)), cat(0, np.int64), cat(1, np.int64),
                                               cat(2, np.float64), diag, device=self.device)
        return self._neighbours
