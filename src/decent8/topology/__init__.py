"""Gossip topologies: graphs, mixing matrices W, validation and spectral gap (SPEC §1).

Conventions: ``adj[i, j]`` is True iff node i receives from node j (edge j → i, i ≠ j;
self-loops are implicit); ``W[i, j]`` is the weight node i gives to node j's value.
Start with :func:`make_topology`.
"""
from __future__ import annotations

from decent8.registry import topologies
from decent8.topology.graphs import (
    base_graph,
    hypercube,
    one_peer_hypercube,
    complete,
    directed_ring,
    edge_list,
    exponential,
    one_peer_exponential,
    one_peer_exponential_period,
    ring,
    star,
    torus,
    torus_shape,
)
from decent8.topology.mixing import (
    check_stochastic,
    check_strongly_connected,
    is_doubly_stochastic,
    is_symmetric,
    metropolis_weights,
    second_eigenvalue_modulus,
    spectral_gap,
    uniform_weights,
)
from decent8.topology.topology import RANDOM_TOPOLOGIES, WEIGHTS, RandomTopology, Topology, make_topology, topology_from_config, \
    topology_options



def __getattr__(name: str):
    """``TOPOLOGIES``: the registered names, read when asked (a topology registered later is in it)."""
    if name == "TOPOLOGIES":
        return topologies.names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "TOPOLOGIES",
    "RANDOM_TOPOLOGIES",
    "RandomTopology",
    "base_graph",
    "hypercube",
    "one_peer_hypercube",
    "WEIGHTS",
    "Topology",
    "make_topology",
    "topology_from_config",
    "topology_options",
    "directed_ring",
    "ring",
    "torus",
    "torus_shape",
    "complete",
    "exponential",
    "star",
    "edge_list",
    "one_peer_exponential",
    "one_peer_exponential_period",
    "uniform_weights",
    "metropolis_weights",
    "check_strongly_connected",
    "check_stochastic",
    "is_doubly_stochastic",
    "is_symmetric",
    "second_eigenvalue_modulus",
    "spectral_gap",
]
