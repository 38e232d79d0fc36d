"""The built-in topologies (SPEC §1), each a function registered by name.

A topology function takes the node count ``n`` and its keyword options (those of the
topology group it names: ``weights``, ``seed``, ``rows`` …, and any other keyword argument
set as ``topology.<kwarg>=value``) and returns a validated :class:`Topology`, or a boolean
adjacency ``[n, n]`` (``A[i, j]``: j → i) or a list of them (one per round), whose W
:func:`~decent8.topology.make_topology` builds from ``topology.weights``.
"""
from __future__ import annotations

import math
import os

import numpy as np

from decent8.errors import ConfigError
from decent8.registry import topologies
from decent8.topology import graphs
from decent8.topology.mixing import check_strongly_connected
from decent8.topology.topology import RandomTopology, Topology


def _graph(name: str, adjacency, weights: str, description: str | None = None) -> Topology:
    """A static or one-peer graph: connectivity first (its message wins), then W."""
    phases = adjacency if isinstance(adjacency, list) else [adjacency]
    check_strongly_connected(np.logical_or.reduce(phases), option="topology")
    topo = Topology(name, adjacency, weights, description=description or name)
    topo.validate()
    return topo


def _degree(name: str, degree: object, n: int, integer: bool) -> object:
    """``topology.degree`` checked: a finite number; an expected degree in (0, n − 1] or an integer k in [1, n − 1]."""
    if isinstance(degree, bool) or not isinstance(degree, (int, float, np.integer, np.floating)):
        raise ConfigError("topology.degree", f"must be a number, got {degree!r}")
    if not math.isfinite(float(degree)):
        raise ConfigError("topology.degree", f"must be a finite number, got {degree!r}")
    if not integer and not 0 < degree <= n - 1:
        raise ConfigError("topology.degree", f"{name} needs an expected degree in (0, nodes-1 = {n - 1}], got {degree:g}")
    if integer and (degree != int(degree) or not 1 <= degree <= n - 1):
        raise ConfigError("topology.degree", f"{name} needs an integer degree k in [1, nodes-1 = {n - 1}], got {degree:g}")
    return degree


@topologies.register("directed_ring", order=0)
def directed_ring(n: int, weights: str = "uniform") -> Topology:
    return _graph("directed_ring", graphs.directed_ring(n), weights)


@topologies.register("ring", order=1)
def ring(n: int, weights: str = "uniform") -> Topology:
    return _graph("ring", graphs.ring(n), weights)


@topologies.register("torus", order=2)
def torus(n: int, weights: str = "uniform", rows: int | None = None, cols: int | None = None) -> Topology:
    r, c = graphs.torus_shape(n, rows, cols)
    return _graph("torus", graphs.torus(n, r, c), weights, f"torus {r}x{c}")


@topologies.register("complete", order=3)
def complete(n: int, weights: str = "uniform") -> Topology:
    return _graph("complete", graphs.complete(n), weights)


@topologies.register("exponential", order=4)
def exponential(n: int, weights: str = "uniform", time_varying: bool = False) -> Topology:
    if time_varying:
        return _graph("exponential", graphs.one_peer_exponential(n), weights, "exponential (one peer per step)")
    return _graph("exponential", graphs.exponential(n), weights)


@topologies.register("star", order=5)
def star(n: int, weights: str = "uniform") -> Topology:
    return _graph("star", graphs.star(n), weights)


@topologies.register("edge_list", order=6)
def edge_list(n: int, weights: str = "uniform", path: str | None = None, undirected: bool = False) -> Topology:
    if path is None:
        raise ConfigError("topology.path", "topology=edge_list needs a file, e.g. topology.path=graph.txt")
    adjacency = graphs.edge_list(path, n, undirected=undirected)
    return _graph("edge_list", adjacency, weights, f"edge_list {os.fspath(path)}" + (" (undirected)" if undirected else ""))


@topologies.register("hypercube", order=7)
def hypercube(n: int, weights: str = "uniform", time_varying: bool = False) -> Topology:
    if time_varying:
        return _graph("hypercube", graphs.one_peer_hypercube(n), weights, "hypercube (one dimension per round)")
    return _graph("hypercube", graphs.hypercube(n), weights)


@topologies.register("base", order=8)
def base(n: int, weights: str = "uniform", degree: float = 1) -> Topology:
    """The Base-(k+1) graph (Takezawa et al. 2023): its own doubly stochastic W per round."""
    k = int(_degree("base", degree, n, integer=True))
    if weights != "uniform":
        raise ConfigError("topology.weights", "topology=base defines its own weights (Takezawa et al. 2023); "
                                              "leave topology.weights=uniform")
    Ws = graphs.base_graph(n, k)
    topo = Topology("base", [W > 0 for W in Ws], "uniform", description=f"base-{k + 1} graph ({len(Ws)} rounds to exact consensus)",
                    mixing=Ws)
    topo.validate()
    return topo


def _random(name: str, n: int, weights: str, seed: int, degree: object, description: str) -> Topology:
    topo = RandomTopology(name, n, weights, seed=seed, degree=degree, description=description)
    topo.validate()
    return topo


@topologies.register("erdos_renyi", order=9, random=True)
def erdos_renyi(n: int, weights: str = "uniform", seed: int = 0, degree: float = 4.0) -> Topology:
    _degree("erdos_renyi", degree, n, integer=False)
    return _random("erdos_renyi", n, weights, seed, degree, f"erdos_renyi (expected degree {degree:g}, new graph every round)")


@topologies.register("random_matching", order=10, random=True)
def random_matching(n: int, weights: str = "uniform", seed: int = 0) -> Topology:
    return _random("random_matching", n, weights, seed, None, "random_matching (new matching every round)")


@topologies.register("random_k_out", order=11, random=True)
def random_k_out(n: int, weights: str = "uniform", seed: int = 0, degree: float = 1) -> Topology:
    _degree("random_k_out", degree, n, integer=True)
    return _random("random_k_out", n, weights, seed, degree, f"random_k_out (k = {int(degree)}, new graph every round)")


__all__ = ["directed_ring", "ring", "torus", "complete", "exponential", "star", "edge_list", "hypercube", "base",
           "erdos_renyi", "random_matching", "random_k_out"]
