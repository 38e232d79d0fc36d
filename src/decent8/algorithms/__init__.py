"""Decentralized algorithms, one per file (SPEC §3), and their factory."""
from __future__ import annotations

from typing import Sequence

import torch

from ..comm.base import Communicator
from ..compression.base import Compressor
from ..errors import ConfigError, choice_error
from .base import GossipAlgorithm
from .choco import ChocoSGD
from .deepsqueeze import DeepSqueeze
from .dpsgd import DPSGD

#: name -> (class, forced push-sum or None)
_ALGORITHMS: dict[str, tuple[type[GossipAlgorithm], bool | None]] = {
    "dpsgd": (DPSGD, None),
    "sgp": (DPSGD, True),
    "deepsqueeze": (DeepSqueeze, None),
    "sparse_push": (DeepSqueeze, True),
    "choco": (ChocoSGD, None),
    "choco_push": (ChocoSGD, True),
}
GOSSIP_ALGORITHMS: tuple[str, ...] = tuple(_ALGORITHMS)


def resolve_push_sum(name: str, push_sum: str | bool, doubly_stochastic: bool) -> bool:
    """``auto`` → push-sum exactly when W is not doubly stochastic."""
    if name not in _ALGORITHMS:
        raise choice_error("algorithm", name, GOSSIP_ALGORITHMS)
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


def make_algorithm(
    name: str,
    comm: Communicator,
    compressor: Compressor,
    gamma: float,
    push_sum: bool,
    generators: Sequence[torch.Generator] | None = None,
) -> GossipAlgorithm:
    if name not in _ALGORITHMS:
        raise choice_error("algorithm", name, GOSSIP_ALGORITHMS)
    cls = _ALGORITHMS[name][0]
    if not cls.supports_compression and not compressor.is_identity:
        raise ConfigError(
            "compression", f"algorithm '{name}' sends uncompressed models; use compression=identity "
            "or a compressed algorithm (deepsqueeze, choco, sparse_push, choco_push)"
        )
    if not gamma > 0:
        raise ConfigError("algorithm.gamma", f"consensus step size must be > 0, got {gamma}")
    return cls(comm, compressor, gamma=gamma, push_sum=push_sum, generators=generators)


__all__ = ["GossipAlgorithm", "DPSGD", "DeepSqueeze", "ChocoSGD", "make_algorithm", "resolve_push_sum", "GOSSIP_ALGORITHMS"]
