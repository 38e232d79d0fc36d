"""All-reduce algorithms: workers aggregate their *updates* over a ring or 2-D torus
all-reduce instead of gossiping models (docs/algorithms.md §10).

:meth:`AllReduceAlgorithm.update` takes the local update
``u_i = lr · d_i`` (d = the configured optimizer's direction — plain SGD with
``optimizer.momentum=0``, which is the paper's η_l·∇f — at the de-biased parameters)
and subtracts what :meth:`AllReduceAlgorithm.aggregate` returns, the *applied update*,
identical on every worker; so all models stay equal (consensus distance 0) and the
consensus rounds at the end of training do nothing (:meth:`consensus_step`). The
compression group of the config is not used: the algorithm fixes its wire format
(:attr:`~.info.AlgorithmInfo.wire_format` of its record; the family's: :data:`~.info.ALLREDUCE`).
η_l is ``optimizer.lr`` with its schedule; the sign step η_s is
``allreduce.eta_s`` at ``optimizer.lr`` and follows the same schedule
(η_s(t) = allreduce.eta_s · lr(t) / optimizer.lr) — a choice of this implementation.

The collective itself lives in :mod:`decent8.collectives.ring`; every algorithm of
this family is one :class:`~decent8.collectives.ring.Codec` (what travels per hop)
plus its update rule.
"""
from __future__ import annotations

from abc import abstractmethod
from typing import Sequence

import torch

from ..collectives.ring import RingAllReduce, check_allreduce_topology
from ..comm.base import Communicator
from ..compression.base import Compressor
from ..errors import ConfigError, choice_error
from ..state_spec import StateSpec
from .base import Algorithm, AlgorithmContext
from .info import ALLREDUCE, declare_family


class AllReduceAlgorithm(Algorithm):
    """State and update rule of one all-reduce algorithm for the k local nodes (its
    constructor takes the ``allreduce`` option group and η_l = optimizer.lr, resolved
    before the algorithm is built: :data:`~.info.ALLREDUCE`'s ``options``)."""

    #: no state; one step holds lr·d and the aggregated update
    state = StateSpec(step=8)

    def __init__(
        self,
        comm: Communicator,
        allreduce: RingAllReduce,
        generators: Sequence[torch.Generator] | None = None,
        base_lr: float = 0.1,
        eta_s: float = 1e-3,
        K: int = 0,
        reset: str = "apply",
    ) -> None:
        self.comm = comm
        self.allreduce = allreduce
        self.generators = generators
        self.base_lr = float(base_lr)
        self.eta_s = float(eta_s)
        self.K = int(K)
        self.reset = reset
        self.dim = 0

    @classmethod
    def create(cls, ctx: AlgorithmContext) -> "AllReduceAlgorithm":
        check_allreduce_topology(cls.name, ctx.topology)
        return cls(ctx.comm, RingAllReduce(ctx.comm, ctx.topology, ctx.rows, ctx.cols), ctx.generators, **ctx.options)

    # --- state ----------------------------------------------------------------
    def init_state(self, x: torch.Tensor) -> None:
        self.dim = x.shape[1]

    # --- the update -------------------------------------------------------------
    def update(self, z: torch.Tensor, direction: torch.Tensor, x: torch.Tensor, lr: float, step: int) -> None:
        """x ← x − :meth:`aggregate` (lr·d): the applied update, identical on every worker."""
        z.sub_(self.aggregate(direction.mul(lr), step, lr))

    def consensus_step(self, z: torch.Tensor, step: int) -> None:
        """Nothing to do: the models are already identical."""

    def step(self, z: torch.Tensor, step: int) -> None:
        """A gossip-only round: nothing to do (:meth:`consensus_step`)."""

    @abstractmethod
    def aggregate(self, update: torch.Tensor, step: int, lr: float) -> torch.Tensor:
        """The applied update ``[k, d]`` (identical rows) for local updates ``update[k, d]``."""

    def sign_step(self, lr: float) -> float:
        """η_s at learning rate ``lr``: ``eta_s · lr / optimizer.lr``."""
        return self.eta_s * lr / self.base_lr

    def message_bytes(self, compressor: Compressor | None = None) -> float:
        """Bytes each worker sends in one regular (compressed) step (its own wire format)."""
        return self.allreduce.bytes_per_worker(self.allreduce.padded(self.dim, bits=False), 4.0)


declare_family(AllReduceAlgorithm, ALLREDUCE)


#: what Marsit-K's full-precision step applies (see :mod:`.marsit`)
RESETS = ("apply", "drop")


def check_allreduce_options(K: int, eta_s: float, reset: str = "apply") -> None:
    """Range checks of the ``allreduce`` group (one-line errors)."""
    if isinstance(K, bool) or not isinstance(K, int) or K < 0:
        raise ConfigError("allreduce.K", f"full-precision all-reduce every K steps needs an integer K >= 0 (0 = never), got {K}")
    if not eta_s > 0:
        raise ConfigError("allreduce.eta_s", f"sign step size must be > 0, got {eta_s}")
    if reset not in RESETS:
        raise choice_error("allreduce.reset", reset, RESETS)
