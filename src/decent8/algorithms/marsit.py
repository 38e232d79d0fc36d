"""Marsit: sign-bit multi-hop all-reduce with global compensation (Wu et al., arXiv 2204.06787).

What the paper's abstract **states**: traditional 1-bit compressed SGD cannot be used
directly in multi-hop all-reduce (ring, 2-D torus) because re-compressing at every
hop ("cascading compression") deteriorates convergence; Marsit keeps sign bits on
the wire, aggregates them without bias through a bit-wise operation, corrects the
compression deviation with a *global compensation*, keeps the uncompressed
convergence rate, and saves up to 35 % training time at the same accuracy.

What is **reconstructed** (``docs/algorithms.md §10``; the paper body and code are not available),
implemented here:

* Bit-wise unbiased aggregation (reduce-scatter). Bit 1 = positive, 0 = non-positive.
  A worker at chain position p receives bits v standing for p − 1 workers and merges
  its own bits v*: keep the incoming bit with probability (p − 1)/p, else take its
  own. docs/algorithms.md §10 writes this as ``v ← (v AND v*) OR ((v XOR v*) AND r)`` with
  r ~ Bernoulli((p − 1)/p) where v* = 0 and Bernoulli(1/p) where v* = 1; this file
  uses the equivalent form ``v ← (v AND keep) OR (v* AND NOT keep)``, keep ~
  Bernoulli((p − 1)/p) — identical in distribution (bits differ only where v ≠ v*, with
  the same probabilities), and it works on packed bytes: one uniform draw per bit from
  the worker's own generator, packed, then three byte-wise operations. By induction
  P(final bit = 1) = (#workers with a positive sign)/M, so E[2v − 1] is the mean sign.
  On a 2-D torus, merging partial bits that stand for n1 and n2 workers keeps the
  first with probability n1/(n1 + n2). The probability depends on the hop position,
  never on the rank. The all-gather forwards the final bits unchanged.
* Global compensation and update, with u = η_l·∇f + c (here: lr·d, see
  :mod:`decent8.algorithms.allreduce`)::

      ĝ = 2·RingSignAllReduce(u > 0) − 1      (identical on every worker)
      x ← x − η_s·ĝ
      c ← u − η_s·ĝ                           (error against the applied update)

  so y = x − mean(c) follows exact SGD on the (stale-point) gradients.
* Marsit-K: every K-th step (step t with (t + 1) mod K = 0; K = 0 never) the workers
  instead apply x ← x − mean_m(u_m) by an fp32 all-reduce and reset c ← 0, which puts
  x back on y (``allreduce.reset=apply``, docs/algorithms.md §10). Option of this implementation, not
  from the notes: ``allreduce.reset=drop`` applies only this step's mean update and
  discards the accumulated compensation (x stays where it is, the per-worker c's are
  re-synchronised). Why: y can drift far from x (below), and jumping to it can wreck
  the model (docs/results/marsit.md).
* η_s follows the learning-rate schedule (see :mod:`.allreduce`); hyperparameters η_l
  (``optimizer.lr``), η_s (``allreduce.eta_s``), K (``allreduce.K``), M (``nodes``).

Observed (digits, 8 workers, batch 16; docs/results/marsit.md): the final bit is the
bit of one uniformly random worker per coordinate, and each worker's c integrates its
own update noise (c_m − mean(c) is a random walk that only Marsit-K resets), so as
the c_m spread the signs agree less, x follows y more slowly and mean(c) grows. With
local Nesterov momentum (the engine's default optimizer) this happens within a few
epochs and Marsit trails PSGD by ~8 points; with plain SGD (``optimizer.momentum=0``,
the paper's η_l·∇f) it is within ~1 point. A Marsit-K step jumps to y; when y has
drifted far from x that jump can wreck the model (see ``allreduce.reset``).

Traffic: 1 bit per element per hop, 2(M − 1)·d/M bits per worker per step (d padded
to a multiple of 8·M), packed 8 to a byte (LSB first, :func:`pack_bits`); plus one fp32
all-reduce every K steps. The simulator's and the distributed backend's bits are the
same for the same seed: every worker draws the same numbers from its own generator
at the same hops.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from ..collectives.ring import Message, RingAllReduce
from ..compression.base import per_node_uniform
from ..compression.sign import pack_bits, unpack_bits
from ..state_spec import F32, StateSpec
from .allreduce import AllReduceAlgorithm
from ..registry import algorithms
from .info import ALLREDUCE, replace


class BitVoteCodec:
    """Packed sign bits merged per hop by a random bit-wise choice.

    ``unbiased=True`` (Marsit): keep the incoming bits with probability
    n_in / (n_in + n_own), so the final bit is 1 with probability = the fraction of
    positive workers. ``unbiased=False`` (cascading signSGD): re-sign the sum of the
    two ±1 votes, ties broken by a fair coin — keep with probability 1/2 at every hop,
    so the last workers of each chain weigh most (1/2, 1/4, …)."""

    def __init__(self, generators: Sequence[torch.Generator], unbiased: bool = True) -> None:
        if generators is None:
            raise ValueError("the bit-wise sign aggregation needs one torch.Generator per local node")
        self.generators = generators
        self.unbiased = unbiased

    def keep_probability(self, n_in: int, n_own: int) -> float:
        return n_in / (n_in + n_own) if self.unbiased else 0.5

    def start(self, own: torch.Tensor, offset: torch.Tensor) -> Message:
        return (own.contiguous(),)

    def merge(self, msg: Message, own: torch.Tensor, offset: torch.Tensor, n_in: int, n_own: int) -> Message:
        v = msg[0]
        q = self.keep_probability(n_in, n_own)
        draws = per_node_uniform(self.generators, v.shape[1] * 8, v.device)
        keep = pack_bits(draws < q)
        return ((v & keep) | (own & ~keep),)

    def lift(self, msg: Message, offset: torch.Tensor) -> torch.Tensor:
        return msg[0]


def sign_allreduce(allreduce: RingAllReduce, positive: torch.Tensor, codec: BitVoteCodec) -> torch.Tensor:
    """Aggregate the signs ``positive[k, d]`` (bool) over the ring/torus with packed
    bits; returns the final bits ``[k, d]`` (uint8 0/1, identical rows)."""
    k, d = positive.shape
    L = allreduce.padded(d, bits=True)
    bits = pack_bits(F.pad(positive.to(torch.uint8), (0, L - d)))
    out = allreduce.run(bits, codec)[0]
    return unpack_bits(out.reshape(k, L // 8), d)


#: sign bits on the wire, a sign step η_s, the compensation c (the paper's buffer); by default the
#: paper's plain-SGD update η_l·∇f: with local Nesterov momentum the reconstructed Marsit reaches
#: 84 % vs PSGD's 98.6 % on digits (docs/results/marsit.md)
INFO = replace(ALLREDUCE, wire_format="sign-bits", sign_step_size=True, state_buffers=1,
               defaults={"optimizer.momentum": 0.0})


@algorithms.register("marsit", order=13, info=INFO)
class Marsit(AllReduceAlgorithm):
    name = "marsit"
    #: c; one step holds lr·d, u = lr·d + c and the applied signs
    state = StateSpec({"c": F32}, step=12)

    def init_state(self, x: torch.Tensor) -> None:
        super().init_state(x)
        self.c = torch.zeros_like(x)
        self.codec = BitVoteCodec(self.generators, unbiased=True)

    def buffers(self) -> dict[str, torch.Tensor]:
        return {"compensation": self.c}

    def aggregate(self, update: torch.Tensor, step: int, lr: float) -> torch.Tensor:
        u = update + self.c
        if self.K > 0 and (step + 1) % self.K == 0:   # Marsit-K: full precision, reset c
            self.c.zero_()
            return self.allreduce.mean(u if self.reset == "apply" else update)
        bits = sign_allreduce(self.allreduce, u > 0, self.codec)
        applied = bits.to(u.dtype).mul_(2.0 * self.sign_step(lr)).sub_(self.sign_step(lr))
        torch.sub(u, applied, out=self.c)
        return applied

    def message_bytes(self, compressor=None) -> float:
        return self.allreduce.bytes_per_worker(self.allreduce.padded(self.dim, bits=True) // 8, 1.0)
