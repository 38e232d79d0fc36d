"""Robust mixing rules: node i's new model from its own x_i and its in-neighbours' messages.

Each rule replaces D-PSGD's x_i ← Σ_j W_ij x_j (the received messages, per edge:
:class:`~.messages.NeighbourMessages`; N_i the in-neighbours of i, |N_i| its in-degree,
b the assumed largest number of Byzantine in-neighbours of an honest node,
``byzantine.b``). :meth:`Aggregator.check` states each rule's assumption and refuses, in
one line, a graph that violates it.

* ``mean``: x_i ← W_ii x_i + Σ_{j∈N_i} W_ij x_j (plain gossip; tolerates b = 0).
* ``clipped_gossip`` (He, Karimireddy & Jaggi 2022, ClippedGossip):
  x_i ← x_i + Σ_{j∈N_i} W_ij CLIP(x_j − x_i, τ_i), CLIP(z, τ) = min(1, τ/‖z‖)·z.
  τ_i = ``byzantine.clip_tau`` when set, else decent8's adaptive choice: the
  (b+1)-th largest distance ‖x_j − x_i‖ over N_i, so that at most b messages are shortened
  (an adaptive rule in the paper's spirit, not its exact formula; with b = 0 nothing is
  clipped and the rule is ``mean``). Assumes |N_i| ≥ b + 1 (an honest neighbour is left).
* ``trimmed_mean`` (coordinate-wise, BRIDGE-T; Yang & Bajwa 2019): per coordinate, drop
  the b largest and the b smallest values among the neighbours' and average the rest with
  x_i: x_i ← (x_i + Σ_{kept} x_j) / (|N_i| − 2b + 1). Assumes |N_i| ≥ 2b + 1.
* ``median`` (coordinate-wise): x_i ← median{x_i, x_j : j ∈ N_i} per coordinate (for an
  even count, the mean of the two middle values). Assumes an honest majority,
  |N_i| + 1 ≥ 2b + 1.
* ``self_centered_clipping`` (centred clipping around the node's own model, Karimireddy,
  He & Jaggi 2021, used for gossip in He et al. 2022):
  x_i ← x_i + (1/(|N_i| + 1)) Σ_{j∈N_i} CLIP(x_j − x_i, τ_i): uniform weights instead of
  W, τ_i as for ``clipped_gossip``. Assumes |N_i| ≥ b + 1.

A user rule ``pkg.module:Name`` is a class (or factory) called with ``(b, tau)`` whose
instance has ``aggregate(messages) -> [k, d]`` and, optionally, ``check(in_degrees, b)``
returning None or the reason the graph does not fit.
"""
from __future__ import annotations

from typing import ClassVar

import torch

from ..registry import aggregators
from .messages import NeighbourMessages


def by_degree(msgs: NeighbourMessages):
    """``(rows, values [r, deg + 1, d])`` per distinct in-degree: each receiver's own
    message first, then its deg real neighbour slots (slots are filled from the front)."""
    deg = msgs.degree
    for g in torch.unique(deg).tolist():
        rows = torch.nonzero(deg == g).reshape(-1)
        vals = torch.cat([msgs.own.index_select(0, rows)[:, None], msgs.received.index_select(0, rows)[:, :g]], 1)
        yield rows, vals


def clip(z: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """CLIP(z, τ) = min(1, τ/‖z‖)·z over the last axis (τ broadcast over it)."""
    norm = z.norm(dim=-1, keepdim=True)
    return z * torch.clamp(tau[..., None] / norm.clamp_min(1e-30), max=1.0)


class Aggregator:
    """A robust mixing rule over :class:`~.messages.NeighbourMessages` (module docstring)."""

    name: ClassVar[str] = "mean"
    #: the assumption, as the refusal states it
    needs: ClassVar[str] = ""

    def __init__(self, b: int = 0, tau: float | None = None) -> None:
        self.b = int(b)
        self.tau = None if tau is None else float(tau)

    def min_degree(self, b: int) -> int:
        """The smallest in-degree the rule tolerates b Byzantine neighbours with."""
        return 0

    def check(self, in_degrees: list[int], b: int, nodes: list[int] | None = None) -> str | None:
        """None, or why a graph with these honest in-degrees violates the assumption (``nodes``:
        the ids of the honest nodes ``in_degrees`` lists, default 0, 1, …)."""
        need = self.min_degree(b)
        ids = list(range(len(in_degrees))) if nodes is None else list(nodes)
        low = [(ids[i], d) for i, d in enumerate(in_degrees) if d < need]
        if not low:
            return None
        return (f"{self.name} assumes {self.needs} = {need} (b = {b}), but honest node {low[0][0]} has in-degree "
                f"{low[0][1]}")

    def aggregate(self, msgs: NeighbourMessages) -> torch.Tensor:
        dt = msgs.own.dtype
        w = msgs.weight.to(dt) * msgs.mask.to(dt)
        return msgs.self_weight.to(dt)[:, None] * msgs.own + (w[..., None] * msgs.received).sum(1)


class Mean(Aggregator):
    name = "mean"


class ClippedGossip(Aggregator):
    name = "clipped_gossip"
    needs = "in-degree ≥ b + 1"

    def min_degree(self, b):
        return b + 1

    def radius(self, msgs: NeighbourMessages, diff: torch.Tensor) -> torch.Tensor:
        """τ_i ``[k, 1]``: ``tau``, or the (b+1)-th largest ‖x_j − x_i‖ over N_i (module docstring)."""
        k = diff.shape[0]
        if self.tau is not None:
            return torch.full((k, 1), self.tau, dtype=diff.dtype, device=diff.device)
        dist = diff.norm(dim=-1).masked_fill(~msgs.mask, float("-inf"))              # [k, m]
        if dist.shape[1] == 0:
            return torch.zeros(k, 1, dtype=diff.dtype, device=diff.device)
        kth = min(self.b + 1, dist.shape[1])
        tau = dist.topk(kth, dim=1).values[:, -1:]
        return tau.clamp_min(0.0).nan_to_num(0.0, neginf=0.0)

    def weights(self, msgs: NeighbourMessages) -> torch.Tensor:
        dt = msgs.own.dtype
        return msgs.weight.to(dt) * msgs.mask.to(dt)

    def aggregate(self, msgs):
        diff = msgs.received - msgs.own[:, None]
        tau = self.radius(msgs, diff)                                       # [k, 1]
        clipped = clip(diff, tau.expand(-1, diff.shape[1]))
        return msgs.own + (self.weights(msgs)[..., None] * clipped).sum(1)


class SelfCenteredClipping(ClippedGossip):
    name = "self_centered_clipping"

    def weights(self, msgs):
        dt = msgs.own.dtype
        return msgs.mask.to(dt) / (msgs.degree.to(dt)[:, None] + 1.0)


class TrimmedMean(Aggregator):
    name = "trimmed_mean"
    needs = "in-degree ≥ 2b + 1"

    def min_degree(self, b):
        return 2 * b + 1

    def aggregate(self, msgs):
        out = torch.empty_like(msgs.own)
        b = self.b
        for rows, vals in by_degree(msgs):
            own, nb = vals[:, 0], vals[:, 1:]
            kept = nb.sort(dim=1).values[:, b: nb.shape[1] - b]
            out[rows] = (own + kept.sum(1)) / (kept.shape[1] + 1)
        return out


class Median(Aggregator):
    name = "median"
    needs = "an honest majority among itself and its neighbours, in-degree ≥ 2b"

    def min_degree(self, b):
        return 2 * b

    def aggregate(self, msgs):
        out = torch.empty_like(msgs.own)
        for rows, vals in by_degree(msgs):
            s = vals.sort(dim=1).values
            c = s.shape[1]
            out[rows] = s[:, c // 2] if c % 2 else (s[:, c // 2 - 1] + s[:, c // 2]) / 2
        return out


for _i, _rule in enumerate((Mean, ClippedGossip, TrimmedMean, Median, SelfCenteredClipping)):
    aggregators.register(_rule.name, _rule, order=_i)
#: the rule registry (:data:`decent8.registry.aggregators`): ``name in AGGREGATORS``, ``AGGREGATORS.lookup(name)``
AGGREGATORS = aggregators

__all__ = ["AGGREGATORS", "Aggregator", "ClippedGossip", "Mean", "Median", "SelfCenteredClipping", "TrimmedMean",
           "clip"]
