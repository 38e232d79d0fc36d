"""Per-edge messages: what each local node received from each in-neighbour this round.

Robust aggregation (:mod:`.aggregators`) needs the individual neighbour messages, not
their W-weighted sum, and an attack (:mod:`.attacks`) replaces what a Byzantine node sends
on each of its out-edges. :meth:`decent8.comm.base.Communicator.exchange_messages`
returns a :class:`NeighbourMessages`: for local node a (global id ``nodes[a]``) and its
in-neighbours j sorted by id (padded to the largest in-degree m),

    received[a, s] = decode(payload_j),  src[a, s] = j,  weight[a, s] = W_{nodes[a], j}

and ``own[a]`` = decode(payload of node a), ``self_weight[a]`` = W_aa (SPEC §1: ``W[i, j]``
is what i takes from j). Padded slots have ``mask`` False, ``src`` −1 and weight 0. The
simulator and a node-block rank build the same table (:func:`neighbour_table`), so every
reduction over it sums in the same order on both.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch


@dataclass
class NeighbourMessages:
    """The messages of one round at the k local nodes (module docstring)."""

    nodes: torch.Tensor        # [k] long: global ids of the receivers
    own: torch.Tensor          # [k, d]: each receiver's own message
    received: torch.Tensor     # [k, m, d]: what arrived on each in-edge
    src: torch.Tensor          # [k, m] long: the sender of each slot (−1: padding)
    weight: torch.Tensor       # [k, m] float64: W_ij of each slot (0: padding)
    self_weight: torch.Tensor  # [k] float64: W_ii
    mask: torch.Tensor         # [k, m] bool: a real in-edge

    @property
    def degree(self) -> torch.Tensor:
        """In-degree of each receiver (self excluded), ``[k]`` long."""
        return self.mask.sum(1)

    def with_received(self, received: torch.Tensor) -> "NeighbourMessages":
        return replace(self, received=received)


@dataclass
class NeighbourTable:
    """The slot layout of one phase (module docstring) plus, for a node-block rank, the row
    of its ``[own; received]`` stack each slot reads (``row``)."""

    src: torch.Tensor
    weight: torch.Tensor
    self_weight: torch.Tensor
    mask: torch.Tensor
    row: torch.Tensor


def neighbour_table(receivers: list[int], dst: np.ndarray, src: np.ndarray, w: np.ndarray,
                    self_w: np.ndarray, row: np.ndarray | None = None,
                    device: torch.device | str = "cpu") -> NeighbourTable:
    """Slots of the in-edges ``src[e] → dst[e]`` (weights ``w[e]``, global ids) of the
    ``receivers`` (global ids, in local order), sorted by sender id; ``self_w[a]``: W_aa of
    receiver a; ``row[e]``: where edge e's message lies in the caller's stack (default: the
    sender's id, the simulator's ``[n, d]`` messages)."""
    dst, src, w = np.asarray(dst, dtype=np.int64), np.asarray(src, dtype=np.int64), np.asarray(w, dtype=np.float64)
    row = src if row is None else np.asarray(row, dtype=np.int64)
    pos = {int(g): a for a, g in enumerate(receivers)}
    keep = np.asarray([int(i) in pos for i in dst], dtype=bool) if len(dst) else np.zeros(0, dtype=bool)
    dst, src, w, row = dst[keep], src[keep], w[keep], row[keep]
    local = np.asarray([pos[int(i)] for i in dst], dtype=np.int64)
    order = np.lexsort((src, local))
    local, src, w, row = local[order], src[order], w[order], row[order]
    k = len(receivers)
    counts = np.bincount(local, minlength=k) if len(local) else np.zeros(k, dtype=np.int64)
    m = int(counts.max()) if k and len(local) else 0
    slot = np.arange(len(local)) - np.searchsorted(local, local)
    src_t = np.full((k, m), -1, dtype=np.int64)
    w_t = np.zeros((k, m), dtype=np.float64)
    row_t = np.zeros((k, m), dtype=np.int64)
    src_t[local, slot], w_t[local, slot], row_t[local, slot] = src, w, row
    t = lambda a, dt=torch.long: torch.as_tensor(a, dtype=dt, device=device)  # noqa: E731
    return NeighbourTable(t(src_t), t(w_t, torch.float64), t(np.asarray(self_w, dtype=np.float64), torch.float64),
                          t(src_t >= 0, torch.bool), t(row_t))


def gather(table: NeighbourTable, receivers: list[int], own: torch.Tensor, rows: torch.Tensor) -> NeighbourMessages:
    """The :class:`NeighbourMessages` of ``table`` read from the stack ``rows`` ``[*, d]``."""
    k, m = table.src.shape
    received = rows.index_select(0, table.row.reshape(-1)).reshape(k, m, rows.shape[-1])
    return NeighbourMessages(torch.as_tensor(receivers, dtype=torch.long, device=own.device), own, received,
                             table.src, table.weight, table.self_weight, table.mask)


__all__ = ["NeighbourMessages", "NeighbourTable", "neighbour_table", "gather"]
