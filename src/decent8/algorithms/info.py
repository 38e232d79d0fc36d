"""What decent8 knows about an algorithm beside its update rule: one frozen record per algorithm.

An algorithm class (:class:`~.base.Algorithm`) is state and update rule only: constructor
hyper-parameters, the declared state, ``update``, ``consensus_step``, ``state_dict``,
message bytes. The facts the rest of decent8 reads without running it — the name in
reports, its family, the defaults it suggests, which config options its constructor takes,
the published buffer count of the cost tables, which local optimizers, wires, faults and
robust rules it allows, how γ is suggested, what a diverged run should lower — are an
:class:`AlgorithmInfo`, registered with the class::

    @algorithms.register("sgp", order=3, info=replace(DPSGD_INFO, display_name="SGP", forced_push_sum=True))
    class SGP(DPSGD): ...

(timm's shape: the registry holds a model's configuration beside its constructor, the
class stays the computation). Readers ask :func:`decent8.algorithms.algorithm_info` by
name. A class registered without a record, or named by import path, gets its family's
record (:data:`GOSSIP` or :data:`ALLREDUCE`, through :func:`declare_family`).

Torch-free.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from ..errors import ConfigError

#: the two families (``decent8 list`` groups by them)
FAMILIES = ("gossip", "ring all-reduce")


@dataclass(frozen=True)
class AlgorithmInfo:
    """The presentation, cost and default-suggestion facts of one algorithm (module docstring)."""

    #: the name in reports and figures (empty: the registered name)
    display_name: str = ""
    #: "gossip" or "ring all-reduce"
    family: str = "gossip"
    #: options filled when the config leaves them null (dotted option -> value)
    defaults: Mapping[str, object] = field(default_factory=lambda: {"optimizer.momentum": 0.9})
    #: constructor keywords read from other option groups: keyword -> dotted config option
    #: (AD-PSGD: ``{"seed": "seed"}``); the algorithm group's own are its other keyword arguments
    #: (``algorithm.mu``: :meth:`~.base.Algorithm.constructor_options`)
    options: Mapping[str, str] = field(default_factory=dict)
    #: model-sized buffers of the published algorithm (the paper's accounting, Table 10 of
    #: ``decent8 cost``); what decent8 allocates is the class's declared ``state``
    state_buffers: int = 0
    #: False where the algorithm never compresses (D-PSGD): ``compression`` must be identity
    supports_compression: bool = True
    #: True: always push-sum (SGP, Sparse-Push, Choco-push); False: never; None: ``algorithm.push_sum``
    forced_push_sum: bool | None = None
    #: False when quasi-global momentum (optimizer.kind=qgm) is not defined for the algorithm
    allows_qgm: bool = True
    #: the local optimizer the algorithm is defined with (QG-GUTm: "qgm"), or None for any
    optimizer_kind: str | None = None
    #: what travels when the algorithm fixes it (all-reduce: "fp32", "sign-bits"); None: the compression group
    wire_format: str | None = None
    #: True: at precision=int8 the uncompressed models it mixes travel as 8-bit values (D-PSGD, SGP)
    int8_models: bool = False
    #: False where simulated message loss (faults.*) has no meaning (a ring all-reduce)
    tolerates_faults: bool = True
    #: True: the gossip can mix through a robust rule over per-edge messages (``byzantine.*``)
    robust_mixing: bool = False
    #: with top-k compression, γ = scale·(1 − ratio) (null: 5, or 2 under push-sum; Deep-Squeeze: 1)
    topk_gamma_scale: float | None = None
    #: γ from the topology when ``algorithm.gamma`` is null (D²: from λ_min(W)), or None
    gamma_from_topology: Callable[[Any], float] | None = None
    #: True where the update is a sign step η_s (a diverged run names allreduce.eta_s)
    sign_step_size: bool = False

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ConfigError("algorithm", f"AlgorithmInfo.family must be one of {', '.join(FAMILIES)}, "
                                           f"got {self.family!r}")

    # --- presentation ---------------------------------------------------------------
    @property
    def own_wire_format(self) -> bool:
        """True when the algorithm fixes what travels (the compression group is unused)."""
        return self.wire_format is not None

    def label(self, name: str) -> str:
        """The display name (reports, figures); ``name``: the registered one."""
        return self.display_name or name

    def run_label(self, name: str, compression: str, sep: str = "/") -> str:
        """``algorithm/compression``, or the name alone where the algorithm fixes its wire format."""
        return name if self.own_wire_format else f"{name}{sep}{compression}"

    def wire_label(self, compression: str) -> str:
        """What travels, as the run's summary names it."""
        return self.wire_format if self.wire_format is not None else compression

    def headline(self, summary: Mapping[str, Any]) -> str:
        """What ran, for the one-line report after training."""
        if self.family == "ring all-reduce":
            return f"{summary['algorithm']} (ring all-reduce) · {summary['compression']}"
        return (f"{summary['algorithm']} ({'push-sum, ' if summary['push_sum'] else ''}γ={summary['gamma']:g}) · "
                f"{summary['compression']}")

    def divergence_knobs(self, consensus: bool) -> list[str]:
        """The settings a diverged run should lower (``consensus``: in the final rounds)."""
        if self.family == "ring all-reduce":
            return ["optimizer.lr", "allreduce.eta_s"] if self.sign_step_size else ["optimizer.lr"]
        return ["algorithm.gamma"] if consensus else ["optimizer.lr", "algorithm.gamma"]

    # --- what a run may combine it with ---------------------------------------------
    def optimizer_for(self, name: str, kind: str) -> str:
        """The local optimizer algorithm ``name`` runs with: its own or ``kind``."""
        if self.optimizer_kind is not None:
            return self.optimizer_kind
        if kind == "qgm" and not self.allows_qgm:
            raise ConfigError("optimizer.kind", f"quasi-global momentum is not defined for '{name}' (it tracks "
                                                "its own direction); use optimizer.kind=local, or algorithm=qg_gutm")
        return kind

    def check_compression(self, name: str, compressor_is_identity: bool) -> None:
        """One line when an algorithm that never compresses is given a compressor."""
        if not self.supports_compression and not compressor_is_identity:
            raise ConfigError(
                "compression", f"algorithm '{name}' sends uncompressed models; use compression=identity "
                "or a compressed algorithm (deepsqueeze, choco, sparse_push, choco_push, gt)"
            )

    def resolve_push_sum(self, name: str, push_sum: str | bool | None, doubly_stochastic: bool) -> bool:
        """``auto`` → push-sum exactly when W is not doubly stochastic (the algorithm may force it)."""
        given = str(push_sum).lower() if push_sum is not None else "auto"
        if self.family == "ring all-reduce":
            if given == "true":
                raise ConfigError("algorithm.push_sum", f"'{name}' is an all-reduce algorithm; push_sum must be auto "
                                                        "or false")
            return False
        if self.forced_push_sum:
            if given == "false":
                raise ConfigError("algorithm.push_sum", f"'{name}' is a push-sum algorithm; push_sum must be "
                                                        "auto or true")
            return True
        if given == "auto":
            return not doubly_stochastic
        if given == "true":
            return True
        if given == "false":
            return False
        raise ConfigError("algorithm.push_sum", f"must be auto, true or false, got {given!r}")

    def int8_wire(self, name: str, compression: str) -> bool:
        """True when at ``precision=int8`` the uncompressed models it mixes travel as 8-bit
        values (:attr:`int8_models`); a one-line error for a gossip algorithm that never
        compresses and whose exact recursion has no 8-bit wire; False where the compressor
        (or the algorithm's own wire format) already decides."""
        identity = str(compression).strip().lower() in ("identity", "none")
        if self.int8_models:
            return identity
        if self.family != "gossip" or self.supports_compression or not identity:
            return False
        raise ConfigError("precision", f"algorithm '{name}' exchanges exact fp32 models and has no 8-bit wire "
                                       f"format; use precision=fp32 or compression.wire=fp32 (fp32 messages), or "
                                       f"algorithm=dpsgd (8-bit models on the wire) or a compressed algorithm "
                                       f"(choco, deepsqueeze)")

    # --- suggestions ----------------------------------------------------------------
    def default_gamma(self, compressor: type, ratio: float, push_sum: bool) -> float:
        """γ when ``algorithm.gamma`` is null, before the QGM factor (the reasons:
        :func:`decent8.train.resolve.default_gamma`): what the compressor class suggests from
        its declared contraction (``suggest_gamma``), with the algorithm's scale for a biased
        sparsifier (:attr:`topk_gamma_scale`; null: 5, or 2 under push-sum). A compressor
        that declares none: one line asking for ``algorithm.gamma``."""
        scale = self.topk_gamma_scale if self.topk_gamma_scale is not None else 2.0 if push_sum else 5.0
        gamma = compressor.suggest_gamma(scale, ratio)  # type: ignore[attr-defined]
        if gamma is None:
            raise ConfigError("algorithm.gamma", f"the compressor {compressor.__name__} declares no contraction to "
                                                 f"suggest a consensus step from; set algorithm.gamma (e.g. 0.1), or "
                                                 f"define suggest_gamma on the class")
        return float(gamma)

    def topology_gamma(self, topology: Any) -> float | None:
        """A γ derived from W when ``algorithm.gamma`` is null (recorded in the run's
        config), or None to use :meth:`default_gamma`."""
        return None if self.gamma_from_topology is None else self.gamma_from_topology(topology)


#: the gossip family's record (a gossip algorithm registered without one)
GOSSIP = AlgorithmInfo()
#: the ring all-reduce family's record: its own wire, the ``allreduce`` option group, no faults
ALLREDUCE = AlgorithmInfo(family="ring all-reduce", wire_format="fp32", tolerates_faults=False,
                          options={"base_lr": "optimizer.lr", "eta_s": "allreduce.eta_s", "K": "allreduce.K",
                                   "reset": "allreduce.reset"})

#: base class -> its family's record (:func:`declare_family`), most specific first
_FAMILY_OF: list[tuple[type, AlgorithmInfo]] = []


def declare_family(base: type, info: AlgorithmInfo) -> type:
    """Make ``info`` the record of every subclass of ``base`` that is registered without one."""
    _FAMILY_OF.insert(0, (base, info))
    return base


def family_info(cls: type) -> AlgorithmInfo:
    """The record of the family ``cls`` belongs to (:data:`GOSSIP` when it declares none)."""
    for base, info in _FAMILY_OF:
        if issubclass(cls, base):
            return info
    return GOSSIP


__all__ = ["AlgorithmInfo", "FAMILIES", "GOSSIP", "ALLREDUCE", "declare_family", "family_info", "replace"]
