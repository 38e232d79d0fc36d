"""EF-signSGD (Karimireddy et al. 2019) on a ring with per-hop re-compression (docs/algorithms.md §10 baselines).

Per worker, with error e (starts at 0) and u = lr·d::

    p = u + e;   Δ = scale·sign(p);   e ← p − Δ

with one scale ‖p_chunk‖₁ / len per ring chunk (the chunks of the first all-reduce
level; padding excluded) instead of one per vector — the ring moves chunks, each
message carries its own fp32 scale. The Δ's are then summed over the ring by
decompress-add-recompress at every hop (the cascading case): a message is the packed
sign bits of a chunk plus its scale; the worker at each hop decodes it, adds its own
Δ chunk and re-compresses (scale = mean |sum| over the chunk's real elements). The
all-gather forwards the final messages unchanged; applied update = decoded sum / M.
The re-compression errors of the hops are not fed back (only the local error is).

Traffic: 1 bit per element plus 4 bytes per message per hop.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..collectives.ring import Message
from ..compression.sign import pack_bits, unpack_bits
from ..state_spec import F32, StateSpec
from .allreduce import AllReduceAlgorithm
from ..registry import algorithms
from .info import ALLREDUCE, replace


class ScaledSignCodec:
    """Messages (packed sign bits, fp32 scale) of float chunks; padding (positions ≥ d
    of the flat vector) is left out of every scale."""

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def compress(self, vals: torch.Tensor, offset: torch.Tensor) -> Message:
        c = vals.shape[1]
        valid = (torch.arange(c, device=vals.device) + offset.unsqueeze(1)) < self.dim
        scale = (vals.abs() * valid).sum(1, keepdim=True) / valid.sum(1, keepdim=True).clamp_min(1)
        return pack_bits(vals > 0), scale.to(torch.float32)

    @staticmethod
    def decode(bits: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """``[..., c/8]`` bytes and ``[..., 1]`` scales → ``[..., c]`` values."""
        return unpack_bits(bits, bits.shape[-1] * 8).to(torch.float32).mul_(2).sub_(1).mul_(scale)

    def start(self, own: torch.Tensor, offset: torch.Tensor) -> Message:
        return self.compress(own, offset)

    def merge(self, msg: Message, own: torch.Tensor, offset: torch.Tensor, n_in: int, n_own: int) -> Message:
        return self.compress(self.decode(*msg) + own, offset)

    def lift(self, msg: Message, offset: torch.Tensor) -> torch.Tensor:
        return self.decode(*msg)


@algorithms.register("ef_signsgd", order=15, info=replace(ALLREDUCE, wire_format="scaled-sign", state_buffers=1))
class EFSignSGD(AllReduceAlgorithm):
    name = "ef_signsgd"
    #: e; one step holds lr·d, the padded u + e, |u + e|, the scaled signs and the decoded sum
    state = StateSpec({"e": F32}, step=20)

    def init_state(self, x: torch.Tensor) -> None:
        super().init_state(x)
        self.e = torch.zeros_like(x)
        self.codec = ScaledSignCodec(self.dim)

    def buffers(self) -> dict[str, torch.Tensor]:
        return {"error": self.e}

    def aggregate(self, update: torch.Tensor, step: int, lr: float) -> torch.Tensor:
        k, d = update.shape
        L = self.allreduce.padded(d, bits=True)
        m1 = self.allreduce.levels[0]
        p = F.pad(update + self.e, (0, L - d))
        chunks = p.reshape(k, m1, L // m1)
        valid = (torch.arange(L, device=p.device) < d).reshape(1, m1, L // m1)
        scale = (chunks.abs() * valid).sum(2, keepdim=True) / valid.sum(2, keepdim=True).clamp_min(1)
        delta = torch.where(chunks > 0, scale, -scale).mul_(valid).reshape(k, L)
        torch.sub(p[:, :d], delta[:, :d], out=self.e)
        bits, scales = self.allreduce.run(delta, self.codec)
        total = self.codec.decode(bits, scales).reshape(k, L)[:, :d]
        return total.div_(self.allreduce.size)

    def message_bytes(self, compressor=None) -> float:
        return self.allreduce.bytes_per_worker(self.allreduce.padded(self.dim, bits=True), 1.0 / 8, 4)
