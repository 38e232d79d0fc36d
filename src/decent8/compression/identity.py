"""No compression: the dense fp32 message (SPEC §4 baseline)."""
from __future__ import annotations

from typing import Sequence

import torch

from .base import Compressor, TensorSpec
from .payload import Payload
from ..registry import compressors


@compressors.register("identity", aliases=("none",), order=0)
class IdentityCompressor(Compressor):
    """Sends the message as it is: payload ``{"values": float32 [d]}``, ``4·d`` bytes."""

    name = "identity"
    lossless = True

    @classmethod
    def suggest_gamma(cls, scale: float, ratio: float) -> float | None:
        """δ = 1 (exact): γ = 1."""
        return 1.0

    def encode(self, x: torch.Tensor, generators: Sequence[torch.Generator] | None = None) -> Payload:
        self._check_input(x)
        # No copy (the hot path of D-PSGD): the payload may alias x; communicators
        # consume a payload within the exchange call, before the algorithm changes x.
        return Payload({"values": x.to(torch.float32)})

    def decode(self, payload: Payload) -> torch.Tensor:
        return payload.tensors["values"].to(torch.float32)

    def spec(self) -> dict[str, TensorSpec]:
        return {"values": ((self.layout.dim,), torch.float32)}

    @property
    def is_identity(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"IdentityCompressor(d={self.layout.dim})"
