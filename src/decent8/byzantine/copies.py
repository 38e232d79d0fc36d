"""Choco-SGD's public copies with Byzantine senders and a robust rule (docs/algorithms.md §14).

In Choco-SGD (SPEC §3) node j sends q_j = C(x½_j − x̂_j), and each receiver i rebuilds j's
public copy x̂_j ← x̂_j + q_j. Plain Choco keeps only the sum Σ_j W_ij x̂_j; a robust rule
needs each copy, so node i keeps one per in-edge, c_ij (``[k, m, d]``, the slots of
:class:`~.messages.NeighbourMessages`), and mixes them in place of the sum:

    c_ij ← c_ij + q_{j→i}
    x_i ← x½_i + γ (AGG(x̂_i; {c_ij : j ∈ N_i}) − x̂_i)

AGG is the run's rule (:mod:`.aggregators`) with x̂_i as the node's own message. With the
``mean`` rule, AGG − x̂_i = Σ_j W_ij c_ij − x̂_i, and c_ij = x̂_j for an honest j: Choco's
update, x½_i + γ (s_i − x̂_i). This is ClippedGossip's clipping of the neighbours' models
around the node's own (He, Karimireddy & Jaggi 2022) applied to the models Choco-SGD's
receivers hold, its public copies.

A Byzantine j chooses the copy it wants i to hold, v_{j→i}: the attack of :mod:`.attacks`
with the copies as messages (own = x̂_i, received = c_ij + q_j: an omniscient attack sees
the honest copies of this round). It can only send a message of the run's format and
size, so it sends the compressed difference

    q_{j→i} = C(v_{j→i} − c_ij)        and the receiver's copy becomes c_ij + q_{j→i}

— with lossless compression exactly v_{j→i}; with a compressor the copy moves toward
v_{j→i} as an honest copy moves toward x½_j. A stochastic compressor draws each Byzantine
message from a generator keyed by (seed, round, j, i), the same on every backend. Bytes do
not change: every edge carries one message of the run's size.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from ..compression.base import Compressor
from ..seeding import derive_seed
from .messages import NeighbourMessages
from .setup import RobustGossip


class PublicCopies:
    """The per-edge public copies of one block of receivers and their robust mixing
    (module docstring)."""

    def __init__(self, robust: RobustGossip, compressor: Compressor, seed: int) -> None:
        self.robust = robust
        self.compressor = compressor
        self.seed = int(seed)
        #: c_ij per slot ``[k, m, d]`` float32 (None until the first round fixes m)
        self.copies: torch.Tensor | None = None

    def reset(self) -> None:
        self.copies = None

    def _byzantine_messages(self, wanted: torch.Tensor, msgs: NeighbourMessages, slots: torch.Tensor,
                            step: int) -> torch.Tensor:
        """``[r, d]``: decode(C(v − c)) for the r Byzantine slots (row-major slot order)."""
        rows = wanted[slots] - self.copies[slots]
        gens = None
        if self.compressor.stochastic:
            a_idx, s_idx = torch.nonzero(slots, as_tuple=True)
            gens = [torch.Generator(device=rows.device).manual_seed(
                        derive_seed(self.seed, "byzantine.choco", step, int(msgs.src[a, s]), int(msgs.nodes[a])))
                    for a, s in zip(a_idx.tolist(), s_idx.tolist())]
        return self.compressor.decode(self.compressor.encode(rows, gens)).to(rows.dtype)

    def mix(self, own_hat: torch.Tensor, msgs: NeighbourMessages, step: int) -> torch.Tensor:
        """``[k, d]``: AGG(x̂_i; {c_ij}) after this round's messages ``msgs`` (``received``:
        the honest q_j per slot; ``own_hat``: x̂_i after its own update)."""
        if self.copies is None:
            self.copies = torch.zeros_like(msgs.received)
        honest = self.copies + msgs.received
        slots = self.robust.byzantine_slots(msgs)
        if self.robust.byzantine and bool(slots.any()):
            view = replace(msgs, own=own_hat, received=honest)
            wanted = self.robust.attack.craft(view, slots, step)
            honest[slots] = self.copies[slots] + self._byzantine_messages(wanted, msgs, slots, step)
        self.copies = honest
        return self.robust.aggregator.aggregate(replace(msgs, own=own_hat, received=honest))


__all__ = ["PublicCopies"]
