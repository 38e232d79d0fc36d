"""A float32 pair (hi, lo) that accumulates float64 increments without losing them.

Algorithms whose state integrates a mixing increment (Choco-SGD's consensus residual
u ← u + Σ_j (W_ij − δ_ij) q_j, algorithms/choco.py) must not let rounding enter the sum:
it would stay there and be re-applied every round (docs/results/choco_numerics.md). A
float64 buffer does that, but every dense pass over it is a float64 pass, and on CPU
mixed float32/float64 element-wise ops run 10–30× slower than float32 ones
(docs/results/gossip_speed.md, "Exact and fast gossip state"). The pair stores the same value as
u ≈ hi + lo with hi = fl32(u), lo = fl32(u − hi) (a "double-float", relative error
≤ 2⁻⁴⁸): the accumulation is formed in float64 — on the K received entries only when the
messages are sparse — and the value the update reads every step is hi, a float32 tensor.
Reading hi instead of hi + lo perturbs each step by at most ulp(hi)/2, like rounding
the result once into float32; it does not enter the sum, so it does not accumulate.
Memory: 8 bytes per entry, as float64.
"""
from __future__ import annotations

import torch

from ..comm.base import SparseIncrement

#: entries per block of the dense accumulation on CPU (float64 workspace: 256 KiB)
BLOCK = 1 << 15


def accumulate(hi: torch.Tensor, lo: torch.Tensor, inc: "torch.Tensor | SparseIncrement",
               work: torch.Tensor | None = None) -> None:
    """(hi, lo) ← split(hi + lo + inc) in place; ``inc`` a dense float64 ``[k, d]`` tensor
    (consumed) or a :class:`~decent8.comm.base.SparseIncrement`. ``work``: an optional
    float64 workspace for the dense form (≥ BLOCK entries on CPU, ``[k, d]`` elsewhere) (mixed float32/float64 binary ops are
    the slow kind on CPU, so every float32 operand is first copied into float64)."""
    if isinstance(inc, torch.Tensor):
        # in blocks of BLOCK entries on the CPU, so the eight passes run in cache and memory
        # sees one read of (inc, hi, lo) and one write of (hi, lo)
        fi, fh, fl = inc.view(-1), hi.view(-1), lo.view(-1)
        step = BLOCK if inc.device.type == "cpu" else fi.numel()
        w_all = torch.empty(min(step, fi.numel()), dtype=torch.float64, device=inc.device) if work is None else work
        for a in range(0, fi.numel(), step):
            c, h, l_ = fi[a:a + step], fh[a:a + step], fl[a:a + step]
            w = w_all.view(-1)[: c.numel()]
            c.add_(w.copy_(h)).add_(w.copy_(l_))  # float64 hi + lo + inc
            h.copy_(c)                            # round to nearest float32
            l_.copy_(c.sub_(w.copy_(h)))          # the rest, itself rounded to float32
        return
    d = hi.shape[1]
    hv, lv = hi.view(-1), lo.view(-1)
    for rows, cols, vals in inc.slots:            # positions are distinct inside a slot
        flat = cols.add(rows.unsqueeze(1), alpha=d).view(-1)
        # take/put_ rather than hv[flat]: the same values, ~8× faster on CPU (advanced
        # indexing's generic path: 2.4 ms for 66k entries of a [256, 26122] buffer)
        cur = hv.take(flat).double().add_(lv.take(flat).double()).add_(vals.view(-1))
        h = cur.float()
        hv.put_(flat, h)
        lv.put_(flat, cur.sub_(h.double()).float())


def value(hi: torch.Tensor, lo: torch.Tensor) -> torch.Tensor:
    """hi + lo in float64."""
    return hi.double() + lo.double()


def split_(hi: torch.Tensor, lo: torch.Tensor, x: torch.Tensor) -> None:
    """(hi, lo) ← split(x) for a float64 (or float32) ``x``."""
    x64 = x.double()
    hi.copy_(x64)
    lo.copy_(x64 - hi.double())
