"""Splitting a labelled training set across n nodes (SPEC §2).

Three partitions, all deterministic from ``seed`` (``numpy.random.default_rng``; the
global RNG state is never touched) and all returning one int64 index array per node:

* ``skew``      — the paper's "degree of skew" s in [0, 1] (s = 0 IID, s = 1 label blocks);
* ``dirichlet`` — per-class proportions ~ Dirichlet(α·1_n) (Hsu et al. 2019);
* ``dirichlet_fixed`` — per-node class proportions ~ Dirichlet(α·p), ⌊N/n⌋ samples per node
  (:mod:`decent8.data.dirichlet_fixed`; few samples per node);
* ``shards``    — McMahan et al. 2017: sorted-by-label shards, a few per node;
* ``natural``   — whole users of a naturally split data set (LEAF) per node (:func:`decent8.data.leaf.natural_partition`).
"""
from __future__ import annotations

import math
import random
from typing import Sequence

import numpy as np

from ..errors import ConfigError, choice_error
from .leaf import natural_partition
from .dirichlet_fixed import dirichlet_fixed_partition

PARTITIONS: tuple[str, ...] = ("skew", "dirichlet", "dirichlet_fixed", "shards", "natural")

_EPS = 1e-9  # guards floors against float error, e.g. 6250*(1-0.8) = 1249.9999...


def _floor(x: float) -> int:
    return int(math.floor(x + _EPS))


def _as_labels(labels: np.ndarray) -> np.ndarray:
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ConfigError("labels", f"must be a 1-D array, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.equal(np.mod(arr, 1), 0)):
            raise ConfigError("labels", "must be integer class ids")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        raise ConfigError("labels", "must be non-negative class ids")
    return arr


def _check_nodes(n: int, num_samples: int) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ConfigError("nodes", f"must be an integer >= 2, got {n!r}")
    if n < 2:
        raise ConfigError("nodes", f"must be >= 2, got {n}")
    if n > num_samples:
        raise ConfigError("nodes", f"must be <= the number of samples ({num_samples}), got {n}")


def skew_partition(labels: np.ndarray, n: int, skew: float, seed: int, reference: bool = False) -> list[np.ndarray]:
    """The paper's skewed partition (SPEC §2).

    1. Stable-sort indices by label; class c's first floor(s·S_c) indices go to the
       sorted pool (class order kept), the rest to the random pool.
    2. Shuffle the random pool with ``seed``.
    3. Node i, in order, takes the next floor((N/n)·s) sorted-pool indices and the next
       floor((N/n)·(1−s)) shuffled random-pool indices.

    Every node gets exactly floor((N/n)·s) + floor((N/n)·(1−s)) samples; leftovers are
    unused. (If rounding leaves the sorted pool a few indices short for the last
    nodes, the shortfall is taken from the random pool so node sizes stay equal.)

    ``reference=False`` (the default): floors guarded against float error
    (6250·(1 − 0.8) = 1249.9999999999998 counts as 1250) and the random pool shuffled
    by ``numpy.random.default_rng(seed).permutation``.

    ``reference=True``: the authors' split index for index — Python's
    ``random.Random(seed).shuffle`` on the random pool (a list of Python ints in
    class order) and plain ``int()`` truncation of every share, so at s = 0.8 each node
    takes int(6250·0.2) = 1249 random-pool indices, not 1250, and node i takes the
    plain slices [i·a, (i+1)·a) of the sorted and [i·b, (i+1)·b) of the random pool (a
    sorted pool short by rounding leaves the last node short). Their seed default is
    1234; with it, CIFAR-10 (5,000 per class), 8 nodes, s = 0.8 gives node 0 the class
    counts [4124, 1117, …] of SPEC §2. Per-node class counts depend only on the label
    sequence in sorted order, so they are the same for any order of the label vector.
    """
    y = _as_labels(labels)
    _check_nodes(n, y.size)
    if not 0.0 <= float(skew) <= 1.0:
        raise ConfigError("skew", f"must be in [0, 1], got {skew}")
    s = float(skew)
    N = y.size

    order = np.argsort(y, kind="stable")
    sorted_y = y[order]
    classes, starts, counts = np.unique(sorted_y, return_index=True, return_counts=True)
    sorted_pool: list[np.ndarray] = []
    random_pool: list[np.ndarray] = []
    for start, count in zip(starts, counts):
        block = order[start:start + count]
        k = min(int(s * count) if reference else _floor(s * count), int(count))
        sorted_pool.append(block[:k])
        random_pool.append(block[k:])
    sorted_arr = np.concatenate(sorted_pool) if sorted_pool else np.empty(0, np.int64)
    random_arr = np.concatenate(random_pool) if random_pool else np.empty(0, np.int64)
    if reference:
        pool = random_arr.tolist()
        random.Random(seed).shuffle(pool)
        random_arr = np.asarray(pool, dtype=np.int64)
        per_sorted = int(N / n * s)
        per_random = int(N / n * (1.0 - s))
    else:
        rng = np.random.default_rng(seed)
        random_arr = random_arr[rng.permutation(random_arr.size)]
        per_sorted = _floor(N / n * s)
        per_random = _floor(N / n * (1.0 - s))
    parts: list[np.ndarray] = []
    ps = pr = 0
    for _ in range(n):
        take_s = min(per_sorted, sorted_arr.size - ps)
        take_r = per_random if reference else per_random + (per_sorted - take_s)
        part = np.concatenate([sorted_arr[ps:ps + take_s], random_arr[pr:pr + take_r]])
        ps += take_s
        pr += take_r
        parts.append(part.astype(np.int64, copy=False))
    return parts


def dirichlet_partition(labels: np.ndarray, n: int, alpha: float, seed: int,
                        min_size: int = 1, max_tries: int = 1000) -> list[np.ndarray]:
    """Dirichlet label skew: for each class c, shuffle its indices and split them across
    nodes with proportions p_c ~ Dirichlet(α·1_n) (cut points floor(cumsum(p_c)·S_c)).
    Resample all classes (same generator, so still deterministic) until every node has
    at least ``min_size`` samples, at most ``max_tries`` times. Small α = strong skew,
    α → ∞ = IID. Every index is used exactly once. (SPEC §2, comparison partition.)
    """
    y = _as_labels(labels)
    _check_nodes(n, y.size)
    if not float(alpha) > 0.0 or not math.isfinite(float(alpha)):
        raise ConfigError("partition.alpha", f"must be > 0, got {alpha}")
    if min_size < 0 or min_size * n > y.size:
        raise ConfigError("partition.min_size",
                          f"must be in [0, N/nodes] = [0, {y.size // n}], got {min_size}")
    rng = np.random.default_rng(seed)
    class_idx = [np.flatnonzero(y == c) for c in np.unique(y)]
    nodes = np.arange(n)
    p_empty = _empty_chance([i.size for i in class_idx], n, float(alpha)) if min_size == 1 else None
    if p_empty is not None and n * math.log1p(-min(p_empty, 1 - 1e-16)) + math.log(max_tries) < math.log(1e-3):
        raise ConfigError("partition.alpha", _hopeless(alpha, n, y.size, max_tries))
    always_empty: np.ndarray | None = None
    for attempt in range(max_tries):
        # vectorised over nodes (10,000 nodes in seconds): each class's shuffled
        # indices get the node of their cut interval; a stable sort by node then yields, per
        # node, its pieces in class order — the same lists as splitting class by class
        idx_all, node_all = [], []
        for idx in class_idx:
            idx = idx[rng.permutation(idx.size)]
            p = rng.dirichlet(np.full(n, float(alpha)))
            cuts = np.floor(np.cumsum(p)[:-1] * idx.size + _EPS).astype(np.int64)
            sizes = np.diff(np.concatenate(([0], cuts, [idx.size])))
            idx_all.append(idx)
            node_all.append(np.repeat(nodes, sizes))
        node_of = np.concatenate(node_all)
        counts = np.bincount(node_of, minlength=n)
        if counts.min() >= min_size:
            flat = np.concatenate(idx_all).astype(np.int64, copy=False)[np.argsort(node_of, kind="stable")]
            return np.split(flat, np.cumsum(counts)[:-1])
        if p_empty is not None:  # the same node empty in every try: the cut points, not chance (large α)
            always_empty = counts < 1 if always_empty is None else always_empty & (counts < 1)
            if attempt + 1 >= FAST_FAIL_TRIES and always_empty.any() and n * p_empty ** FAST_FAIL_TRIES < 1e-6:
                raise ConfigError("partition.alpha", _hopeless(alpha, n, y.size, max_tries, int(np.argmax(always_empty))))
    raise ConfigError("partition.alpha",
                      f"alpha={alpha} gave a node fewer than {min_size} samples in "
                      f"{max_tries} tries; use a larger alpha, fewer nodes or partition=dirichlet_fixed (a fixed "
                      f"size per node)")


#: tries after which a node that was empty in every one of them stops dirichlet_partition
FAST_FAIL_TRIES = 10


def _empty_chance(class_sizes: Sequence[int], n: int, alpha: float) -> float | None:
    """Chance that one node gets no sample of any class in one try of
    :func:`dirichlet_partition`: per class, its share p ~ Beta(α, (n−1)α) covers no cut
    point with probability E[max(0, 1 − p·S_c)]; classes are drawn independently. None
    without scipy (then only the tries decide)."""
    try:
        from scipy.special import betainc
    except ImportError:  # pragma: no cover - scipy comes with the test extras
        return None
    b = (n - 1) * alpha
    log_p = 0.0
    for s in class_sizes:
        x = 1.0 / s
        e = float(betainc(alpha, b, x) - s * (alpha / (alpha + b)) * betainc(alpha + 1, b, x))
        log_p += math.log(max(e, 1e-300))
    return math.exp(log_p)


def _hopeless(alpha: float, n: int, size: int, max_tries: int, node: int | None = None) -> str:
    why = (f"node {node} got no sample in each of the first {FAST_FAIL_TRIES} tries" if node is not None else
           f"some node gets no sample in practically every one of {max_tries} tries")
    return (f"alpha={alpha:g} cannot give each of {n} nodes a sample of the {size} ({size / n:.3g} per node): {why}; "
            f"use partition=dirichlet_fixed (the same α, a fixed size per node), fewer nodes or another alpha")


def shard_partition(labels: np.ndarray, n: int, shards_per_node: int, seed: int) -> list[np.ndarray]:
    """McMahan-style shards: stable-sort indices by label, cut the first n·k·m of them
    into n·k shards of m = floor(N/(n·k)) consecutive indices, and give each node k
    shards chosen by a seeded random permutation (k = ``shards_per_node``).
    """
    y = _as_labels(labels)
    _check_nodes(n, y.size)
    k = shards_per_node
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError("partition.shards_per_node", f"must be an integer >= 1, got {k!r}")
    total = n * k
    if total > y.size:
        raise ConfigError("partition.shards_per_node",
                          f"nodes*shards_per_node must be <= the number of samples ({y.size}), "
                          f"got {n}*{k} = {total}")
    m = y.size // total
    order = np.argsort(y, kind="stable")
    shards = order[:total * m].reshape(total, m)
    perm = np.random.default_rng(seed).permutation(total)
    return [shards[perm[i * k:(i + 1) * k]].reshape(-1).astype(np.int64, copy=False)
            for i in range(n)]


def make_partition(name: str, labels: np.ndarray, n: int, seed: int, skew: float = 0.0,
                   alpha: float = 0.5, shards_per_node: int = 2, reference: bool = False,
                   users: np.ndarray | None = None) -> list[np.ndarray]:
    """Validate the options and dispatch to the named partition (SPEC §2).
    ``reference=True`` (``partition.reference``, skew only): the authors' exact split.
    ``users``: each sample's user, for ``natural``."""
    if name not in PARTITIONS:
        raise choice_error("partition", name, PARTITIONS)
    if name == "natural":
        return natural_partition(users, n)
    if not isinstance(reference, (bool, np.bool_)):
        raise ConfigError("partition.reference", f"must be true or false, got {reference!r}")
    if reference and name != "skew":
        raise ConfigError("partition.reference", f"reproduces the authors' skew partition; not available for partition={name}")
    if name == "skew":
        return skew_partition(labels, n, skew, seed, reference=bool(reference))
    if name == "dirichlet":
        return dirichlet_partition(labels, n, alpha, seed)
    if name == "dirichlet_fixed":
        return dirichlet_fixed_partition(_as_labels(labels), n, alpha, seed)
    return shard_partition(labels, n, shards_per_node, seed)


def class_counts(parts: Sequence[np.ndarray], labels: np.ndarray, num_classes: int) -> np.ndarray:
    """counts[i, c] = number of samples of class c held by node i (int64, shape [n, C])."""
    y = _as_labels(labels)
    if y.size and y.max() >= num_classes:
        raise ConfigError("num_classes", f"must exceed the largest label ({int(y.max())}), got {num_classes}")
    out = np.zeros((len(parts), num_classes), dtype=np.int64)
    for i, p in enumerate(parts):
        out[i] = np.bincount(y[np.asarray(p, dtype=np.int64)], minlength=num_classes)
    return out
