"""Sparse topologies above 4,096 nodes (SPEC §1; issue 32): the same W as the dense path,
mixing invariants at 10,000 nodes, the network clock over edge lists, one-line refusals."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import decent8.topology.graphs as graphs
from decent8.comm.simulator import SimulatorCommunicator
from decent8.errors import ConfigError
from decent8.timing.clock import gossip_time, gossip_time_edges, ring_hops_time
from decent8.timing.network import NetworkModel
from decent8.topology import make_topology
from decent8.topology.sparse import SPARSE_TOPOLOGIES, SparseTopology

CASES = [("ring", {}, 40), ("directed_ring", {}, 40), ("torus", {}, 48), ("torus", {"rows": 4}, 48),
         ("exponential", {}, 40), ("exponential", {"time_varying": True}, 40), ("hypercube", {}, 32),
         ("hypercube", {"time_varying": True}, 32), ("ring", {"weights": "metropolis"}, 30),
         ("torus", {"weights": "metropolis"}, 30), ("hypercube", {"weights": "metropolis"}, 16)]


def _sparse(monkeypatch, name: str, n: int, **kw) -> SparseTopology:
    """The sparse build of a small topology (the dense limit lowered for this test)."""
    monkeypatch.setattr(graphs, "DENSE_MAX_NODES", 8)
    topo = make_topology(name, n, **kw)
    monkeypatch.undo()
    assert isinstance(topo, SparseTopology)
    return topo


@pytest.mark.parametrize("name,kw,n", CASES)
def test_sparse_build_equals_the_dense_one(monkeypatch, name, kw, n):
    dense = make_topology(name, n, **kw)
    sparse = _sparse(monkeypatch, name, n, **kw)
    assert sparse.period == dense.period
    for t in range(dense.period):
        assert np.array_equal(sparse.weights_sparse(t).toarray(), dense.weights_np(t))  # bit for bit
        assert np.array_equal(sparse.out_degree(t), dense.out_degree(t))
        assert np.array_equal(sparse.in_degree(t), dense.in_degree(t))
        assert sparse.in_neighbors(3, t) == dense.in_neighbors(3, t)
        assert sparse.out_neighbors(3, t) == dense.out_neighbors(3, t)
    assert sparse.spectral_gap == pytest.approx(dense.spectral_gap, rel=1e-9, abs=1e-12)
    assert sparse.is_doubly_stochastic == dense.is_doubly_stochastic
    assert sparse.is_undirected == dense.is_undirected
    assert sparse.is_regular == dense.is_regular
    assert sparse.mean_out_degree() == dense.mean_out_degree()


@pytest.mark.parametrize("name,kw,n", CASES[:6])
def test_simulator_mixing_and_edge_slots_equal_the_dense_path(monkeypatch, name, kw, n):
    dense = SimulatorCommunicator(make_topology(name, n, **kw))
    sparse = SimulatorCommunicator(_sparse(monkeypatch, name, n, **kw))
    x = torch.randn(n, 7, generator=torch.Generator().manual_seed(0))
    for step in range(3):
        for dtype in (torch.float32, torch.float64):
            assert torch.equal(sparse.weights(step, dtype) @ x.to(dtype), dense.weights(step, dtype) @ x.to(dtype))
        for (d1, s1, w1), (d2, s2, w2) in zip(sparse.edge_slots(step), dense.edge_slots(step), strict=True):
            assert torch.equal(d1, d2) and torch.equal(s1, s2) and torch.equal(w1, w2)
        sparse._count(sparse.plan(step), 10)
        dense._count(dense.plan(step), 10)
    assert torch.equal(sparse.bytes_sent, dense.bytes_sent)


@pytest.mark.parametrize("name,kw,n", [("ring", {}, 10_000), ("torus", {}, 10_000), ("exponential", {}, 10_000),
                                       ("hypercube", {"time_varying": True}, 8192),
                                       ("directed_ring", {}, 5_000)])
def test_many_nodes_build_and_one_mixing_step(name, kw, n):
    topo = make_topology(name, n, **kw)
    assert isinstance(topo, SparseTopology) and topo.n == n
    W = topo.weights_sparse(0)
    assert W.nnz <= n * 16                                       # no dense n × n anywhere
    assert np.allclose(np.asarray(W.sum(axis=0)).ravel(), 1.0, atol=1e-12)   # columns (push-sum)
    assert np.allclose(np.asarray(W.sum(axis=1)).ravel(), 1.0, atol=1e-12)   # rows (regular graphs)
    assert topo.is_doubly_stochastic
    comm = SimulatorCommunicator(topo)
    x = torch.randn(n, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y = comm.weights(0, torch.float64) @ x
    assert torch.allclose(y.mean(dim=0), x.mean(dim=0), atol=1e-12)    # consensus keeps the average
    assert (y - y.mean(0)).norm() < (x - x.mean(0)).norm()              # and contracts the rest
    assert 0.0 < topo.spectral_gap <= 1.0
    assert comm.edge_slots(0)[0][0].numel() == n


def test_ring_spectral_gap_at_10000_nodes_is_the_closed_form():
    n = 10_000
    gap = make_topology("ring", n).spectral_gap            # W = (I + P + P⁻¹)/3
    assert gap == pytest.approx(2.0 / 3.0 * (1.0 - np.cos(2.0 * np.pi / n)), rel=1e-6)


def test_dense_only_topologies_and_features_are_refused_in_one_line():
    with pytest.raises(ConfigError) as e:
        make_topology("complete", 5000)
    msg = str(e.value)
    assert "topology=complete" in msg and "4096" in msg and "topology=ring" in msg and "\n" not in msg
    with pytest.raises(ConfigError, match="4096"):
        graphs.ring(5000)                                   # the dense builder itself
    with pytest.raises(ConfigError, match="65,536"):
        make_topology("ring", 65_537)
    topo = make_topology("ring", 5000)
    with pytest.raises(ConfigError, match="dense n × n"):
        topo.weights_np(0)
    with pytest.raises(ConfigError, match="metropolis needs an undirected graph"):
        make_topology("exponential", 5000, weights="metropolis")
    assert set(SPARSE_TOPOLOGIES) == {"ring", "directed_ring", "torus", "exponential", "hypercube"}


def test_network_clock_over_edges_equals_the_dense_clock():
    rng = np.random.default_rng(0)
    n = 12
    topo = make_topology("exponential", n)
    net = NetworkModel.uniform(n, 1e-3, 100.0)
    net.alpha[:] = rng.uniform(1e-4, 1e-2, size=(n, n))
    compute, b = rng.uniform(0, 0.1, n), rng.uniform(1e3, 1e5, n)
    dst, src = np.nonzero(topo.adjacency(0))
    for overlap in (False, True):
        dense = gossip_time(compute, b, topo.adjacency(0), np.ones((n, n), bool), np.ones(n, bool), net,
                            net.jitter(0), overlap)
        edges = gossip_time_edges(compute, b, dst, src, np.ones(n, bool), net, net.jitter(0), overlap)
        assert edges == dense


def test_network_model_above_the_dense_limit_is_one_value_per_link():
    net = NetworkModel.uniform(10_000, 1e-3, 100.0)
    assert not net.per_link and net.n == 10_000 and net.alpha.ndim == 0
    a, b = net.links(np.array([1, 2]), np.array([0, 1]))
    assert a.tolist() == [1e-3, 1e-3] and b.tolist() == [100.0 * 125_000] * 2
    assert ring_hops_time([(1000.0, None)], net, net.jitter(0)) == pytest.approx(1e-3 + 1000.0 / 12.5e6)
    assert "α 0.001 s" in net.describe()
    with pytest.raises(ConfigError, match="network.links"):
        net.load_links("links.csv")
