"""A real 8-bit matrix multiply (``torch._int_mm``) for the fake-quantized layers' forward.

The fake-quantized path computes ``x̂·ŵᵀ`` in float32 on dequantized 8-bit values. The
same product can run on int8 codes with an int32 accumulator: with the asymmetric
codes shifted to int8, ``x̂ = s_x·q_x + z_x`` and ``ŵ = s_w·q_w + z_w``
(``q ∈ [−128, 127]``, ``z = min + 128·s``)::

    x̂·ŵᵀ = s_x s_w (q_x q_wᵀ) + s_x z_w (q_x 1) + z_x s_w (1 q_wᵀ) + I z_x z_w

``q_x q_wᵀ`` is one ``torch._int_mm`` (int8 × int8 → int32), the row sums are int32 and
the rest is a rank-1 correction — exact in the integers, so the result equals the
fake-quantized product up to float32 rounding. Used by ``benchmarks/int8_matmul.py``
to measure it against the fake-quantized path; the training layers keep the
fake-quantized forward (simple autograd, any device).

On a CPU without VNNI instructions oneDNN's int8 GEMM (behind ``torch._int_mm``) sums
pairs of u8·s8 products in int16 and saturates: with ``DNNL_MAX_CPU_ISA=AVX2`` random
full-range codes 40×24 @ 24×16 come back off by up to 20,928 on products of at most
88,869. :func:`int_mm_is_exact` checks this once per process and device, and where the
integer product is not exact :func:`int8_linear` multiplies the codes in float32 in
blocks of ``EXACT_BLOCK`` inner terms (each block's sum stays below 2^24, so exact), then
adds the blocks in int32 — the same integers, slower.
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from .quantizer import MIN_SCALE


def int8_codes(x: torch.Tensor, mn: torch.Tensor | float, mx: torch.Tensor | float,
               stochastic: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Signed 8-bit codes of Q_8(x) over ``[mn, mx]`` (per tensor): ``(q int8, scale, zero)``
    with ``Q_8(x) = scale·q + zero``."""
    mn = torch.as_tensor(mn, dtype=x.dtype, device=x.device)
    mx = torch.as_tensor(mx, dtype=x.dtype, device=x.device)
    scale = ((mx - mn) / 255).clamp_min(MIN_SCALE)
    y = (x - mn) / scale
    if stochastic:
        y.add_(torch.rand_like(y)).sub_(0.5)
    q = y.clamp_(0, 255).round_().sub_(128).to(torch.int8)
    return q, scale, mn + 128 * scale


def _pad8(t: torch.Tensor, dim: int) -> torch.Tensor:
    r = (-t.shape[dim]) % 8
    if r == 0:
        return t
    pad = [0, 0] * (t.dim() - 1 - dim) + [0, r]
    return F.pad(t, pad)


#: Inner terms per float32 block of the exact fallback: 1024 · 128 · 128 = 2^24.
EXACT_BLOCK = 1024


def _int_mm(qx: torch.Tensor, qw: torch.Tensor) -> torch.Tensor:
    """``qx[N, I] · qw[O, I]ᵀ`` by ``torch._int_mm`` (padded to its shape rules), int32 ``[N, O]``."""
    n = qx.shape[0]
    a = _pad8(qx, 1)
    b = _pad8(_pad8(qw, 1), 0)
    if n <= 16:  # _int_mm wants more than 16 rows
        a = F.pad(a, (0, 0, 0, 17 - n))
    return torch._int_mm(a.contiguous(), b.t().contiguous())[:n, : qw.shape[0]]


def _blocked_float_mm(qx: torch.Tensor, qw: torch.Tensor) -> torch.Tensor:
    """The same int32 product from float32 matmuls of ≤ EXACT_BLOCK inner terms (each exact)."""
    acc = torch.zeros(qx.shape[0], qw.shape[0], dtype=torch.int32, device=qx.device)
    for k in range(0, qx.shape[1], EXACT_BLOCK):
        acc += (qx[:, k:k + EXACT_BLOCK].float() @ qw[:, k:k + EXACT_BLOCK].float().t()).to(torch.int32)
    return acc


@functools.lru_cache(maxsize=None)
def int_mm_is_exact(device: str = "cpu") -> bool:
    """Whether ``torch._int_mm`` on ``device`` returns the exact int32 product (False where
    the int8 GEMM saturates, e.g. oneDNN without VNNI): one full-range probe, cached."""
    g = torch.Generator().manual_seed(0)
    qx = torch.randint(-128, 128, (32, 64), generator=g, dtype=torch.int8)
    qw = torch.randint(-128, 128, (16, 64), generator=g, dtype=torch.int8)
    qx[0], qw[0], qw[1] = 127, 127, -128  # the largest pair sums (±2·255·127 once shifted to u8)
    exact = qx.long() @ qw.long().t()
    return bool(torch.equal(_int_mm(qx.to(device), qw.to(device)).long().cpu(), exact))


def int8_linear(qx: torch.Tensor, sx: torch.Tensor, zx: torch.Tensor,
                qw: torch.Tensor, sw: torch.Tensor, zw: torch.Tensor) -> torch.Tensor:
    """``x̂·ŵᵀ`` (float32 ``[N, O]``) from int8 codes ``qx[N, I]``, ``qw[O, I]`` via ``torch._int_mm``
    (the exact blocked float32 product where that is not exact, :func:`int_mm_is_exact`)."""
    i = qx.shape[1]
    acc = _int_mm(qx, qw) if int_mm_is_exact(str(qx.device)) else _blocked_float_mm(qx, qw)
    rx = qx.sum(1, dtype=torch.int32).unsqueeze(1)
    rw = qw.sum(1, dtype=torch.int32).unsqueeze(0)
    out = acc.to(torch.float32).mul_(sx * sw)
    out.add_(rx.to(torch.float32) * (sx * zw)).add_(rw.to(torch.float32) * (zx * sw)).add_(i * zx * zw)
    return out


__all__ = ["EXACT_BLOCK", "int8_codes", "int8_linear", "int_mm_is_exact"]
