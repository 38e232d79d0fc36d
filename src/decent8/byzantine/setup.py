"""A run's Byzantine nodes, attack and robust mixing rule (``byzantine.*``; docs/algorithms.md).

:func:`pick_nodes` turns ``byzantine.nodes`` — a count, a fraction of the n nodes or a list
of ids — into the sorted ids of the Byzantine nodes (a count or fraction: the first ones of
a permutation seeded by the run seed, recorded in summary.json). :class:`RobustGossip` is
one gossip round's mixing over the per-edge messages:

    received ← attack.craft(messages, Byzantine senders)     (what Byzantine j sends i)
    x_i ← aggregator(x_i, received)                           (a robust mixing rule)
"""
from __future__ import annotations

import math
import operator

import numpy as np
import torch

from ..errors import ConfigError
from ..plugins import is_import_path
from ..seeding import derive_seed
from .aggregators import AGGREGATORS, Aggregator
from .attacks import ATTACKS, Attack
from .messages import NeighbourMessages
from .. import user_code
from ..plugins import load_factory


def pick_nodes(spec: object, n: int, seed: int) -> list[int]:
    """The Byzantine node ids of ``byzantine.nodes`` (module docstring)."""
    opt = "byzantine.nodes"
    if spec is None or isinstance(spec, bool):
        if spec in (None, False):
            return []
        raise ConfigError(opt, f"must be a count, a fraction in [0, 1) or a list of node ids, got {spec!r}")
    if isinstance(spec, str):
        text = spec.strip()
        if text.startswith("["):
            text = text.strip("[]")
            spec = [s for s in text.replace(",", " ").split()]
        else:
            try:
                spec = float(text) if any(c in text for c in ".eE") else int(text)
            except ValueError:
                raise ConfigError(opt, f"must be a count, a fraction in [0, 1) or a list of node ids, got {spec!r}") from None
    if isinstance(spec, (list, tuple)):
        try:
            ids = sorted({int(i) if isinstance(i, str) else operator.index(i) for i in spec})
        except (TypeError, ValueError):
            raise ConfigError(opt, f"a list of node ids must hold integers, got {list(spec)!r:.80}") from None
        bad = [i for i in ids if not 0 <= i < n]
        if bad:
            raise ConfigError(opt, f"node id {bad[0]} is outside 0..{n - 1}")
        count = len(ids)
    elif isinstance(spec, float) and not spec.is_integer():
        if not (math.isfinite(spec) and 0 < spec < 1):
            raise ConfigError(opt, f"a fraction must lie in [0, 1), got {spec!r}")
        count, ids = int(math.floor(spec * n)), None
    elif isinstance(spec, (int, float)):
        count, ids = int(spec), None
        if not 0 <= count < n:
            raise ConfigError(opt, f"a count must lie in 0..{n - 1} (some node must stay honest), got {spec!r}")
    else:
        raise ConfigError(opt, f"must be a count, a fraction in [0, 1) or a list of node ids, got {spec!r:.60}")
    if ids is None:
        perm = np.random.default_rng(derive_seed(seed, "byzantine.nodes")).permutation(n)
        ids = sorted(int(i) for i in perm[:count])
    if len(ids) >= n:
        raise ConfigError(opt, f"all {n} nodes would be Byzantine; keep at least one honest node")
    return ids


def _user_component(option: str, name: str, method: str, signature: str, *args, factory=None):
    """A user's attack or rule: ``factory`` (registered under ``name``) or ``name`` through the
    import gate, called with ``args``; its ``method`` is guarded like other user code (one line
    on failure)."""
    obj = user_code.call(option, name, factory if factory is not None else load_factory(name, option), *args)
    if not callable(getattr(obj, method, None)):
        called = f"{name}({', '.join(('b', 'tau')[:len(args)])})"
        raise user_code.UserCodeError(option, f"{called} returned {type(obj).__name__}, which has no {signature} method")
    return user_code.guard(obj, option, name, (method,))


def make_attack(name: str, scale: float | None, seed: int) -> Attack:
    """``byzantine.attack``: a built-in name or ``pkg.module:Name`` through the import gate."""
    entry = ATTACKS.registered(name)
    if is_import_path(name) or (entry is not None and not entry.builtin):
        return _user_component("byzantine.attack", name, "craft", "craft(messages, byzantine, step)",
                               factory=entry.obj if entry is not None else None)
    if entry is None:
        raise ConfigError("byzantine.attack", f"unknown attack {name!r}; allowed: {', '.join(ATTACKS)} or "
                                              f"pkg.module:Name")
    if scale is not None and not (math.isfinite(float(scale)) and float(scale) >= 0):
        raise ConfigError("byzantine.scale", f"must be a finite number ≥ 0, got {scale!r}")
    return entry.obj(scale, seed)


def make_aggregator(name: str, b: int, tau: float | None) -> Aggregator:
    """``byzantine.aggregator``: a built-in rule or ``pkg.module:Name`` called with ``(b, tau)``."""
    if tau is not None and not (math.isfinite(float(tau)) and float(tau) > 0):
        raise ConfigError("byzantine.clip_tau", f"must be a number > 0 (null: adaptive), got {tau!r}")
    entry = AGGREGATORS.registered(name)
    if is_import_path(name) or (entry is not None and not entry.builtin):
        return _user_component("byzantine.aggregator", name, "aggregate", "aggregate(messages)", b, tau,
                               factory=entry.obj if entry is not None else None)
    if entry is None:
        raise ConfigError("byzantine.aggregator", f"unknown rule {name!r}; allowed: {', '.join(AGGREGATORS)} or "
                                                  f"pkg.module:Name")
    return entry.obj(b, tau)


def byzantine_in_degrees(src: torch.Tensor, mask: torch.Tensor, byzantine: list[int], n: int
                         ) -> tuple[list[int], list[int]]:
    """Per honest node (ascending id): its in-degree and its number of Byzantine in-neighbours
    (``src``/``mask``: the ``[n, m]`` slots of all n nodes)."""
    is_byz = torch.zeros(n + 1, dtype=torch.bool)
    is_byz[torch.as_tensor(byzantine, dtype=torch.long)] = True
    src_c, mask_c = src.cpu(), mask.cpu()
    byz = (is_byz[src_c.clamp_min(0)] & mask_c).sum(1)
    honest = [i for i in range(n) if i not in set(byzantine)]
    return [int(mask_c[i].sum()) for i in honest], [int(byz[i]) for i in honest]


class RobustGossip:
    """One round's mixing with Byzantine senders and a robust rule (module docstring)."""

    def __init__(self, byzantine: list[int], n: int, attack: Attack, aggregator: Aggregator) -> None:
        self.byzantine = list(byzantine)
        self.attack = attack
        self.aggregator = aggregator
        self._is_byz = torch.zeros(n, dtype=torch.bool)
        if self.byzantine:
            self._is_byz[torch.as_tensor(self.byzantine, dtype=torch.long)] = True

    def byzantine_slots(self, msgs: NeighbourMessages) -> torch.Tensor:
        """``[k, m]`` bool: the slots whose sender is Byzantine."""
        is_byz = self._is_byz.to(msgs.src.device)
        return is_byz[msgs.src.clamp_min(0)] & msgs.mask

    def mix(self, msgs: NeighbourMessages, step: int) -> torch.Tensor:
        """``[k, d]``: each local node's mixed model."""
        slots = self.byzantine_slots(msgs)
        if self.byzantine and bool(slots.any()):
            msgs = msgs.with_received(self.attack.craft(msgs, slots, step))
        return self.aggregator.aggregate(msgs)


__all__ = ["RobustGossip", "byzantine_in_degrees", "make_aggregator", "make_attack", "pick_nodes"]
