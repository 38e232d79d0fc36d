"""Payloads: what actually goes on the wire (SPEC §4, docs/architecture.md "Payloads").

A payload is a fixed set of named tensors with declared dtypes and a leading node
axis ``[k, ...]``. Nothing but these tensors is ever sent: the receiver knows the
shapes from the compressor's :meth:`~decent8.compression.base.Compressor.spec`.
The byte count of a message is the size of these tensors for one node.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Payload:
    """Named tensors, each with a leading node axis of the same length k."""

    tensors: dict[str, torch.Tensor]

    def __post_init__(self) -> None:
        ks = {t.shape[0] for t in self.tensors.values()}
        if len(ks) > 1:
            raise ValueError(f"payload tensors disagree on the node axis: {sorted(ks)}")

    @property
    def num_nodes(self) -> int:
        return next(iter(self.tensors.values())).shape[0]

    def nbytes_per_node(self) -> int:
        """Bytes one node puts on the wire for one message (all tensors, its row only)."""
        return sum(t[0].numel() * t.element_size() for t in self.tensors.values())

    def names(self) -> list[str]:
        """Wire order of the tensors (sorted names, so sender and receiver agree)."""
        return sorted(self.tensors)

    def rows(self, index: torch.Tensor | slice | int) -> "Payload":
        """The payload of a subset of nodes (keeps the node axis)."""
        if isinstance(index, int):
            index = slice(index, index + 1)
        return Payload({k: v[index] for k, v in self.tensors.items()})

    @staticmethod
    def stack(payloads: list["Payload"]) -> "Payload":
        """Concatenate payloads along the node axis (e.g. messages from several peers)."""
        names = payloads[0].tensors.keys()
        return Payload({n: torch.cat([p.tensors[n] for p in payloads], dim=0) for n in names})

    def to(self, device: torch.device | str) -> "Payload":
        return Payload({k: v.to(device) for k, v in self.tensors.items()})
