"""The one algorithm interface (SPEC §3) and the gossip family's base class.

:class:`Algorithm` is what the engine and the run's builder talk to, for gossip and
all-reduce algorithms alike: its hyper-parameters, its declared state and buffers, its
update for one training step (:meth:`Algorithm.update`: the local direction, the local
step and the communication), its consensus round and its message bytes. Its display
name, defaults, options and cost facts are its registered record
(:class:`~.info.AlgorithmInfo`, read by the CLI, the cost model and the reports). One
algorithm is one subclass in one file, registered by name (:mod:`.registry`) or named
by import path (``algorithm=pkg.module:Class``; docs/extending.md).

Gossip algorithms (:class:`GossipAlgorithm`) are steps 3–5 of the paper's Algorithm 1.
Every iteration each node (1) computes a gradient, (2) takes a local step
x½ = x − lr·d, then the algorithm (3) compresses, (4) exchanges with neighbours and
(5) applies the gossip update x ← x½ + γ·r. Subclasses define what is compressed and
r. All tensors have a leading node axis ``[k, d]``; the algorithm talks to neighbours
only through a :class:`~decent8.comm.Communicator`, so the same code runs in the
simulator (k = n) and on a torch.distributed rank (k = 1).

Push-sum (SPEC §3): with ``push_sum=True`` every node also keeps a scalar weight ω
(starts at 1) mixed exactly like the parameters, ω ← ω + γ(Σ_j W_ij ω_j − ω_i); the
stored parameters are the numerator z and the model used for gradients and
evaluation is the de-biased z / ω. For column-stochastic W both Σ_i z_i and Σ_i ω_i
are preserved, so z_i / ω_i converges to the true average on any strongly connected
directed graph. On regular graphs with uniform weights ω stays 1.
"""
from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

import torch

from ..comm.base import Communicator
from ..compression.base import Compressor
from ..config import SHARED_OPTIONS
from ..errors import ConfigError, did_you_mean
from ..registry import algorithms as registered, check_options, keyword_options
from ..state_spec import NONE, StateSpec
from ..compression.identity import IdentityCompressor
from .info import GOSSIP, AlgorithmInfo, declare_family
from .registry import info_of


#: constructor arguments the builder passes an algorithm itself (from :class:`AlgorithmContext`),
#: not options of the algorithm group
BUILDER_ARGUMENTS = frozenset({"comm", "compressor", "gamma", "push_sum", "generators", "allreduce"})


@dataclass
class AlgorithmContext:
    """What :meth:`Algorithm.create` builds an algorithm from (resolved by the run's builder)."""

    comm: Communicator
    compressor: Compressor
    gamma: float
    push_sum: bool
    generators: Sequence[torch.Generator] | None
    #: topology.name / rows / cols (all-reduce algorithms run a ring or torus)
    topology: str = "directed_ring"
    rows: int | None = None
    cols: int | None = None
    #: constructor keyword -> value, read from the config by :attr:`.info.AlgorithmInfo.options`
    options: dict[str, Any] = field(default_factory=dict)
    #: ``algorithm.params`` as given (checked against :attr:`Algorithm.params` by :meth:`Algorithm.from_context`)
    params: dict[str, Any] = field(default_factory=dict)
    #: the algorithm's registered facts (None: looked up from the class, :func:`.registry.info_of`)
    info: AlgorithmInfo | None = None
    #: the compressor the models travel with when it differs from ``compressor``, the one the
    #: algorithm is checked against (D-PSGD at precision=int8: an identity algorithm, 8-bit models)
    wire_compressor: Compressor | None = None


class Algorithm(ABC):
    """State and update rule of one algorithm for the k local nodes (the one interface).

    The class holds the constructor's hyper-parameters, the declared state (:attr:`state`),
    the update and the consensus round, ``state_dict`` and the message bytes; what the rest
    of decent8 reads about an algorithm without running it is its registered record
    (:class:`~.info.AlgorithmInfo`). The engine only calls :meth:`update`,
    :meth:`consensus_step`, :meth:`debiased` and the state methods."""

    name: ClassVar[str] = "abstract"
    #: an algorithm's own options that are not constructor keyword arguments: name -> default, set
    #: as ``algorithm.NAME=value`` and read as ``self.params[NAME]`` (the default's type is the
    #: allowed type; :meth:`resolve_params`, docs/extending.md)
    params: Mapping[str, object] = {}
    #: the ``[k, d]`` tensors :meth:`init_state` allocates and one update's temporaries
    #: (:class:`~decent8.state_spec.StateSpec`; read by the memory model without building)
    state: ClassVar[StateSpec] = NONE
    #: model-sized messages each node sends per training step (gradient tracking: 2)
    messages_per_step: ClassVar[int] = 1
    #: how the run loop trains it: "synchronous" (engine steps, all nodes every round:
    #: :meth:`update`) or "event_driven" (simulated events, train/async_gossip.py, which calls
    #: the class's per-event update; simulator only)
    runner: ClassVar[str] = "synchronous"

    generators: Sequence[torch.Generator] | None = None
    push_sum: bool = False
    omega: torch.Tensor | None = None

    # --- construction ---------------------------------------------------------------
    @classmethod
    @abstractmethod
    def create(cls, ctx: AlgorithmContext) -> "Algorithm":
        """The algorithm for one run (one-line ConfigError for settings it cannot run with)."""

    @classmethod
    def from_context(cls, ctx: AlgorithmContext) -> "Algorithm":
        """The one way an algorithm is built (``decent8 train``, the Python API, tests,
        benchmarks): :meth:`create`, then its checked ``params`` and its wire compressor."""
        if ctx.info is None:
            ctx.info = info_of(cls)
        keywords, declared = cls.split_params(ctx.params)
        ctx.options = {**ctx.options, **keywords}
        algorithm = cls.create(ctx)
        algorithm.params = cls.resolve_params(declared)
        if ctx.wire_compressor is not None:
            algorithm.compressor = ctx.wire_compressor
        return algorithm

    @classmethod
    def constructor_options(cls) -> dict[str, inspect.Parameter]:
        """The constructor's own keyword arguments, set as ``algorithm.<kwarg>=value`` (gut:
        ``mu``): its named keyword arguments without those the builder passes itself
        (:data:`BUILDER_ARGUMENTS`) and those its record reads from other option groups
        (:attr:`.info.AlgorithmInfo.options`: the all-reduce's ``eta_s`` …)."""
        read = info_of(cls).options
        return {k: p for k, p in keyword_options(cls).items() if k not in BUILDER_ARGUMENTS and k not in read}

    @classmethod
    def split_params(cls, given: Mapping[str, object] | None) -> tuple[dict[str, object], dict[str, object]]:
        """``algorithm.params`` as (the constructor's keyword arguments, the declared :attr:`params`
        given). The first are checked against the signature's type hints
        (:func:`decent8.registry.check_options`) and hold every keyword argument of
        :meth:`constructor_options`, the ones not given at their defaults (what the resolved
        config records); the second are checked by :meth:`resolve_params`. A name of
        ``decent8.config.SHARED_OPTIONS["algorithm"]`` (``mu``) at its "not set" value (null, as
        every older config.yaml holds it) is dropped; any other name the class neither takes
        nor declares is one line naming the ones it does."""
        takes = cls.constructor_options()
        unset = SHARED_OPTIONS["algorithm"]
        keywords: dict[str, object] = {}
        declared: dict[str, object] = {}
        for key, value in (given or {}).items():
            if key in unset and value is unset[key] and key not in cls.params:
                continue
            if key in takes:
                keywords[key] = value
            elif key in cls.params:
                declared[key] = value
            else:
                allowed = [*takes, *cls.params]
                users = ""
                if key in unset:   # a former field of the group: name the algorithms that take it
                    names = [n for n, e in registered.items() if key in e.obj.constructor_options()]
                    users = f" ({key} is an option of algorithm={', '.join(names)})" if names else ""
                raise ConfigError(f"algorithm.{key}", f"'{cls.name}' has no parameter {key!r}; its parameters: "
                                                      f"{', '.join(allowed) or 'none'}{users}"
                                                      f"{did_you_mean(key, allowed)}")
        keywords = check_options(cls, keywords, "algorithm", f"algorithm={cls.name}")
        out: dict[str, object] = {}
        for key, param in takes.items():   # in the signature's order (config.yaml)
            if key in keywords:
                out[key] = keywords[key]
            elif param.default is param.empty:
                raise ConfigError(f"algorithm.{key}", f"required by algorithm={cls.name}; set algorithm.{key}=VALUE")
            elif param.default is None or isinstance(param.default, (bool, int, float, str)):
                out[key] = param.default
        return out, declared

    @classmethod
    def resolve_params(cls, given: Mapping[str, object] | None) -> dict[str, object]:
        """The declared :attr:`params` with ``algorithm.params`` applied, each checked against its
        default's type (an int is a float too); a one-line ConfigError names the option."""
        declared = dict(cls.params)
        resolved = dict(declared)
        for key, value in (given or {}).items():
            option = f"algorithm.params.{key}"
            if key not in declared:
                allowed = ", ".join(sorted(declared)) or "none"
                raise ConfigError(option, f"'{cls.name}' has no parameter {key!r}; its parameters: {allowed}")
            default = declared[key]
            if isinstance(default, bool) or default is None or isinstance(default, str):
                ok = default is None or isinstance(value, type(default))
            elif isinstance(default, int):
                ok = isinstance(value, int) and not isinstance(value, bool)
            elif isinstance(default, float):
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
                value = float(value) if ok else value  # type: ignore[arg-type]
            else:
                ok = isinstance(value, type(default))
            if not ok:
                raise ConfigError(option, f"must be {type(default).__name__} like its default {default!r}, "
                                          f"got {value!r:.60}")
            resolved[key] = value
        return resolved

    @classmethod
    def state_spec(cls, compressor: "type[Compressor] | None" = None) -> StateSpec:
        """The declared per-node state (:attr:`state`) with the run's compressor class
        (algorithms whose state depends on it override this: Choco, gradient tracking)."""
        return cls.state

    # --- state ----------------------------------------------------------------
    @abstractmethod
    def init_state(self, x: torch.Tensor) -> None:
        """Allocate buffers for parameters ``x[k, d]`` (called once before training)."""

    def buffers(self) -> dict[str, torch.Tensor]:
        """Named per-node state tensors (checkpointed; all ``[k, ...]``)."""
        return {}

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {name: t.detach().clone() for name, t in self.buffers().items() if t is not None}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for name, t in self.buffers().items():
            if t is not None and name in state:
                t.copy_(state[name])

    # --- model view -----------------------------------------------------------
    def debiased(self, z: torch.Tensor) -> torch.Tensor:
        """The model each node evaluates (z itself unless push-sum)."""
        return z

    def rebias(self, z: torch.Tensor, x: torch.Tensor) -> None:
        """Set the stored parameters so that ``debiased(z) == x``."""
        z.copy_(x)

    # --- the update -------------------------------------------------------------
    @abstractmethod
    def update(self, z: torch.Tensor, direction: torch.Tensor, x: torch.Tensor, lr: float, step: int) -> None:
        """One training step in place: ``z`` (the stored parameters) moves by the local step
        along the optimizer's ``direction`` (computed at the de-biased ``x``) and the
        algorithm's communication."""

    @abstractmethod
    def consensus_step(self, z: torch.Tensor, step: int) -> None:
        """A communication-only round (no gradient) as run at the end of training."""

    def exact_consensus_step(self, z: torch.Tensor, step: int) -> None:
        """A final round with ``algorithm.consensus=exact``: uncompressed averaging with the
        run's W. Here: :meth:`consensus_step`, for algorithms whose rounds already are
        (ring all-reduce: nothing to do; AD-PSGD: exact pairwise averages)."""
        self.consensus_step(z, step)

    @abstractmethod
    def message_bytes(self, compressor: Compressor) -> float:
        """Bytes each node sends in one training step (``compressor``: the run's)."""


class GossipAlgorithm(Algorithm):
    """A gossip algorithm: local step, then compress, exchange and mix models (SPEC §3);
    state and update rule for the k local nodes."""

    #: the robust mixing of a run with Byzantine settings (decent8.byzantine.RobustGossip), set by the builder
    robust = None

    def __init__(
        self,
        comm: Communicator,
        compressor: Compressor,
        gamma: float = 1.0,
        push_sum: bool = False,
        generators: Sequence[torch.Generator] | None = None,
    ) -> None:
        self.comm = comm
        self.compressor = compressor
        self.gamma = float(gamma)
        self.push_sum = bool(push_sum)
        self.generators = generators
        self.omega: torch.Tensor | None = None

    @classmethod
    def create(cls, ctx: AlgorithmContext) -> "GossipAlgorithm":
        (ctx.info or info_of(cls)).check_compression(cls.name, ctx.compressor.is_identity)
        if not ctx.gamma > 0:
            raise ConfigError("algorithm.gamma", f"consensus step size must be > 0, got {ctx.gamma}")
        return cls(ctx.comm, ctx.compressor, gamma=ctx.gamma, push_sum=ctx.push_sum, generators=ctx.generators,
                   **ctx.options)

    def message_bytes(self, compressor: Compressor) -> float:
        return compressor.nbytes() * self.messages_per_step

    # --- state ----------------------------------------------------------------
    def init_state(self, x: torch.Tensor) -> None:
        """Allocate buffers for parameters ``x[k, d]`` (called once before training)."""
        if self.push_sum:
            self.omega = torch.ones(x.shape[0], 1, device=x.device, dtype=torch.float32)

    def buffers(self) -> dict[str, torch.Tensor]:
        """Named per-node state tensors (checkpointed; all ``[k, ...]``)."""
        return {"omega": self.omega} if self.omega is not None else {}

    # --- model view -----------------------------------------------------------
    def debiased(self, z: torch.Tensor) -> torch.Tensor:
        """The model each node evaluates: z itself, or z / ω under push-sum."""
        if self.omega is None:
            return z
        return z / self.omega

    def rebias(self, z: torch.Tensor, x: torch.Tensor) -> None:
        """Set the stored numerator so that ``debiased(z) == x`` (z ← x·ω)."""
        if self.omega is None:
            z.copy_(x)
        else:
            torch.mul(x, self.omega, out=z)

    # --- the update -----------------------------------------------------------
    def update(self, z: torch.Tensor, direction: torch.Tensor, x: torch.Tensor, lr: float, step: int) -> None:
        """x½ = x − lr·d (d: :meth:`local_direction`), then the gossip :meth:`step`."""
        z.sub_(self.local_direction(direction, x, lr, step), alpha=lr)
        self.step(z, step)

    def local_direction(self, direction: torch.Tensor, x: torch.Tensor, lr: float, step: int) -> torch.Tensor:
        """The direction the local step x½ = x − lr·d uses, given the optimizer's ``direction``
        at the (de-biased) model ``x`` before the step. Gossip algorithms use it unchanged;
        tracking algorithms (gradient tracking, GUT) replace it by their tracker and may
        communicate here. Called once per training step, before :meth:`step`."""
        return direction

    def consensus_step(self, z: torch.Tensor, step: int) -> None:
        """A gossip-only round (no gradient, no :meth:`local_direction`) at the end of
        training: :meth:`step` unless the algorithm says otherwise."""
        self.step(z, step)

    def exact_consensus_step(self, z: torch.Tensor, step: int) -> None:
        """A final round of exact averaging with the same W (``algorithm.consensus=exact``):
        x_i ← Σ_j W_ij x_j, the dense fp32 models on the wire (γ = 1, nothing compressed,
        the algorithm's state untouched). Under push-sum the numerators and weights mix
        alike, z_i ← Σ_j W_ij z_j, ω_i ← Σ_j W_ij ω_j, and the model is z / ω. On a
        connected graph with doubly stochastic W, ‖x − x̄‖ shrinks at least by |λ₂(W)|
        per round; column-stochastic W preserves Σ_i z_i (SPEC §3, consensus-only rounds)."""
        dense = IdentityCompressor(self.compressor.layout)
        z.copy_(self.comm.exchange(dense.encode(z), dense, step))
        if self.omega is not None:
            self.omega.copy_(self.comm.mix_scalars(self.omega, step))

    def step(self, z: torch.Tensor, step: int) -> None:
        """Gossip update in place: ``z`` holds x½ on entry and x_{t+1} on exit."""
        self._gossip(z, step)
        if self.omega is not None:
            mixed = self.comm.mix_scalars(self.omega, step)
            self.omega.add_(mixed - self.omega, alpha=self.gamma)

    @abstractmethod
    def _gossip(self, z: torch.Tensor, step: int) -> None:
        """Compress, exchange and update the parameters in place."""

    def _encode(self, x: torch.Tensor):
        return self.compressor.encode(x, self.generators)


declare_family(GossipAlgorithm, GOSSIP)
