"""Dirichlet label skew with a fixed number of samples per node (SPEC §2).

``partition=dirichlet_fixed`` (Hsu, Qi, Brown, "Measuring the Effects of Non-Identical
Data Distribution for Federated Visual Classification", 2019): every node i draws its
own class proportions q_i ~ Dirichlet(α·p), p the global class frequencies, and holds
exactly m = ⌊N/n⌋ samples (the N − n·m left over are unused). Small α: each node mostly
one class; α → ∞: every node's classes follow p (IID). Unlike ``partition=dirichlet``
(per-class proportions over the nodes, which leaves nodes empty when N/n is small) it
works at any N/n ≥ 1, e.g. 10,000 MNIST nodes × 6 samples, in well under a second.

Sampling without replacement, vectorised over nodes:

1. counts_i ~ Multinomial(m, q_i) for all nodes at once;
2. a class c asked for more than its S_c samples gives back the excess, drawn uniformly
   among its requests (multivariate hypergeometric), and each node redraws the units it
   gave back from its own q_i restricted to the classes with samples left — up to
   :data:`ROUNDS` times;
3. what is still given back then takes the remaining samples in a random order;
4. each class's shuffled indices are handed out in node order (node i's list: class by class).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError

__all__ = ["dirichlet_fixed_partition", "ROUNDS"]

#: rounds of preference-respecting redraws before the leftover units take any free sample
ROUNDS = 32


def _check(n: int, size: int, alpha: float) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ConfigError("nodes", f"must be an integer >= 2, got {n!r}")
    if n > size:
        raise ConfigError("nodes", f"must be <= the number of samples ({size}), got {n}")
    if not float(alpha) > 0.0 or not math.isfinite(float(alpha)):
        raise ConfigError("partition.alpha", f"must be > 0, got {alpha}")
    return size // n


def _node_proportions(rng: np.random.Generator, prior: np.ndarray, alpha: float, n: int) -> np.ndarray:
    """q [n, C] ~ Dirichlet(α·p) per node, by normalised Gamma draws; a row whose draws all
    underflow to 0 (tiny α) puts its mass on one class drawn from p."""
    g = rng.standard_gamma(alpha * prior, size=(n, prior.size))
    s = g.sum(axis=1, keepdims=True)
    dead = s[:, 0] <= 0
    if dead.any():
        g[dead] = 0.0
        g[np.flatnonzero(dead), rng.choice(prior.size, size=int(dead.sum()), p=prior)] = 1.0
        s = g.sum(axis=1, keepdims=True)
    return g / s


def _multinomial_rows(rng: np.random.Generator, totals: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """One multinomial draw per row (``totals[i]`` units over ``probs[i]``), int64 [n, C]."""
    probs = probs / probs.sum(axis=1, keepdims=True)
    return rng.multinomial(totals, probs).astype(np.int64)


def dirichlet_fixed_partition(labels: np.ndarray, n: int, alpha: float, seed: int) -> list[np.ndarray]:
    """n index arrays of exactly ⌊N/n⌋ samples each (module docstring); deterministic
    from ``seed``; no index used twice."""
    y = np.asarray(labels).astype(np.int64, copy=False)
    m = _check(n, y.size, alpha)
    rng = np.random.default_rng(seed)
    classes, supply = np.unique(y, return_counts=True)
    prior = supply / supply.sum()
    q = _node_proportions(rng, prior, float(alpha), n)
    counts = _multinomial_rows(rng, np.full(n, m), q)
    for r in range(ROUNDS + 1):
        over = counts.sum(axis=0) - supply
        freed = np.zeros(n, dtype=np.int64)
        for c in np.flatnonzero(over > 0):
            give = rng.multivariate_hypergeometric(counts[:, c], int(over[c]), method="marginals")
            counts[:, c] -= give
            freed += give
        if not freed.any():
            break
        spare = supply - counts.sum(axis=0)
        who = np.flatnonzero(freed)
        if r < ROUNDS:   # redraw from the node's own proportions over the classes with samples left
            w = q[who] * (spare > 0)
            empty = w.sum(axis=1) <= 0
            w[empty] = spare / spare.sum()
            counts[who] += _multinomial_rows(rng, freed[who], w)
        else:            # the rest: the remaining samples in a random order
            pool = rng.permutation(np.repeat(np.arange(classes.size), spare))[:int(freed.sum())]
            np.add.at(counts, (np.repeat(np.arange(n), freed), pool), 1)
    idx_all, node_all = [], []
    nodes = np.arange(n)
    for c, cls in enumerate(classes):
        idx = np.flatnonzero(y == cls)
        idx_all.append(idx[rng.permutation(idx.size)][:int(counts[:, c].sum())])
        node_all.append(np.repeat(nodes, counts[:, c]))
    node_of = np.concatenate(node_all)
    flat = np.concatenate(idx_all).astype(np.int64, copy=False)[np.argsort(node_of, kind="stable")]
    return np.split(flat, np.cumsum(np.bincount(node_of, minlength=n))[:-1])
