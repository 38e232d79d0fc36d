"""The ``byzantine`` group of a run: which nodes lie, how, and the robust rule honest nodes
mix with (decent8.byzantine; docs/algorithms.md, "Byzantine nodes").

:func:`make_byzantine` checks the options against the run (one line for what is not
defined) and returns a :class:`ByzantineRun`, or None for a run without Byzantine
settings. Robust mixing needs the individual neighbour messages
(:meth:`~decent8.comm.base.Communicator.exchange_messages`): the simulator and node-block
ranks (``backend=distributed`` with ``dist.ranks``) have it, and both run the same
:class:`~decent8.byzantine.RobustGossip`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..algorithms import algorithm_info
from ..byzantine import RobustGossip, make_aggregator, make_attack, pick_nodes
from ..byzantine.aggregators import Aggregator
from ..byzantine.setup import byzantine_in_degrees
from ..comm.base import Communicator
from ..comm.mixing_plan import MixingPlan
from ..errors import ConfigError
from ..plugins import is_import_path
from ..seeding import derive_seed


@dataclass
class ByzantineRun:
    """What a run with Byzantine settings holds (recorded in summary.json by :meth:`record`)."""

    nodes: list[int]
    attack: str
    aggregator: str
    b: int
    #: the per-edge mixing (None: plain gossip, e.g. a label-flip attack with ``mean``)
    robust: RobustGossip | None
    flips_labels: bool

    def honest_mask(self, local_nodes: list[int], device: torch.device) -> torch.Tensor:
        """``[k]`` bool: which local nodes are honest."""
        bad = set(self.nodes)
        return torch.as_tensor([i not in bad for i in local_nodes], dtype=torch.bool, device=device)

    def record(self) -> dict:
        return {"nodes": list(self.nodes), "attack": self.attack, "aggregator": self.aggregator, "b": self.b}


def make_byzantine(cfg, comm: Communicator, topology, push_sum: bool, algorithm_type, faults_active: bool
                   ) -> ByzantineRun | None:
    """The run's :class:`ByzantineRun` (module docstring), or None when ``byzantine.*`` is at
    its defaults."""
    z = cfg.byzantine
    attack_name, rule_name = str(z.attack), str(z.aggregator)
    nodes = pick_nodes(z.nodes, cfg.nodes, cfg.seed)
    if not nodes and attack_name == "none" and rule_name == "mean":
        return None
    attack = make_attack(attack_name, z.scale, derive_seed(cfg.seed, "byzantine.attack"))
    flips = bool(getattr(attack, "flips_labels", False))
    per_edge = rule_name != "mean" or (attack_name != "none" and not (flips and not is_import_path(attack_name)))
    if not nodes and rule_name == "mean":
        per_edge = False    # nobody lies and the rule is plain gossip: the run is the plain algorithm's
    opt = "byzantine.aggregator" if rule_name != "mean" else "byzantine.attack"
    if algorithm_type.runner == "event_driven":
        raise ConfigError(opt, f"'{cfg.algorithm.name}' gossips asynchronously; Byzantine nodes run with the "
                               f"synchronous gossip algorithms (algorithm=dpsgd)")
    plan = MixingPlan.of_topology(topology, 0, torch.device("cpu"))
    table = plan.neighbours()
    degrees, byz_in = byzantine_in_degrees(table.src, table.mask, nodes, cfg.nodes)
    b = int(z.b) if z.b is not None else max(byz_in, default=0)
    if b < 0:
        raise ConfigError("byzantine.b", f"must be ≥ 0 (null: the most Byzantine in-neighbours of an honest node), got {b}")
    rule = make_aggregator(rule_name, b, z.clip_tau)
    robust = None
    if per_edge:
        if not algorithm_info(cfg.algorithm.name).robust_mixing:
            raise ConfigError(opt, f"attacks on messages and robust rules act on the models D-PSGD gossips and on "
                                   f"Choco-SGD's public copies of them; '{cfg.algorithm.name}' mixes what no rule is "
                                   f"defined on (e.g. Deep-Squeeze's compressed models): use algorithm=dpsgd or choco")
        if push_sum:
            raise ConfigError(opt, "robust rules mix models, not push-sum numerators and weights; use a doubly "
                                   "stochastic W (topology.weights=metropolis or an undirected regular graph) "
                                   "and algorithm.push_sum=false")
        if getattr(topology, "time_varying", False):
            raise ConfigError(opt, f"the graph's assumptions are checked once: topology {topology.name!r} changes "
                                   f"every round; use a static topology")
        if faults_active:
            raise ConfigError(opt, "faults change each round's in-neighbours; run Byzantine nodes without faults.*")
        if cfg.algorithm.consensus == "exact":
            raise ConfigError("algorithm.consensus", "exact rounds average without the attack and the robust rule; "
                                                     "use algorithm.consensus=compressed")
        if not comm.has_exchange_messages:
            raise ConfigError(opt, f"{type(comm).__name__} does not hand over per-edge messages; use "
                                   f"backend=simulator, or backend=distributed with dist.ranks=R (node blocks)")
        check = getattr(rule, "check", None)
        honest = [i for i in range(cfg.nodes) if i not in set(nodes)]
        if getattr(type(rule), "check", None) is Aggregator.check:   # a built-in rule names the node by its id
            why = check(degrees, b, honest)
        else:
            why = check(degrees, b) if callable(check) else None
        if why is not None:
            raise ConfigError(opt, f"{why} on topology {topology.name!r}; use a denser topology, fewer Byzantine "
                                   f"nodes or another aggregator")
        robust = RobustGossip(nodes, cfg.nodes, attack, rule)
    return ByzantineRun(nodes, attack_name, rule_name, b, robust, flips)


def edge_slots(run: ByzantineRun | None, topology, local_nodes: list[int]) -> int:
    """The in-edge slots m each of the ``local_nodes`` holds in a run that mixes per edge
    (``[k, m, d]`` messages, Choco-SGD's per-edge public copies): their largest in-degree
    (:func:`~decent8.byzantine.messages.neighbour_table` pads to it); 0 without per-edge mixing."""
    if run is None or run.robust is None:
        return 0
    degree = topology.in_degree(0)
    return int(max((int(degree[i]) for i in local_nodes), default=0))


__all__ = ["ByzantineRun", "edge_slots", "make_byzantine"]
