"""8-bit quantization of the message (SPEC §4): per-tensor scale and zero point.

Every slot (parameter tensor) of every node's message is mapped asymmetrically onto
the 256 levels of a ``uint8`` over its own ``[min, max]`` range::

    scale = max((max - min) / 255, 1e-8)      zero = min
    q     = round((v - zero) / scale)         v̂ = q · scale + zero

so ``|v − v̂| ≤ scale / 2`` (deterministic rounding). A constant slot gets
``scale = 1e-8`` and decodes exactly to its value. With ``stochastic=True`` a
U(−½, ½) dither from the node's generator is added before rounding (unbiased
stochastic rounding, error ≤ scale).

Payload per node: ``values`` uint8 [d], ``scale`` float32 [L], ``zero`` float32 [L]
→ ``d + 8·L`` bytes.
"""
from __future__ import annotations

from typing import Sequence

import torch

from ..errors import ConfigError
from ..layout import ParamLayout
from ..state_spec import StateSpec
from .base import Compressor, TensorSpec, per_node_uniform, require_generators
from .payload import Payload
from ..registry import compressors

#: Smallest scale, so a constant tensor does not divide by zero.
MIN_SCALE = 1e-8
_LEVELS = 255  # 2**8 - 1


def uint8_scale(mn: torch.Tensor, mx: torch.Tensor) -> torch.Tensor:
    """Per-slot step ``max((max − min)/255, 1e-8)``."""
    return ((mx - mn) / _LEVELS).clamp_min(MIN_SCALE)


def uint8_quantize(
    v: torch.Tensor,
    seg: torch.Tensor,
    zero: torch.Tensor,
    scale: torch.Tensor,
    noise: torch.Tensor | None = None,
) -> torch.Tensor:
    """Quantize ``v [k, n]`` to uint8; ``seg [n]`` gives each column's slot, whose
    ``zero``/``scale`` are columns of ``[k, L]`` tensors. ``noise`` (U(−½, ½)) dithers."""
    y = (v - zero[:, seg]) / scale[:, seg]
    if noise is not None:
        y = y + noise
    return y.round_().clamp_(0, _LEVELS).to(torch.uint8)


def uint8_dequantize(q: torch.Tensor, seg: torch.Tensor, zero: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`uint8_quantize`: float32 ``q · scale + zero``."""
    return torch.addcmul(zero[:, seg].float(), q.float(), scale[:, seg].float())


@compressors.register("quantize", aliases=("int8",), order=4)
class QuantizeCompressor(Compressor):
    #: one encode + decode: per-entry codes and the float32 reconstruction
    state = StateSpec(step=8)
    """Per-slot asymmetric 8-bit quantization of the whole message.

    Vectorised over nodes and slots (``scatter_reduce`` amin/amax over segment ids);
    only stochastic rounding loops over the local nodes, to draw their dither.
    """

    name = "quantize"

    @classmethod
    def suggest_gamma(cls, scale: float, ratio: float) -> float | None:
        """δ = 1 (exact) up to the 8-bit rounding, 1 − δ ≤ 1/255² per entry: γ = 1."""
        return 1.0

    def __init__(self, layout: ParamLayout, bits: int = 8, stochastic: bool = False) -> None:
        super().__init__(layout)
        if isinstance(bits, bool) or bits != 8:
            raise ConfigError("compression.bits", f"only 8-bit quantization is supported, got {bits!r}")
        self.bits = 8
        self.stochastic = bool(stochastic)

    def spec(self) -> dict[str, TensorSpec]:
        L = len(self.layout)
        return {
            "values": ((self.layout.dim,), torch.uint8),
            "scale": ((L,), torch.float32),
            "zero": ((L,), torch.float32),
        }

    def encode(self, x: torch.Tensor, generators: Sequence[torch.Generator] | None = None) -> Payload:
        self._check_input(x)
        k, d = x.shape
        dev = x.device
        L = len(self.layout)
        noise = None
        if self.stochastic:
            require_generators(self.name, generators, k)
            noise = per_node_uniform(generators, d, dev).sub_(0.5)
        xf = x.to(torch.float32)
        seg = self._segment_ids(dev)
        idx = seg.expand(k, d)
        # Slots with no elements keep 0 (include_self=False leaves them untouched).
        mn = torch.zeros(k, L, dtype=torch.float32, device=dev).scatter_reduce_(1, idx, xf, "amin", include_self=False)
        mx = torch.zeros(k, L, dtype=torch.float32, device=dev).scatter_reduce_(1, idx, xf, "amax", include_self=False)
        scale = uint8_scale(mn, mx)
        q = uint8_quantize(xf, seg, mn, scale, noise)
        return Payload({"values": q, "scale": scale, "zero": mn})

    def decode(self, payload: Payload) -> torch.Tensor:
        t = payload.tensors
        seg = self._segment_ids(t["values"].device)
        return uint8_dequantize(t["values"], seg, t["zero"], t["scale"])

    def __repr__(self) -> str:
        return f"QuantizeCompressor(bits=8, stochastic={self.stochastic}, d={self.layout.dim})"
