"""Byzantine attacks: what a Byzantine node j sends on its edge j → i (SPEC §1 notation).

An attack acts on the messages as they arrive, after compression (``decode(payload)``),
edge by edge (:class:`~.messages.NeighbourMessages`): it returns, for every slot whose
sender is Byzantine, the vector that slot receives instead. A Byzantine message has the
format and size of an honest one, so the bytes a run counts do not change. Omniscient
attacks see what the receiver's honest in-neighbours send this round, as their papers
define them; decent8 computes them at the receiver, which holds those messages on every
backend (simulator or node-block rank), so both compute the same thing.

Notation, per receiver i: x_j the (decoded) message of j, H_i = {i} ∪ honest
in-neighbours of i, B_i its Byzantine in-neighbours, μ_i and σ_i the coordinate-wise mean
and (population) standard deviation over H_i, s the attack's scale (``byzantine.scale``,
null: the attack's default).

* ``sign_flip``: x_{j→i} = −s·x_j (s = 1).
* ``gaussian``: x_{j→i} = x_j + s·ξ_j, ξ_j ~ N(0, I) drawn per (run, round, sender)
  (s = 1), the same to every receiver.
* ``label_flip`` (a data attack): messages are honest; the Byzantine nodes train on
  labels y → C − 1 − y (C classes).
* ``alie`` — "A little is enough" (Baruch, Baruch & Goldberg, NeurIPS 2019):
  x_{j→i} = μ_i − z·σ_i, with z = s if given, else the paper's
  z_max = Φ⁻¹((N − q)/N), N = |H_i| + |B_i|, q = ⌊N/2 + 1⌋ − |B_i|.
* ``ipm`` — inner-product manipulation (Xie, Koyejo & Gupta, UAI 2020):
  x_{j→i} = −ε·μ_i, ε = s (0.1).
* ``dissensus`` (He, Karimireddy & Jaggi 2022, "Byzantine-robust decentralized learning
  via ClippedGossip", §5): x_{j→i} = x_i − ε·Σ_{k∈H_i∖{i}} W_ik (x_k − x_i) / Σ_{l∈B_i} W_il,
  ε = s (1.5): with plain averaging the Byzantine weight cancels ε times the honest pull
  toward the neighbours, so for ε > 1 node i moves away from them.

A user attack ``pkg.module:Name`` (``byzantine.attack``) is a class (or factory) called
with no argument whose instance has ``craft(messages, byzantine, step) -> [k, m, d]``
(``byzantine``: ``[k, m]`` bool, the slots whose sender is Byzantine) and, optionally,
``flips_labels = True``.
"""
from __future__ import annotations

import math
from typing import ClassVar

import torch

from ..registry import attacks
from ..seeding import derive_seed
from .messages import NeighbourMessages


class Attack:
    """One attack: :meth:`craft` returns the received messages with the Byzantine slots replaced."""

    name: ClassVar[str] = "none"
    #: the scale s when ``byzantine.scale`` is null
    default_scale: ClassVar[float | None] = None
    #: True: a data attack on the Byzantine nodes' labels (messages stay honest)
    flips_labels: ClassVar[bool] = False

    def __init__(self, scale: float | None = None, seed: int = 0) -> None:
        self.scale = self.default_scale if scale is None else float(scale)
        self.seed = int(seed)

    def craft(self, msgs: NeighbourMessages, byzantine: torch.Tensor, step: int) -> torch.Tensor:
        """``[k, m, d]``: ``msgs.received`` with every slot where ``byzantine[a, s]`` replaced."""
        if not bool(byzantine.any()):
            return msgs.received
        sent = self.message(msgs, byzantine, step)
        return torch.where(byzantine[..., None], sent.to(msgs.received.dtype), msgs.received)

    def message(self, msgs: NeighbourMessages, byzantine: torch.Tensor, step: int) -> torch.Tensor:
        """What each slot would receive if its sender were Byzantine ``[k, m, d]`` (or broadcastable)."""
        return msgs.received


def honest_stats(msgs: NeighbourMessages, byzantine: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """μ_i, σ_i (``[k, 1, d]``, over H_i = {i} ∪ honest in-neighbours) and |H_i| ``[k]``."""
    honest = (msgs.mask & ~byzantine).to(msgs.received.dtype)                       # [k, m]
    count = honest.sum(1) + 1.0
    total = msgs.own + (honest[..., None] * msgs.received).sum(1)
    mu = total / count[:, None]
    sq = (msgs.own - mu) ** 2 + (honest[..., None] * (msgs.received - mu[:, None]) ** 2).sum(1)
    sigma = (sq / count[:, None]).sqrt()
    return mu[:, None], sigma[:, None], count


class SignFlip(Attack):
    name = "sign_flip"
    default_scale = 1.0

    def message(self, msgs, byzantine, step):
        return -self.scale * msgs.received


class Gaussian(Attack):
    name = "gaussian"
    default_scale = 1.0

    def message(self, msgs, byzantine, step):
        """x_j + s·ξ_j, ξ_j from a generator keyed by (seed, step, j): the same on every backend."""
        k, m, d = msgs.received.shape
        noise = torch.zeros(k, m, d, dtype=torch.float32)
        senders = sorted({int(j) for j in msgs.src[byzantine].tolist()})
        src = msgs.src.cpu()
        for j in senders:
            g = torch.Generator().manual_seed(derive_seed(self.seed, "byzantine.gaussian", step, j))
            noise[src == j] = torch.randn(d, generator=g)
        return msgs.received + self.scale * noise.to(msgs.received.device, msgs.received.dtype)


class LabelFlip(Attack):
    name = "label_flip"
    flips_labels = True


class ALIE(Attack):
    name = "alie"

    def z(self, msgs: NeighbourMessages, byzantine: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
        """z per receiver ``[k]``: s, or Baruch et al.'s z_max = Φ⁻¹((N − q)/N)."""
        if self.scale is not None:
            return torch.full_like(count, self.scale)
        b = (msgs.mask & byzantine).sum(1).to(count.dtype)
        n = count + b
        q = torch.floor(n / 2 + 1) - b
        p = ((n - q) / n).clamp(1e-6, 1 - 1e-6)
        return math.sqrt(2.0) * torch.erfinv(2 * p - 1)

    def message(self, msgs, byzantine, step):
        mu, sigma, count = honest_stats(msgs, byzantine)
        return mu - self.z(msgs, byzantine, count)[:, None, None] * sigma


class IPM(Attack):
    name = "ipm"
    default_scale = 0.1

    def message(self, msgs, byzantine, step):
        mu, _, _ = honest_stats(msgs, byzantine)
        return -self.scale * mu


class Dissensus(Attack):
    name = "dissensus"
    default_scale = 1.5

    def message(self, msgs, byzantine, step):
        dt = msgs.received.dtype
        w = msgs.weight.to(dt)
        honest = (msgs.mask & ~byzantine).to(dt) * w                              # W_ik over honest k
        pull = (honest[..., None] * (msgs.received - msgs.own[:, None])).sum(1)     # Σ W_ik (x_k − x_i)
        wb = ((msgs.mask & byzantine).to(dt) * w).sum(1).clamp_min(1e-30)           # Σ_{l∈B_i} W_il
        return (msgs.own - self.scale * pull / wb[:, None])[:, None]


for _i, _attack in enumerate((Attack, SignFlip, Gaussian, LabelFlip, ALIE, IPM, Dissensus)):
    attacks.register(_attack.name, _attack, order=_i)
#: the attack registry (:data:`decent8.registry.attacks`): ``name in ATTACKS``, ``ATTACKS.lookup(name)``
ATTACKS = attacks

__all__ = ["ATTACKS", "Attack", "ALIE", "Dissensus", "Gaussian", "IPM", "LabelFlip", "SignFlip", "honest_stats"]
