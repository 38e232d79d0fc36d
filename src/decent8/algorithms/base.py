"""The one algorithm interface (SPEC §3) and the gossip family's base class.

:class:`Algorithm` is what the engine, the run's builder, the cost model and the reports
talk to, for gossip and all-reduce algorithms alike: its state and buffers, its update
for one training step (:meth:`Algorithm.update`: the local direction, the local step and
the communication), its consensus round, its defaults, display name, options and what
the cost model needs. One algorithm is one subclass in one file, registered by name
(:mod:`.registry`) or named by import path (``algorithm=pkg.module:Class``;
docs/extending.md).

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

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

import torch

from ..comm.base import Communicator
from ..compression.base import Compressor
from ..errors import ConfigError
from ..state_spec import NONE, StateSpec
from ..compression.identity import IdentityCompressor


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
    #: constructor keyword -> value, read from the config by :attr:`Algorithm.options`
    options: dict[str, Any] = field(default_factory=dict)
    #: ``algorithm.params`` as given (checked against :attr:`Algorithm.params` by :meth:`Algorithm.from_context`)
    params: dict[str, Any] = field(default_factory=dict)
    #: the compressor the models travel with when it differs from ``compressor``, the one the
    #: algorithm is checked against (D-PSGD at precision=int8: an identity algorithm, 8-bit models)
    wire_compressor: Compressor | None = None


class Algorithm(ABC):
    """State and update rule of one algorithm for the k local nodes (the one interface).

    Class attributes say what the rest of decent8 needs to know; the engine only calls
    :meth:`update`, :meth:`consensus_step`, :meth:`debiased` and the state methods."""

    name: ClassVar[str] = "abstract"
    #: the name in reports and figures (empty: :attr:`name`)
    display_name: ClassVar[str] = ""
    #: "gossip" or "ring all-reduce" (``decent8 list`` groups by it)
    family: ClassVar[str] = "gossip"
    #: options filled when the config leaves them null (dotted option -> value)
    defaults: ClassVar[Mapping[str, object]] = {"optimizer.momentum": 0.9}
    #: the typed options the constructor takes: keyword -> dotted config option (validated
    #: once by the config's schema and :func:`decent8.train.validate.check_plain`)
    options: ClassVar[Mapping[str, str]] = {}
    #: an algorithm's own options that decent8's config does not have: name -> default, set as
    #: ``algorithm.params.NAME=value`` and read as ``self.params[NAME]`` (the default's type is
    #: the allowed type; :meth:`resolve_params`, docs/extending.md)
    params: Mapping[str, object] = {}
    #: model-sized buffers of the published algorithm (the paper's accounting, Table 10 of
    #: ``decent8 cost``); what decent8 allocates is :attr:`state`
    state_buffers: ClassVar[int] = 0
    #: the ``[k, d]`` tensors :meth:`init_state` allocates and one update's temporaries
    #: (:class:`~decent8.state_spec.StateSpec`; read by the memory model without building)
    state: ClassVar[StateSpec] = NONE
    #: model-sized messages each node sends per training step (gradient tracking: 2)
    messages_per_step: ClassVar[int] = 1
    #: False when quasi-global momentum (optimizer.kind=qgm) is not defined for the algorithm
    allows_qgm: ClassVar[bool] = True
    #: the local optimizer the algorithm is defined with (QG-GUTm: "qgm"), or None for any
    optimizer_kind: ClassVar[str | None] = None
    #: True: the algorithm fixes what travels (:attr:`wire_format`); the compression group is unused
    own_wire_format: ClassVar[bool] = False
    #: False where simulated message loss (faults.*) has no meaning (a ring all-reduce)
    tolerates_faults: ClassVar[bool] = True
    #: how the run loop trains it: "synchronous" (engine steps, all nodes every round) or
    #: "event_driven" (simulated events, train/async_gossip.py; simulator only)
    runner: ClassVar[str] = "synchronous"
    #: with top-k compression, γ = scale·(1 − ratio) (null: 5, or 2 under push-sum; Deep-Squeeze: 1)
    topk_gamma_scale: ClassVar[float | None] = None

    generators: Sequence[torch.Generator] | None = None
    push_sum: bool = False
    omega: torch.Tensor | None = None

    # --- what the builder asks ------------------------------------------------------
    @classmethod
    def label(cls) -> str:
        """The display name (reports, figures)."""
        return cls.display_name or cls.name

    @classmethod
    @abstractmethod
    def create(cls, ctx: AlgorithmContext) -> "Algorithm":
        """The algorithm for one run (one-line ConfigError for settings it cannot run with)."""

    @classmethod
    def from_context(cls, ctx: AlgorithmContext) -> "Algorithm":
        """The one way an algorithm is built (``decent8 train``, the Python API, tests,
        benchmarks): :meth:`create`, then its checked ``params`` and its wire compressor."""
        algorithm = cls.create(ctx)
        algorithm.params = cls.resolve_params(ctx.params)
        if ctx.wire_compressor is not None:
            algorithm.compressor = ctx.wire_compressor
        return algorithm

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
    def resolve_push_sum(cls, push_sum: str | bool | None, doubly_stochastic: bool) -> bool:
        """``auto`` → push-sum exactly when W is not doubly stochastic."""
        push_sum = str(push_sum).lower() if push_sum is not None else "auto"
        if push_sum == "auto":
            return not doubly_stochastic
        if push_sum == "true":
            return True
        if push_sum == "false":
            return False
        raise ConfigError("algorithm.push_sum", f"must be auto, true or false, got {push_sum!r}")

    @classmethod
    def optimizer_for(cls, kind: str) -> str:
        """The local optimizer the algorithm runs with: its own or ``kind``."""
        if cls.optimizer_kind is not None:
            return cls.optimizer_kind
        if kind == "qgm" and not cls.allows_qgm:
            raise ConfigError("optimizer.kind", f"quasi-global momentum is not defined for '{cls.name}' (it tracks "
                                                "its own direction); use optimizer.kind=local, or algorithm=qg_gutm")
        return kind

    @classmethod
    def default_gamma(cls, compressor: "type[Compressor]", ratio: float, push_sum: bool) -> float:
        """γ when ``algorithm.gamma`` is null, before the QGM factor (the reasons:
        :func:`decent8.train.build.default_gamma`): what the compressor class suggests from its
        declared contraction (:meth:`~decent8.compression.Compressor.suggest_gamma`), with the
        algorithm's scale for a biased sparsifier (:attr:`topk_gamma_scale`; null: 5, or 2
        under push-sum). A compressor that declares none: one line asking for ``algorithm.gamma``."""
        scale = cls.topk_gamma_scale if cls.topk_gamma_scale is not None else 2.0 if push_sum else 5.0
        gamma = compressor.suggest_gamma(scale, ratio)
        if gamma is None:
            raise ConfigError("algorithm.gamma", f"the compressor {compressor.__name__} declares no contraction to "
                                                 f"suggest a consensus step from; set algorithm.gamma (e.g. 0.1), or "
                                                 f"define suggest_gamma on the class")
        return float(gamma)

    @classmethod
    def state_spec(cls, compressor: "type[Compressor] | None" = None) -> StateSpec:
        """The declared per-node state (:attr:`state`) with the run's compressor class
        (algorithms whose state depends on it override this: Choco, gradient tracking)."""
        return cls.state

    @classmethod
    def topology_gamma(cls, topology) -> float | None:
        """A γ the algorithm derives from W when ``algorithm.gamma`` is null (recorded in the
        run's config), or None to use :meth:`default_gamma`."""
        return None

    @classmethod
    def int8_wire(cls, compression: str) -> bool:
        """True when at ``precision=int8`` the uncompressed models it mixes may travel as
        8-bit values (D-PSGD, SGP); a one-line error for algorithms whose exact recursion
        has no 8-bit wire; False where the compressor already decides (compressed algorithms)."""
        return False

    @classmethod
    def run_label(cls, compression: str, sep: str = "/") -> str:
        """``algorithm/compression``, or the name alone where the algorithm fixes its wire format."""
        return cls.name if cls.own_wire_format else f"{cls.name}{sep}{compression}"

    @classmethod
    def headline(cls, summary: Mapping[str, Any]) -> str:
        """What ran, for the one-line report after training."""
        return (f"{summary['algorithm']} ({'push-sum, ' if summary['push_sum'] else ''}γ={summary['gamma']:g}) · "
                f"{summary['compression']}")

    def divergence_knobs(self, consensus: bool) -> list[str]:
        """The settings a diverged run should lower (``consensus``: in the final rounds)."""
        return ["algorithm.gamma"] if consensus else ["optimizer.lr", "algorithm.gamma"]

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

    def wire_label(self, compression: str) -> str:
        """What travels, as the run's summary names it."""
        return compression


class GossipAlgorithm(Algorithm):
    """State and update rule of one decentralized algorithm for the k local nodes."""

    """A gossip algorithm: local step, then compress, exchange and mix models (SPEC §3)."""

    #: False for algorithms that never compress (D-PSGD)
    supports_compression: ClassVar[bool] = True
    #: True: always push-sum (SGP, Sparse-Push, Choco-push); False: never; None: ``algorithm.push_sum``
    forced_push_sum: ClassVar[bool | None] = None
    #: True: the gossip can mix through a robust rule over per-edge messages (``byzantine.*``; D-PSGD)
    robust_mixing: ClassVar[bool] = False
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
        if not cls.supports_compression and not ctx.compressor.is_identity:
            raise ConfigError(
                "compression", f"algorithm '{cls.name}' sends uncompressed models; use compression=identity "
                "or a compressed algorithm (deepsqueeze, choco, sparse_push, choco_push, gt)"
            )
        if not ctx.gamma > 0:
            raise ConfigError("algorithm.gamma", f"consensus step size must be > 0, got {ctx.gamma}")
        return cls(ctx.comm, ctx.compressor, gamma=ctx.gamma, push_sum=ctx.push_sum, generators=ctx.generators,
                   **ctx.options)

    @classmethod
    def resolve_push_sum(cls, push_sum: str | bool | None, doubly_stochastic: bool) -> bool:
        if cls.forced_push_sum:
            if str(push_sum).lower() == "false":
                raise ConfigError("algorithm.push_sum", f"'{cls.name}' is a push-sum algorithm; push_sum must be "
                                                        "auto or true")
            return True
        return super().resolve_push_sum(push_sum, doubly_stochastic)

    @classmethod
    def int8_wire(cls, compression: str) -> bool:
        if cls.supports_compression or str(compression).strip().lower() not in ("identity", "none"):
            return False
        raise ConfigError("precision", f"algorithm '{cls.name}' exchanges exact fp32 models and has no 8-bit wire "
                                       f"format; use precision=fp32 or compression.wire=fp32 (fp32 messages), or "
                                       f"algorithm=dpsgd (8-bit models on the wire) or a compressed algorithm "
                                       f"(choco, deepsqueeze)")

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
