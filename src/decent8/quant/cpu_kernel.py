"""Q_b's elementwise passes as one C loop on the CPU (SPEC §5), built with the system compiler.

Eagerly the quantizer makes seven to eight passes over a tensor (``x − min``, ``/ scale``,
the dither, clamp, round, ``· scale``, ``+ min``); each reads and writes the whole tensor.
Here they are one loop over ``[a, c, b]`` (``c`` ranges, one per node), per element::

    y = (x − mn) / s                                   deterministic
    y = (x − shift) / s + h · 2^-16                     stochastic (shift = mn − s · 2^-17)
    x̂ = round(clamp(y, 0, L)) · s + mn                  round half to even

in float32, each operation rounded as its eager operator rounds it (``-fno-fast-math
-ffp-contract=off``: IEEE division, no fused multiply-add — the products by 2^-16 and 2^-17
are exact, so the eager kernels' fused ones round the same; ``nearbyintf``; NaN and −0 pass
through the clamp as in ``torch.clamp``). So x̂ is the eager passes' result bit for bit, on
any vector width (``tests/quant/test_fused.py``). The step and the shift are computed per
range as the eager passes compute them: ``s = max((mx − mn)/L, 1e-8)``,
``shift = mn + s·(−2^-17)``.

The per-node range of a tensor (its min and max per node) is one C pass too
(:func:`minmax`): the same values as ``torch.amin`` / ``torch.amax`` (a NaN leaves the
range to torch); only which zero a range of zeros reports may differ, and Q_b's result
does not depend on it (``x − (±0)`` and ``q·s + (±0)`` round to the same bits).

Built and loaded by :class:`decent8.native.CLibrary` (once per user and source, cached
under ``$XDG_CACHE_HOME/decent8/kernels``, loaded only from a folder nobody else may write)
and checked against the eager rounding on a probe when loaded. Where no C compiler works,
:func:`available` is False and the eager passes run (the caller warns once).
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import torch

from ..native import CLibrary

_SOURCE = r"""
#include <math.h>
#include <stdint.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

/* torch.clamp(y, 0, L) = min(max(y, 0), L): NaN and -0 pass through unchanged */
static inline float clamp_levels(float y, float levels) {
    y = (y < 0.0f) ? 0.0f : y;
    return (levels < y) ? levels : y;
}

/* out[i, j, k] = Q(x[i, j, k]) over the range [mn[j], mx[j]]. The dither codes: h as floats
   like x, or hc as int16, either like x (node_stride 0) or one row per range (row j at
   hc + j * node_stride, element (i, k) at i * b + k); both NULL: deterministic rounding.
   h * 2^-16 and s * 2^-17 are exact, so whether the eager add with alpha fuses its multiply
   (PyTorch's vector kernels do) cannot change a bit; everything else is one IEEE operation
   each, in the eager order. The step and the shift are the quantizer's:
   s = max((mx - mn) / L, min_scale) (NaN stays NaN), shift = mn + s * (-2^-17). */
void d8_fake_quantize(const float *x, float *out, const float *h, const int16_t *hc, const float *mn,
                      const float *mx, int64_t a, int64_t c, int64_t b, int64_t node_stride, float levels,
                      float min_scale, float inv_dither, float shift_step) {
    for (int64_t i = 0; i < a; ++i) {
        for (int64_t j = 0; j < c; ++j) {
            const int64_t base = (i * c + j) * b;
            const float m = mn[j];
            float st = (mx[j] - m) / levels;
            st = (st < min_scale) ? min_scale : st;
            const float sh = m + st * shift_step;
            const float *xr = x + base;
            float *o = out + base;
            if (h) {
                const float *hr = h + base;
                for (int64_t k = 0; k < b; ++k) {
                    float y = (xr[k] - sh) / st;
                    y = y + hr[k] * inv_dither;
                    y = nearbyintf(clamp_levels(y, levels));
                    o[k] = y * st + m;
                }
            } else if (hc) {
                const int16_t *hr = node_stride ? hc + j * node_stride + i * b : hc + base;
                for (int64_t k = 0; k < b; ++k) {
                    float y = (xr[k] - sh) / st;
                    y = y + (float)hr[k] * inv_dither;
                    y = nearbyintf(clamp_levels(y, levels));
                    o[k] = y * st + m;
                }
            } else {
                for (int64_t k = 0; k < b; ++k) {
                    float y = (xr[k] - m) / st;
                    y = nearbyintf(clamp_levels(y, levels));
                    o[k] = y * st + m;
                }
            }
        }
    }
}

/* mn[j], mx[j] = the min and max of x[i, j, k] over i < a, k < b (b > 0). Returns 1, with
   nothing written, when a NaN is met (the caller then takes torch's NaN). */
int d8_minmax(const float *x, int64_t a, int64_t c, int64_t b, float *mn, float *mx) {
    for (int64_t j = 0; j < c; ++j) {
        float lo = INFINITY, hi = -INFINITY;
        int nan = 0;
        for (int64_t i = 0; i < a; ++i) {
            const float *r = x + (i * c + j) * b;
            int64_t k = 0;
#ifdef __AVX2__
            if (b >= 8) {
                __m256 vlo = _mm256_set1_ps(INFINITY), vhi = _mm256_set1_ps(-INFINITY), vnan = _mm256_setzero_ps();
                for (; k + 8 <= b; k += 8) {
                    const __m256 v = _mm256_loadu_ps(r + k);
                    vlo = _mm256_min_ps(vlo, v);
                    vhi = _mm256_max_ps(vhi, v);
                    vnan = _mm256_or_ps(vnan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
                }
                float l[8], h[8];
                _mm256_storeu_ps(l, vlo);
                _mm256_storeu_ps(h, vhi);
                nan |= _mm256_movemask_ps(vnan);
                for (int t = 0; t < 8; ++t) {
                    lo = (l[t] < lo) ? l[t] : lo;
                    hi = (h[t] > hi) ? h[t] : hi;
                }
            }
#endif
            for (; k < b; ++k) {
                const float v = r[k];
                nan |= (v != v);
                lo = (v < lo) ? v : lo;
                hi = (v > hi) ? v : hi;
            }
        }
        if (nan) return 1;
        mn[j] = lo;
        mx[j] = hi;
    }
    return 0;
}
"""

def _self_test(so: ctypes.CDLL) -> None:
    """The loop must round as the eager operators do (a compiler that defaults to fast
    floating-point math would not): both roundings of a probe, compared bit for bit."""
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(61, generator=g) * 3, torch.tensor([-0.0, 1e30, -1e30])]).view(1, 1, 64)
    mn, mx = torch.tensor([-2.0]), torch.tensor([2.5])
    codes = torch.randint(-(1 << 15), 1 << 15, (64,), generator=g, dtype=torch.int16)
    scale = torch.sub(mx, mn).div_(255.0).clamp_min_(1e-8)
    for stochastic in (False, True):
        out = torch.empty_like(x)
        so.d8_fake_quantize(x.data_ptr(), out.data_ptr(), None, codes.data_ptr() if stochastic else None,
                            mn.data_ptr(), mx.data_ptr(), 1, 1, 64, 0, 255.0, 1e-8, 1.0 / 65536, -0.5 / 65536)
        if stochastic:
            y = torch.sub(x, torch.add(mn, scale, alpha=-0.5 / 65536)).div_(scale)
            y.add_(codes.view(1, 1, 64).float(), alpha=1.0 / 65536)
        else:
            y = torch.sub(x, mn).div_(scale)
        want = y.clamp_(0, 255).round_().mul_(scale).add_(mn)
        if not torch.equal(out.view(torch.int32), want.view(torch.int32)):
            raise OSError("the compiled loop does not round as PyTorch does (fast floating-point math?)")
    x2 = x.view(2, 4, 8)
    mn2, mx2 = torch.empty(4), torch.empty(4)
    if so.d8_minmax(x2.data_ptr(), 2, 4, 8, mn2.data_ptr(), mx2.data_ptr()) != 0 or not (
            torch.equal(mn2, x2.amin(dim=(0, 2))) and torch.equal(mx2, x2.amax(dim=(0, 2)))):
        raise OSError("the compiled range does not find the minimum and maximum")


LIBRARY = CLibrary("fake_quantize", _SOURCE,
                   {"d8_fake_quantize": (None, [ctypes.c_void_p] * 6 + [ctypes.c_int64] * 4 + [ctypes.c_float] * 4),
                    "d8_minmax": (ctypes.c_int, [ctypes.c_void_p] + [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 2)},
                   _self_test)


def available() -> bool:
    """Whether the C loop can run here (built and loaded on the first call)."""
    return LIBRARY.available()


def why_unavailable() -> str:
    """The reason :func:`available` is False ("" when it is True or not yet asked)."""
    return LIBRARY.why_unavailable()


def library_path() -> Path:
    """Where this process looks for the cached library (``$XDG_CACHE_HOME/decent8/kernels``)."""
    return LIBRARY.library_path()


def fake_quantize(x3: torch.Tensor, mn: torch.Tensor, mx: torch.Tensor, h3: torch.Tensor | None, levels: float,
                  min_scale: float, dither_levels: float, codes: torch.Tensor | None = None,
                  code_rows: bool = False) -> torch.Tensor:
    """Q_b of ``x3`` (contiguous float32 ``[a, c, b]`` on the CPU) over the ``c`` ranges
    ``[mn, mx]`` (float32, ``c`` values each): a new tensor like ``x3``. The dither: ``h3``
    (float32 codes like ``x3``), or ``codes`` (int16: ``a·c·b`` values in ``x3``'s order, or
    with ``code_rows`` ``[c, a·b]``, one row per range, rows strided, each contiguous);
    neither: deterministic rounding. Requires :func:`available`."""
    a, c, b = x3.shape
    out = torch.empty_like(x3)
    mn, mx = mn.contiguous(), mx.contiguous()
    h3 = h3.contiguous() if h3 is not None else None
    node_stride = 0
    if codes is not None:
        if code_rows and c > 1:
            if codes.shape != (c, a * b) or codes.stride(1) != 1:
                raise ValueError(f"dither rows of shape {tuple(codes.shape)} for {c} ranges of {a * b} values")
            node_stride = codes.stride(0)
        else:
            codes = codes.contiguous()
            if codes.numel() != x3.numel():
                raise ValueError(f"{codes.numel()} dither codes for {x3.numel()} values")
    LIBRARY.lib.d8_fake_quantize(x3.data_ptr(), out.data_ptr(), h3.data_ptr() if h3 is not None else None,
                                 codes.data_ptr() if codes is not None else None, mn.data_ptr(), mx.data_ptr(),
                                 a, c, b, node_stride, levels, min_scale, 1.0 / dither_levels, -0.5 / dither_levels)
    return out


def minmax(x3: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The min and max of each ``x3[:, j, :]`` (contiguous float32 ``[a, c, b]``, b > 0) in
    one pass, float32 ``[c]`` each; None when ``x3`` holds a NaN (torch's range then gives
    the NaN). Which zero a range of zeros reports (+0 or −0) may differ from ``torch.amin``'s;
    Q_b's values do not depend on it. Requires :func:`available`."""
    a, c, b = x3.shape
    mn, mx = torch.empty(c), torch.empty(c)
    if LIBRARY.lib.d8_minmax(x3.data_ptr(), a, c, b, mn.data_ptr(), mx.data_ptr()):
        return None
    return mn, mx


__all__ = ["LIBRARY", "available", "why_unavailable", "library_path", "fake_quantize", "minmax"]
