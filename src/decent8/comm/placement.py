"""Placement: which rank holds which node (docs/architecture.md "Node blocks").

A placement of n nodes over R ranks is ``owner[i] ∈ {0..R−1}`` for every node i; rank r
holds the block ``B_r = {i : owner[i] = r}`` in ascending node order (its stacked
``[k_r, d]`` model, ``k_r = |B_r|``). ``dist.placement`` chooses it:

* ``block`` (default): contiguous blocks, the first ``n mod R`` ranks one node larger
  (n = 10 over R = 4: 3, 3, 2, 2). A ring then crosses each rank boundary once in each
  direction: 2R crossing edges (R = 1: none; R = 2: 4).
* ``random``: the same block sizes over a seeded permutation of the nodes (the worst
  case for locality: most edges cross).
* ``<file>``: a text file with n integers, the rank of node 0, 1, …, n−1 (whitespace
  or newline separated, ``#`` comments); every rank must hold at least one node.

A directed edge j → i (W_ij ≠ 0, i ≠ j) *crosses* when owner[i] ≠ owner[j]: its payload
travels between ranks; every other edge is mixed locally inside a block.
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import ConfigError

PLACEMENTS = ("block", "random")


def block_sizes(n: int, ranks: int) -> list[int]:
    """Sizes of the R blocks: ``n // R`` each, the first ``n mod R`` one larger."""
    q, r = divmod(n, ranks)
    return [q + (1 if i < r else 0) for i in range(ranks)]


def block_placement(n: int, ranks: int) -> list[int]:
    """Contiguous blocks: ``owner = [0]*k_0 + [1]*k_1 + …``."""
    return [r for r, k in enumerate(block_sizes(n, ranks)) for _ in range(k)]


def random_placement(n: int, ranks: int, seed: int) -> list[int]:
    """The block sizes over a permutation of the nodes drawn from ``seed``."""
    perm = np.random.default_rng([int(seed), 0x6879]).permutation(n)
    owner = [0] * n
    for pos, r in enumerate(block_placement(n, ranks)):
        owner[int(perm[pos])] = r
    return owner


def file_placement(path: str, n: int, ranks: int) -> list[int]:
    """Read n ranks, one per node, from ``path`` (see the module docstring); a file larger
    than 64 bytes per node (comments included) is refused before it is read."""
    opt = "dist.placement"
    if not os.path.isfile(path):
        raise ConfigError(opt, f"must be block, random or a file of {n} ranks (one per node); {path!r} is neither")
    limit = 4096 + 64 * n
    words: list[str] = []
    try:
        if os.path.getsize(path) > limit:
            raise ConfigError(opt, f"{path} has {os.path.getsize(path)} bytes; a placement of {n} nodes has at most "
                                   f"{limit} (one rank per node)")
        with open(path, "rb") as fb:
            text = fb.read(limit + 1).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(opt, f"{path} is not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise ConfigError(opt, f"cannot read {path}: {e.strerror or e}") from None
    for line in text.splitlines():
        words += line.split("#", 1)[0].split()
    if len(words) > n:
        raise ConfigError(opt, f"{path} holds {len(words)} ranks, but there are {n} nodes (one rank per node)")
    try:
        owner = [int(w) for w in words]
    except ValueError:
        raise ConfigError(opt, f"{path}: every entry must be an integer rank") from None
    if len(owner) != n:
        raise ConfigError(opt, f"{path} holds {len(owner)} ranks, but there are {n} nodes (one rank per node)")
    bad = [i for i, r in enumerate(owner) if not 0 <= r < ranks]
    if bad:
        raise ConfigError(opt, f"{path}: node {bad[0]} is placed on rank {owner[bad[0]]}, not one of 0..{ranks - 1}")
    return owner


def make_placement(spec: str, n: int, ranks: int, seed: int = 0) -> list[int]:
    """``owner[n]`` from ``dist.placement`` (block | random | a file). Every rank holds ≥ 1 node."""
    if ranks < 1:
        raise ConfigError("dist.ranks", f"must be >= 1, got {ranks}")
    if ranks > n:
        raise ConfigError("dist.ranks", f"{ranks} ranks for {n} nodes: every rank must hold at least one node")
    if spec == "block":
        owner = block_placement(n, ranks)
    elif spec == "random":
        owner = random_placement(n, ranks, seed)
    else:
        owner = file_placement(spec, n, ranks)
    empty = sorted(set(range(ranks)) - set(owner))
    if empty:
        raise ConfigError("dist.placement", f"rank {empty[0]} holds no node; every rank must hold at least one")
    return owner


def blocks(owner: list[int], ranks: int) -> list[list[int]]:
    """``B_r``: the nodes of each rank, ascending."""
    out: list[list[int]] = [[] for _ in range(ranks)]
    for i, r in enumerate(owner):
        out[r].append(i)
    return out


def describe_nodes(nodes: list[int]) -> str:
    """``0–7`` for a contiguous block, else ``0, 3, 5`` (at most 8 listed)."""
    if not nodes:
        return "none"
    if nodes == list(range(nodes[0], nodes[-1] + 1)):
        return f"{nodes[0]}–{nodes[-1]}" if len(nodes) > 1 else str(nodes[0])
    head = ", ".join(map(str, nodes[:8]))
    return head + (f", … ({len(nodes)} nodes)" if len(nodes) > 8 else "")


def crossing_edges(weights: np.ndarray, owner: list[int]) -> int:
    """Number of directed edges j → i (W_ij ≠ 0, i ≠ j) with owner[i] ≠ owner[j]."""
    w = np.asarray(weights)
    own = np.asarray(owner)
    off = (w != 0) & ~np.eye(w.shape[0], dtype=bool)
    return int((off & (own[:, None] != own[None, :])).sum())


__all__ = ["PLACEMENTS", "block_sizes", "block_placement", "random_placement", "file_placement", "make_placement",
           "blocks", "describe_nodes", "crossing_edges"]
