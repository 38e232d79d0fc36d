"""Building an algorithm by name: :func:`make_algorithm` for every registered name
(gossip and all-reduce alike, through :meth:`~.base.Algorithm.create`) and the name-based
helpers the builder and older callers use (SPEC §3)."""
from __future__ import annotations

from typing import Sequence

import torch

from ..comm.base import Communicator
from ..compression.base import Compressor
from .allreduce import AllReduceAlgorithm, check_allreduce_options
from .base import Algorithm, AlgorithmContext, GossipAlgorithm
from .registry import algorithm_class, algorithm_info, names_of


def resolve_push_sum(name: str, push_sum: str | bool, doubly_stochastic: bool) -> bool:
    """``auto`` → push-sum exactly when W is not doubly stochastic (the algorithm may force it)."""
    return algorithm_info(name).resolve_push_sum(name, push_sum, doubly_stochastic)


def optimizer_kind_for(name: str, kind: str) -> str:
    """The local optimizer ``name`` runs with: its own (QG-GUTm: qgm) or ``kind``; a
    one-line ConfigError where quasi-global momentum is not defined for it."""
    return algorithm_info(name).optimizer_for(name, kind)


def make_algorithm(
    name: str,
    comm: Communicator,
    compressor: Compressor,
    gamma: float,
    push_sum: bool,
    generators: Sequence[torch.Generator] | None = None,
    params: dict | None = None,
    **options,
) -> Algorithm:
    """The algorithm ``name`` with its constructor ``options`` (gut, qg_gutm: ``mu``) and
    ``params`` (``algorithm.params``), through :meth:`~.base.Algorithm.from_context` as a run builds it."""
    return algorithm_class(name).from_context(AlgorithmContext(comm, compressor, gamma, push_sum, generators,
                                                               options=options, params=dict(params or {}),
                                                               info=algorithm_info(name)))


def make_allreduce_algorithm(
    name: str,
    comm: Communicator,
    topology: str,
    rows: int | None = None,
    cols: int | None = None,
    generators: Sequence[torch.Generator] | None = None,
    base_lr: float = 0.1,
    eta_s: float = 1e-3,
    K: int = 0,
    reset: str = "apply",
) -> AllReduceAlgorithm:
    """An all-reduce algorithm on the ring (``ring``, ``directed_ring``) or the 2-D torus
    (``torus``, ``rows`` × ``cols``); ``generators``: one per local node (the per-hop draws)."""
    cls = algorithm_class(name)
    check_allreduce_options(K, eta_s, reset)
    return cls.from_context(AlgorithmContext(comm, None, 1.0, False, generators, topology, rows, cols,  # type: ignore[arg-type]
                                             options=dict(base_lr=base_lr, eta_s=eta_s, K=K, reset=reset),
                                             info=algorithm_info(name)))


__all__ = ["names_of", "resolve_push_sum", "optimizer_kind_for", "make_algorithm", "make_allreduce_algorithm",
           "GossipAlgorithm", "AllReduceAlgorithm"]
