"""Decentralized algorithms, one per file, behind one interface (SPEC §3).

:class:`Algorithm` (``.base``) is the interface; :class:`GossipAlgorithm` and
:class:`AllReduceAlgorithm` are its two families; each algorithm registers itself in its
own file with its facts, an :class:`~.info.AlgorithmInfo` record (:data:`decent8.registry.algorithms`;
:mod:`.registry` maps names and import paths ``pkg.module:Class`` to classes and records). This package imports without torch: the classes and the
factory (:mod:`.factory`) load on first use.
"""
from __future__ import annotations

import importlib
from typing import Any

from ..registry import algorithms as _algorithms
from .info import AlgorithmInfo
from .registry import (DEFAULT_ALGORITHM, algorithm_class, algorithm_info, algorithm_names, display_name, display_order,
                       names_of, register)

#: attribute -> the submodule that defines it (loaded on first access)
_LAZY: dict[str, str] = {
    "Algorithm": "base", "AlgorithmContext": "base", "GossipAlgorithm": "base",
    "AllReduceAlgorithm": "allreduce", "check_allreduce_options": "allreduce",
    "make_algorithm": "factory", "make_allreduce_algorithm": "factory", "resolve_push_sum": "factory",
    "optimizer_kind_for": "factory",
}


def __getattr__(name: str) -> Any:
    """The helpers of :data:`_LAZY` and every registered built-in algorithm class by its class
    name (``from decent8.algorithms import ChocoSGD``), loaded on first access."""
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    if name[:1].isupper():
        for _, entry in _algorithms.items():
            if entry.builtin and entry.obj.__name__ == name:
                return entry.obj
    if name == "ALGORITHMS":
        return algorithm_names()
    if name in ("GOSSIP_ALGORITHMS", "ALLREDUCE_ALGORITHMS"):
        return names_of("gossip" if name == "GOSSIP_ALGORITHMS" else "ring all-reduce")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DEFAULT_ALGORITHM", "AlgorithmInfo", "algorithm_class", "algorithm_info", "algorithm_names", "display_name",
           "display_order", "names_of", "register", *_LAZY,
           "ALGORITHMS", "GOSSIP_ALGORITHMS", "ALLREDUCE_ALGORITHMS", "DPSGD", "SGP", "DeepSqueeze", "SparsePush", "ChocoSGD",
           "ChocoPush", "GradientTracking", "D2", "GUT", "QGGUTm", "RelaySGD", "ADPSGD", "PSGD", "Marsit", "SignSGD",
           "EFSignSGD"]
