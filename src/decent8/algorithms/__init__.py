"""Decentralized algorithms, one per file (SPEC §3), and their factory."""
from __future__ import annotations

from typing import Sequence

import torch

from ..comm.base import Communicator
from ..compression.base import Compressor
from ..errors import ConfigError, choice_error
from ..collectives.ring import RingAllReduce, check_allreduce_topology
from .adpsgd import ADPSGD
from .allreduce import AllReduceAlgorithm, check_allreduce_options
from .base import GossipAlgorithm
from .choco import ChocoSGD
from .d2 import D2
from .deepsqueeze import DeepSqueeze
from .dpsgd import DPSGD
from .ef_signsgd import EFSignSGD
from .gt import GradientTracking
from .gut import GUT, QGGUTm
from .marsit import Marsit
from .psgd import PSGD
from .relaysgd import RelaySGD
from .signsgd import SignSGD

#: name -> (class, forced push-sum or None)
_ALGORITHMS: dict[str, tuple[type[GossipAlgorithm], bool | None]] = {
    "dpsgd": (DPSGD, None),
    "sgp": (DPSGD, True),
    "deepsqueeze": (DeepSqueeze, None),
    "sparse_push": (DeepSqueeze, True),
    "choco": (ChocoSGD, None),
    "choco_push": (ChocoSGD, True),
    # heterogeneity-robust algorithms (issue 17; docs/results/heterogeneity.md)
    "gt": (GradientTracking, None),
    "d2": (D2, None),
    "gut": (GUT, None),
    "qg_gutm": (QGGUTm, None),
    "relaysgd": (RelaySGD, None),
    # asynchronous gossip (issue 33): an event-driven run (train/async_gossip.py), simulator only
    "adpsgd": (ADPSGD, None),
}
GOSSIP_ALGORITHMS: tuple[str, ...] = tuple(_ALGORITHMS)

#: all-reduce algorithms (aggregate updates over a ring / 2-D torus all-reduce; docs/algorithms.md §10)
_ALLREDUCE: dict[str, type[AllReduceAlgorithm]] = {
    "psgd": PSGD,
    "marsit": Marsit,
    "signsgd": SignSGD,
    "ef_signsgd": EFSignSGD,
}
ALLREDUCE_ALGORITHMS: tuple[str, ...] = tuple(_ALLREDUCE)
ALGORITHMS: tuple[str, ...] = GOSSIP_ALGORITHMS + ALLREDUCE_ALGORITHMS


def resolve_push_sum(name: str, push_sum: str | bool, doubly_stochastic: bool) -> bool:
    """``auto`` → push-sum exactly when W is not doubly stochastic."""
    if name in _ALLREDUCE:
        if str(push_sum).lower() == "true":
            raise ConfigError("algorithm.push_sum", f"'{name}' is an all-reduce algorithm; push_sum must be auto or false")
        return False
    if name not in _ALGORITHMS:
        raise choice_error("algorithm", name, ALGORITHMS)
    forced = _ALGORITHMS[name][1]
    push_sum = str(push_sum).lower() if push_sum is not None else "auto"
    if forced is not None:
        if push_sum == "false":
            raise ConfigError("algorithm.push_sum", f"'{name}' is a push-sum algorithm; push_sum must be auto or true")
        return True
    if push_sum == "auto":
        return not doubly_stochastic
    if push_sum == "true":
        return True
    if push_sum == "false":
        return False
    raise ConfigError("algorithm.push_sum", f"must be auto, true or false, got {push_sum!r}")


def algorithm_class(name: str) -> type[GossipAlgorithm] | None:
    """The gossip algorithm class registered as ``name`` (None for all-reduce algorithms)."""
    entry = _ALGORITHMS.get(name)
    return entry[0] if entry else None


def optimizer_kind_for(name: str, kind: str) -> str:
    """The local optimizer ``name`` runs with: its own (QG-GUTm: qgm) or ``kind``; a
    one-line ConfigError where quasi-global momentum is not defined for it."""
    cls = algorithm_class(name)
    if cls is None:
        return kind
    if cls.optimizer_kind is not None:
        return cls.optimizer_kind
    if kind == "qgm" and not cls.allows_qgm:
        raise ConfigError("optimizer.kind", f"quasi-global momentum is not defined for '{name}' (it tracks its own "
                                            "direction); use optimizer.kind=local, or algorithm=qg_gutm")
    return kind


def make_algorithm(
    name: str,
    comm: Communicator,
    compressor: Compressor,
    gamma: float,
    push_sum: bool,
    generators: Sequence[torch.Generator] | None = None,
    **options,
) -> GossipAlgorithm:
    """``options``: algorithm-specific settings (gut, qg_gutm: ``mu``, the tracking scale)."""
    if name not in _ALGORITHMS:
        raise choice_error("algorithm", name, GOSSIP_ALGORITHMS)
    cls = _ALGORITHMS[name][0]
    if not cls.supports_compression and not compressor.is_identity:
        raise ConfigError(
            "compression", f"algorithm '{name}' sends uncompressed models; use compression=identity "
            "or a compressed algorithm (deepsqueeze, choco, sparse_push, choco_push, gt)"
        )
    if not gamma > 0:
        raise ConfigError("algorithm.gamma", f"consensus step size must be > 0, got {gamma}")
    return cls(comm, compressor, gamma=gamma, push_sum=push_sum, generators=generators, **options)


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
    if name not in _ALLREDUCE:
        raise choice_error("algorithm", name, ALGORITHMS)
    check_allreduce_topology(name, topology)
    check_allreduce_options(K, eta_s, reset)
    return _ALLREDUCE[name](comm, RingAllReduce(comm, topology, rows, cols), generators,
                            base_lr=base_lr, eta_s=eta_s, K=K, reset=reset)


__all__ = ["ADPSGD", "GradientTracking", "D2", "GUT", "QGGUTm", "RelaySGD", "algorithm_class", "optimizer_kind_for", "AllReduceAlgorithm", "PSGD", "Marsit", "SignSGD", "EFSignSGD", "make_allreduce_algorithm",
           "ALLREDUCE_ALGORITHMS", "ALGORITHMS", "GossipAlgorithm", "DPSGD", "DeepSqueeze", "ChocoSGD", "make_algorithm", "resolve_push_sum", "GOSSIP_ALGORITHMS"]
