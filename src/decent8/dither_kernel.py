"""The node streams' dither codes as one C loop on the CPU: the same codes, bit for bit.

A dither draw (SPEC §5, stochastic rounding; :mod:`decent8.streams`) gives node j the
int16 codes of ``⌈n/4⌉`` 64-bit words drawn from a CPU ``torch.Generator`` seeded with
``seed_j``: ``words.random_(-2**63, None, generator=g)``, viewed as int16. PyTorch's CPU
generator is MT19937 (Matsumoto & Nishimura 1998) initialised from the seed's low 32 bits;
each word is two consecutive outputs, the first as its high half. This loop runs that
generator itself — the same initialisation, twist and tempering, the words' halves written
low half first as the int16 view reads them — for all of a draw's nodes in one call,
instead of one seeding and one ``random_`` per node (about 5× faster for large draws;
seeding and the per-node call overhead dominate small ones).

A change of PyTorch's CPU generator would change the codes: the probe run when the library
is loaded compares them with ``torch.Generator`` for several seeds and lengths, and a
library that disagrees is not used (the per-node ``random_`` calls run, the same codes).
Built and cached by :class:`decent8.native.CLibrary`.
"""
from __future__ import annotations

import ctypes

import torch

from .native import CLibrary, warn_unavailable

_SOURCE = r"""
#include <stdint.h>
#include <string.h>

#define MT_N 624
#define MT_M 397

static inline uint32_t twist_word(uint32_t a, uint32_t b, uint32_t m) {
    const uint32_t y = (a & 0x80000000u) | (b & 0x7fffffffu);
    return m ^ (y >> 1) ^ ((0u - (y & 1u)) & 0x9908b0dfu);
}

static void twist(uint32_t *s) {
    for (int i = 0; i < MT_N - MT_M; ++i) s[i] = twist_word(s[i], s[i + 1], s[i + MT_M]);
    for (int i = MT_N - MT_M; i < MT_N - 1; ++i) s[i] = twist_word(s[i], s[i + 1], s[i + MT_M - MT_N]);
    s[MT_N - 1] = twist_word(s[MT_N - 1], s[0], s[MT_M - 1]);
}

static inline uint32_t temper(uint32_t y) {
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= (y >> 18);
    return y;
}

/* Row j (at out + j * row_stride, n int16 codes): the first n int16 of the words an MT19937
   seeded with the low 32 bits of seeds[j] gives, word w = (output 2w << 32) | output 2w + 1,
   stored little-endian (its low half, output 2w + 1, first). */
void d8_dither_rows(const uint64_t *seeds, int64_t c, int64_t n, int16_t *out, int64_t row_stride) {
    uint32_t s[MT_N], buf[MT_N];
    const int64_t words = (n + 3) / 4, bytes = 2 * n;
    for (int64_t j = 0; j < c; ++j) {
        s[0] = (uint32_t)(seeds[j] & 0xffffffffu);
        for (int i = 1; i < MT_N; ++i) s[i] = 1812433253u * (s[i - 1] ^ (s[i - 1] >> 30)) + (uint32_t)i;
        unsigned char *o = (unsigned char *)(out + j * row_stride);
        for (int64_t w = 0; w < words;) {
            twist(s);
            for (int i = 0; i < MT_N; ++i) buf[i] = temper(s[i]);
            const int64_t take = (words - w < MT_N / 2) ? words - w : MT_N / 2;
            for (int64_t i = 0; i < take; ++i) {
                const uint32_t pair[2] = {buf[2 * i + 1], buf[2 * i]};
                const int64_t at = 8 * (w + i);
                memcpy(o + at, pair, (size_t)(bytes - at < 8 ? bytes - at : 8));
            }
            w += take;
        }
    }
}
"""


def torch_rows(seeds: list[int], n: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The codes as PyTorch draws them, a seeding and a ``random_`` per row: what runs where the
    loop does not (another device, no library), and the reference its probe compares with."""
    words = torch.empty(len(seeds), (n + 3) // 4, dtype=torch.int64, device=device)
    g = torch.Generator(device=device)
    for j, seed in enumerate(seeds):
        g.manual_seed(seed)
        words[j].random_(-(1 << 63), None, generator=g)
    return words.view(torch.int16)[:, :n]


def _call(so: ctypes.CDLL, seeds: list[int], n: int) -> torch.Tensor:
    words = torch.empty(len(seeds), (n + 3) // 4, dtype=torch.int64)
    codes = words.view(torch.int16)
    keys = torch.tensor(seeds, dtype=torch.int64)
    so.d8_dither_rows(keys.data_ptr(), len(seeds), n, codes.data_ptr(), codes.stride(0))
    return codes[:, :n]


def _probe(so: ctypes.CDLL) -> None:
    """The loop must give ``torch.Generator``'s codes: seeds below and above 2^32, lengths
    that end inside a word and that cross the generator's 624-output blocks."""
    seeds = [0, 1, 5489, (1 << 32) + 7, (1 << 63) - 25]
    for n in (1, 6, 1249, 2501):
        if not torch.equal(_call(so, seeds, n), torch_rows(seeds, n)):
            raise OSError("the compiled dither does not draw what torch.Generator draws")


LIBRARY = CLibrary("dither_rows", _SOURCE,
                   {"d8_dither_rows": (None, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                                              ctypes.c_int64])},
                   _probe)


def dither_rows(seeds: list[int], n: int, device: torch.device) -> torch.Tensor | None:
    """int16 ``[c, n]`` (a view of ``[c, ⌈n/4⌉]`` int64 words): row j the codes of the CPU
    generator seeded with ``seeds[j]``; None where the loop cannot run (not the CPU, no
    library: the caller draws with ``torch.Generator``, the same codes)."""
    if device.type != "cpu":
        return None
    if not LIBRARY.available():
        warn_unavailable(LIBRARY.why_unavailable(), "dither draws",
                         "drawing with torch.Generator (the same codes, slower)")
        return None
    return _call(LIBRARY.lib, seeds, n)


__all__ = ["LIBRARY", "dither_rows", "torch_rows"]
