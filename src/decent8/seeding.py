"""Deterministic seeds derived from the run seed.

Every random stream (a node's data order in an epoch, a node's compressor noise) gets
its own seed from ``(run seed, stream name, node, …)`` through a hash, so the
simulator and every distributed rank draw exactly the same numbers for the same node.
"""
from __future__ import annotations

import hashlib

import torch


def derive_seed(seed: int, *parts: object) -> int:
    """A 63-bit seed from the run seed and any labels (stable across processes and runs)."""
    text = "/".join([str(seed), *map(str, parts)])
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1


def node_generators(seed: int, stream: str, nodes: list[int], device: torch.device | str = "cpu") -> list[torch.Generator]:
    """One generator per node for a named random stream."""
    gens = []
    for i in nodes:
        g = torch.Generator(device=device)
        g.manual_seed(derive_seed(seed, stream, i))
        gens.append(g)
    return gens
