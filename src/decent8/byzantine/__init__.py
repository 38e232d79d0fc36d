"""Byzantine nodes and robust gossip: attacks on what is sent, per edge, and robust mixing
rules over the individual neighbour messages (docs/algorithms.md, "Byzantine nodes")."""
from .aggregators import AGGREGATORS, Aggregator
from .attacks import ATTACKS, Attack
from .messages import NeighbourMessages
from .setup import RobustGossip, make_aggregator, make_attack, pick_nodes

__all__ = ["AGGREGATORS", "ATTACKS", "Aggregator", "Attack", "NeighbourMessages", "RobustGossip", "make_aggregator",
           "make_attack", "pick_nodes"]
