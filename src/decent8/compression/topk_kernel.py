"""Top-k by magnitude as one C loop per row (SPEC §4: layer-wise top-k), exact, on the CPU.

For a row ``x[0..n)`` and a count ``c`` the kept set is the ``c`` entries of largest ``|x|``.
The magnitude's order is the order of the float's bits with the sign cleared
(``key = bits(x) & 0x7fffffff``, an unsigned integer; NaN above +inf, as ``torch.topk``
ranks it), so the selection works on integers:

1. a threshold ``t`` from a sample (every 16th entry): the sample's ``⌈2c/16⌉ + 4``-th
   largest key, so about 2c entries have ``key ≥ t``;
2. one pass collects the entries with ``key ≥ t`` (positions ascending; with AVX2 eight
   keys a comparison, only the hits written); if fewer than ``c`` did, ``t = 0`` and the
   whole row is the candidate set;
3. the ``c``-th largest candidate key ``T`` (a selection, linear on average); since at
   least ``c`` entries have ``key ≥ t``, every entry of the row with ``key ≥ T`` is a
   candidate;
4. if exactly ``c`` candidates have ``key ≥ T`` they are the unique answer, written in
   ascending position; otherwise the row is **tied** (its ``c``-th and ``(c+1)``-th largest
   magnitudes are equal) and the caller takes ``torch.topk``'s own choice for it.

So the kept set is always ``torch.topk``'s (``tests/compression/test_topk_select.py``) and
the sample only decides the speed: the row is read about twice, in place of ``torch.topk``'s
5–10 ns an entry. Built and probed by :class:`decent8.native.CLibrary`.
"""
from __future__ import annotations

import ctypes
from concurrent.futures import ThreadPoolExecutor

import torch

from ..native import CLibrary, warn_unavailable

_SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __AVX2__
#include <immintrin.h>
#endif

#define SAMPLE 16

/* Append (key, position) of every entry of u[0..n) with key >= t to keys/pos (n + 1 slots),
   from m on; returns the new m. Keys are the bits with the sign cleared. */
static int64_t collect(const uint32_t *u, int64_t n, uint32_t t, uint32_t *keys, int32_t *pos, int64_t m) {
    int64_t i = 0;
#ifdef __AVX2__
    const __m256i mask = _mm256_set1_epi32(0x7fffffff);
    const __m256i below = _mm256_set1_epi32((int32_t)(t - 1));    /* keys < 2^31: signed compare */
    for (; i + 8 <= n; i += 8) {
        const __m256i key = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(u + i)), mask);
        unsigned hit = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(key, below)));
        while (hit) {
            const int j = __builtin_ctz(hit);
            keys[m] = u[i + j] & 0x7fffffffu;
            pos[m++] = (int32_t)(i + j);
            hit &= hit - 1;
        }
    }
#endif
    for (; i < n; ++i) {
        const uint32_t key = u[i] & 0x7fffffffu;
        keys[m] = key;
        pos[m] = (int32_t)i;
        m += (key >= t);
    }
    return m;
}

/* the (k+1)-th smallest of a[0..n) (k 0-based), reordering a. Quickselect with branch-free
   partitions (no mispredicted branch per element) into < pivot, == pivot, > pivot, so equal
   keys (an all-zero row) end it at once. */
static uint32_t select_kth(uint32_t *a, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n;                      /* the answer lies in a[lo..hi) */
    for (;;) {
        if (hi - lo <= 16) {                     /* insertion sort the rest */
            for (int64_t i = lo + 1; i < hi; ++i) {
                uint32_t v = a[i];
                int64_t j = i;
                while (j > lo && a[j - 1] > v) { a[j] = a[j - 1]; --j; }
                a[j] = v;
            }
            return a[k];
        }
        uint32_t p0 = a[lo], p1 = a[lo + (hi - lo) / 2], p2 = a[hi - 1], pivot;   /* median of three */
        if (p0 < p1) pivot = (p1 < p2) ? p1 : ((p0 < p2) ? p2 : p0);
        else pivot = (p0 < p2) ? p0 : ((p1 < p2) ? p2 : p1);
        int64_t lt = lo;
        for (int64_t i = lo; i < hi; ++i) {
            const uint32_t v = a[i];
            a[i] = a[lt];
            a[lt] = v;
            lt += (v < pivot);
        }
        int64_t eq = lt;
        for (int64_t i = lt; i < hi; ++i) {
            const uint32_t v = a[i];
            a[i] = a[eq];
            a[eq] = v;
            eq += (v == pivot);
        }
        if (k < lt) hi = lt;
        else if (k < eq) return pivot;
        else lo = eq;
    }
}

/* For each of the k*g rows (row (r, q) at x + r*stride_k + q*stride_g, n contiguous floats):
   the c positions of largest |x|, ascending, at out + (r*g + q)*c, and tied[r*g + q] = 1
   where more than c entries reach the c-th largest magnitude (then out holds c of them). */
int d8_top_magnitude(const float *x, int64_t k, int64_t g, int64_t n, int64_t stride_k, int64_t stride_g,
                     int64_t c, int64_t *out, uint8_t *tied) {
    const int64_t step = SAMPLE;
    uint32_t *keys = (uint32_t *)malloc((size_t)(n + 1) * sizeof(uint32_t));
    uint32_t *work = (uint32_t *)malloc((size_t)(n + 1) * sizeof(uint32_t));
    int32_t *pos = (int32_t *)malloc((size_t)(n + 1) * sizeof(int32_t));
    if (!keys || !work || !pos) { free(keys); free(work); free(pos); return 1; }
    const int64_t ns = n / step;
    const int64_t rank = (2 * c + step - 1) / step + 4;   /* ceil(2 c / SAMPLE) + 4 */
    for (int64_t r = 0; r < k; ++r) {
        for (int64_t q = 0; q < g; ++q) {
            const uint32_t *u = (const uint32_t *)(x + r * stride_k + q * stride_g);
            int64_t *o = out + (r * g + q) * c;
            uint32_t t = 0;
            if (rank < ns) {
                for (int64_t s = 0; s < ns; ++s) work[s] = u[s * step] & 0x7fffffffu;
                t = select_kth(work, ns, ns - rank);
            }
            int64_t m = 0;
            for (;;) {
                m = collect(u, n, t, keys, pos, 0);
                if (m >= c || t == 0) break;
                t = 0;
            }
            memcpy(work, keys, (size_t)m * sizeof(uint32_t));
            const uint32_t kth = select_kth(work, m, m - c);
            int64_t above = 0;
            for (int64_t i = 0; i < m; ++i) above += (keys[i] > kth);
            int64_t equal_left = c - above, w = 0;
            for (int64_t i = 0; i < m && w < c; ++i) {
                if (keys[i] > kth) o[w++] = pos[i];
                else if (keys[i] == kth && equal_left > 0) { o[w++] = pos[i]; --equal_left; }
            }
            int64_t reach = above;
            for (int64_t i = 0; i < m; ++i) reach += (keys[i] == kth);
            tied[r * g + q] = (uint8_t)(reach > c);
        }
    }
    free(keys); free(work); free(pos);
    return 0;
}
"""


#: entries below which one thread selects (a thread pool's hand-off costs ~50 µs)
SPLIT_MIN = 1 << 18
_POOL: list[tuple[int, ThreadPoolExecutor]] = []


def _pool(threads: int) -> ThreadPoolExecutor:
    """A pool of ``threads`` workers (made again when the torch thread count changes)."""
    if not _POOL or _POOL[0][0] != threads:
        if _POOL:
            _POOL.pop()[1].shutdown(wait=False)
        _POOL.append((threads, ThreadPoolExecutor(max_workers=threads, thread_name_prefix="decent8-topk")))
    return _POOL[0][1]


def _call(so: ctypes.CDLL, s: torch.Tensor, c: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The C loop over ``s[k, G, n]``; with more than one torch thread and enough entries the
    nodes are split over that many threads (the call releases the GIL; rows are independent,
    so the result is the one-thread result)."""
    k, g, n = s.shape
    out = torch.empty(k, g, c, dtype=torch.int64)
    tied = torch.empty(k, g, dtype=torch.uint8)
    item = s.element_size()

    def run(r0: int, r1: int) -> int:
        return so.d8_top_magnitude(s.data_ptr() + r0 * s.stride(0) * item, r1 - r0, g, n, s.stride(0), s.stride(1),
                                   c, out.data_ptr() + r0 * g * c * 8, tied.data_ptr() + r0 * g)

    threads = min(torch.get_num_threads(), k)
    if threads > 1 and k * g * n >= SPLIT_MIN:
        bounds = [k * i // threads for i in range(threads + 1)]
        failed = any(list(_pool(threads).map(run, bounds[:-1], bounds[1:])))
    else:
        failed = bool(run(0, k))
    if failed:
        raise MemoryError(f"top-k selection: no memory for a row of {n} entries")
    return out, tied.bool()


def _probe(so: ctypes.CDLL) -> None:
    """The loop must select what ``torch.topk`` selects: random rows (distinct magnitudes, both
    signs), a row of integers (tied at its boundary) and an all-zero row."""
    gen = torch.Generator().manual_seed(0)
    rows = torch.randn(4, 1, 4096, generator=gen)
    rows[1, 0] = torch.randint(-3, 4, (4096,), generator=gen).float()
    rows[2, 0] = 0.0
    try:
        idx, tied = _call(so, rows, 41)
    except MemoryError:
        raise OSError("the compiled top-k does not select what torch.topk selects (it failed)") from None
    want = torch.topk(rows.abs(), 41, dim=2).indices.sort(dim=2).values
    ok = tied.tolist() == [[False], [True], [True], [False]]
    ok = ok and torch.equal(idx[0], want[0]) and torch.equal(idx[3], want[3])
    if not ok:
        raise OSError("the compiled top-k does not select what torch.topk selects")


LIBRARY = CLibrary("top_magnitude", _SOURCE,
                   {"d8_top_magnitude": (ctypes.c_int, [ctypes.c_void_p] + [ctypes.c_int64] * 6
                                         + [ctypes.c_void_p] * 2)},
                   _probe)


def wanted(s: torch.Tensor) -> bool:
    """Whether the C loop selects from ``s`` (float32 ``[k, G, n]`` on the CPU, rows contiguous,
    no transform or compiler tracing it, the library built)."""
    if s.device.type != "cpu" or s.dtype != torch.float32 or s.dim() != 3 or s.stride(2) != 1:
        return False
    probe = getattr(torch.compiler, "is_compiling", None)
    if (probe is not None and probe()) or torch._C._functorch.is_functorch_wrapped_tensor(s):
        return False
    if s.shape[2] >= 2**31:
        return False
    if LIBRARY.available():
        return True
    warn_unavailable(LIBRARY.why_unavailable(), "top-k selection", "using torch.topk (the same selection, slower)",
                     stacklevel=4)
    return False


def top_magnitude(s: torch.Tensor, c: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For ``s[k, G, n]`` (see :func:`wanted`) and ``0 < c < n``: the positions of each row's
    ``c`` largest ``|s|``, ascending (int64 ``[k, G, c]``), and which rows are tied (bool
    ``[k, G]``: their ``c``-th and ``(c+1)``-th largest magnitudes are equal, so the positions
    are one choice of several)."""
    return _call(LIBRARY.lib, s, c)


__all__ = ["LIBRARY", "wanted", "top_magnitude"]
