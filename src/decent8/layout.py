"""Flat parameter layout: where each parameter tensor lives in the flat [k, d] buffer.

All nodes' parameters are stored as one flat buffer of shape ``[k, d]`` (k nodes in
this process, d parameters per model). A :class:`ParamLayout` records, for each named
parameter tensor, its offset and shape, so compressors can work layer-wise (SPEC §4)
and models can turn a flat row back into named tensors.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch
from .errors import ConfigError


@dataclass(frozen=True)
class ParamSlot:
    name: str
    offset: int
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def end(self) -> int:
        return self.offset + self.numel


class ParamLayout:
    """Ordered list of parameter slots covering ``[0, d)`` without gaps."""

    def __init__(self, named_shapes: Iterable[tuple[str, tuple[int, ...]]]) -> None:
        slots: list[ParamSlot] = []
        offset = 0
        for name, shape in named_shapes:
            slot = ParamSlot(name, offset, tuple(int(s) for s in shape))
            slots.append(slot)
            offset = slot.end
        if not slots:
            raise ValueError("a parameter layout needs at least one tensor")
        self.slots: tuple[ParamSlot, ...] = tuple(slots)
        self.dim: int = offset

    @classmethod
    def from_module(cls, module: torch.nn.Module) -> "ParamLayout":
        """The layout of ``module``'s parameters; a lazy one (``nn.LazyLinear`` before its
        first call) has no shape yet, so the flat buffer cannot be sized: one line."""
        from torch.nn.parameter import is_lazy

        lazy = [name for name, p in module.named_parameters() if is_lazy(p)]
        if lazy:
            raise ConfigError("model", f"the model has lazy parameters without a shape yet ({', '.join(lazy[:3])}; "
                                       f"e.g. nn.LazyLinear): give their sizes (nn.Linear(in_features, out)) or call "
                                       f"the model once on a sample batch in the factory")
        return cls((name, tuple(p.shape)) for name, p in module.named_parameters())

    @classmethod
    def single(cls, d: int) -> "ParamLayout":
        """A layout with one flat tensor of d elements (handy for tests and gossip-only use)."""
        return cls([("x", (d,))])

    def __len__(self) -> int:
        return len(self.slots)

    def __iter__(self):
        return iter(self.slots)

    @property
    def numels(self) -> list[int]:
        return [s.numel for s in self.slots]

    @property
    def offsets(self) -> list[int]:
        return [s.offset for s in self.slots]

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views of ``flat[..., d]`` as named tensors of shape ``[..., *slot.shape]``."""
        lead = flat.shape[:-1]
        return {s.name: flat[..., s.offset : s.end].view(*lead, *s.shape) for s in self.slots}

    def segment_ids(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """``[d]`` int64 tensor: the index of the slot each coordinate belongs to."""
        return torch.repeat_interleave(
            torch.arange(len(self.slots), device=device),
            torch.tensor(self.numels, device=device),
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ParamLayout) and self.slots == other.slots

    def __repr__(self) -> str:
        return f"ParamLayout({len(self.slots)} tensors, d={self.dim})"
