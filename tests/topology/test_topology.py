"""Tests for decent8.topology (SPEC §1)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from decent8.errors import ConfigError
from decent8.topology import (
    TOPOLOGIES,
    Topology,
    check_stochastic,
    check_strongly_connected,
    edge_list,
    is_doubly_stochastic,
    make_topology,
    metropolis_weights,
    spectral_gap,
    torus,
    uniform_weights,
)


def shift(n: int, s: int = 1) -> np.ndarray:
    """P with P[i, i - s] = 1: node i receives from i - s."""
    P = np.zeros((n, n))
    P[np.arange(n), (np.arange(n) - s) % n] = 1.0
    return P


# ------------------------------------------------------------------ directed ring
def test_directed_ring_weights_are_half_identity_plus_shift():
    topo = make_topology("directed_ring", 8)
    W = topo.weights_np()
    np.testing.assert_allclose(W, (np.eye(8) + shift(8)) / 2, atol=0)
    assert topo.in_neighbors(3) == [2] and topo.out_neighbors(3) == [4]
    assert topo.out_degree().tolist() == [1] * 8
    assert topo.is_doubly_stochastic and topo.is_regular
    t = topo.weights(5)
    assert t.dtype == torch.float32 and t.shape == (8, 8)
    assert topo.weights(0) is t  # cached, static: every step is phase 0


def test_directed_ring_spectral_gap_is_one_minus_cos_pi_over_n():
    topo = make_topology("directed_ring", 8)
    assert abs(topo.spectral_gap - (1 - math.cos(math.pi / 8))) < 1e-9
    assert abs(spectral_gap(topo.weights_np()) - (1 - math.cos(math.pi / 8))) < 1e-9


def test_paper_remark_directed_ring_16_vs_undirected_ring_32():
    # The paper says a 16-node directed ring "has the same spectral gap as a 32-node
    # undirected ring". Numerically, with this library's weights (W = (I+P)/2 and
    # W = (I+P+P^T)/3), that is not exact:
    #   gap(directed 16) = 1 - cos(pi/16)                  = 0.019215
    #   gap(ring 32)     = 1 - (1 + 2 cos(2 pi/32))/3      = (2/3)(1 - cos(pi/16)) = 0.012810
    # so the directed ring's gap is exactly 1.5x the undirected ring's. What *is* equal:
    # the eigenvalue moduli |cos(pi k/16)| of the directed ring are the eigenvalues
    # cos(2 pi k/32) of the non-lazy 32-cycle walk (P + P^T)/2 — presumably the remark.
    d16 = make_topology("directed_ring", 16).spectral_gap
    u32 = make_topology("ring", 32).spectral_gap
    assert abs(d16 - (1 - math.cos(math.pi / 16))) < 1e-9
    assert abs(u32 - (2 / 3) * (1 - math.cos(math.pi / 16))) < 1e-9
    assert abs(d16 - 1.5 * u32) < 1e-9
    assert abs(d16 - u32) > 1e-3
    walk32 = (shift(32) + shift(32).T) / 2
    top = np.sort(np.linalg.eigvalsh(walk32))[::-1]
    assert abs((1 - top[1]) - d16) < 1e-9


# ------------------------------------------------------------------ undirected
def test_ring_weights_one_third():
    topo = make_topology("ring", 8)
    W = topo.weights_np()
    np.testing.assert_allclose(W, (np.eye(8) + shift(8) + shift(8).T) / 3, atol=1e-15)
    assert topo.in_neighbors(0) == [1, 7] and topo.out_neighbors(0) == [1, 7]


def test_ring_of_two_nodes_dedups():
    W = make_topology("ring", 2).weights_np()
    np.testing.assert_allclose(W, np.full((2, 2), 0.5))


def test_torus_4x4_four_distinct_neighbours_weight_one_fifth():
    topo = make_topology("torus", 16)  # default: most square, 4x4
    assert topo.description == "torus 4x4"
    W = topo.weights_np()
    for i in range(16):
        nbrs = topo.in_neighbors(i)
        assert len(nbrs) == 4 and len(set(nbrs)) == 4 and i not in nbrs
        assert topo.out_neighbors(i) == nbrs
        np.testing.assert_allclose(W[i, nbrs], 0.2)
        assert W[i, i] == pytest.approx(0.2)
    # node 5 = (1, 1): neighbours (0,1)=1, (2,1)=9, (1,0)=4, (1,2)=6
    assert topo.in_neighbors(5) == [1, 4, 6, 9]
    assert topo.is_doubly_stochastic and topo.is_regular


def test_torus_2x4_dedup_keeps_w_stochastic():
    topo = make_topology("torus", 8, rows=2, cols=4)
    # rows = 2: up and down neighbour coincide -> 3 distinct neighbours each
    assert all(len(topo.in_neighbors(i)) == 3 for i in range(8))
    W = topo.weights_np()
    np.testing.assert_allclose(W[W > 0], 0.25)
    assert topo.is_doubly_stochastic
    check_stochastic(W, "doubly")
    assert torus(8).shape == (8, 8)  # default 2x4 too


def test_torus_shape_errors():
    with pytest.raises(ConfigError, match=r"topology\.rows.*3\*4 = 12.*16"):
        make_topology("torus", 16, rows=3, cols=4)
    with pytest.raises(ConfigError, match=r"topology\.rows"):
        make_topology("torus", 16, rows=3)
    with pytest.raises(ConfigError, match=r"topology\.rows: only used with topology=torus"):
        make_topology("ring", 16, rows=4)


def test_metropolis_doubly_stochastic_on_star():
    topo = make_topology("star", 6, weights="metropolis")
    W = topo.weights_np()
    assert is_doubly_stochastic(W) and topo.is_doubly_stochastic
    np.testing.assert_allclose(W, W.T)
    np.testing.assert_allclose(W[0, 1:], 1 / 6)  # 1/(1 + max(5, 1))
    np.testing.assert_allclose(np.diag(W)[1:], 5 / 6)
    topo.validate_for(push_sum=False)
    topo.validate_for(push_sum=True)


def test_uniform_star_is_not_doubly_stochastic_and_says_how_to_fix():
    topo = make_topology("star", 6)
    assert not topo.is_doubly_stochastic
    topo.validate_for(push_sum=True)
    with pytest.raises(ConfigError) as e:
        topo.validate_for(push_sum=False)
    msg = str(e.value)
    assert e.value.option == "topology"
    assert "row 0 sums to 2.6667" in msg and "metropolis" in msg and "push_sum=true" in msg
    assert "\n" not in msg


# ------------------------------------------------------------------ edge lists
def test_uniform_weights_irregular_directed_edge_list(tmp_path):
    f = tmp_path / "g.txt"
    f.write_text("# a directed graph\n0 1\n1 2\n2 0\n0 2   # extra edge\n\n2 3\n3 0\n")
    topo = make_topology("edge_list", 4, path=str(f))
    W = topo.weights_np()
    assert topo.out_degree().tolist() == [2, 1, 2, 1]
    check_stochastic(W, "column")
    np.testing.assert_allclose(W.sum(axis=0), 1.0)
    assert not np.allclose(W.sum(axis=1), 1.0)
    with pytest.raises(ConfigError, match="row"):
        check_stochastic(W, "row")
    assert not topo.is_doubly_stochastic and not topo.is_regular
    assert W[2, 0] == pytest.approx(1 / 3) and W[0, 3] == pytest.approx(1 / 2)
    with pytest.raises(ConfigError, match="directed and irregular"):
        topo.validate_for(push_sum=False)


def test_edge_list_undirected_flag(tmp_path):
    f = tmp_path / "g.txt"
    f.write_text("0 1\n1 2\n")
    adj = edge_list(f, 3, undirected=True)
    assert (adj == adj.T).all() and adj.sum() == 4
    topo = make_topology("edge_list", 3, weights="metropolis", path=str(f), undirected=True)
    assert topo.is_doubly_stochastic


def test_edge_list_bad_line_reports_line_number(tmp_path):
    f = tmp_path / "g.txt"
    f.write_text("# header\n0 1\n1 2 3\n")
    with pytest.raises(ConfigError, match=r"topology\.path: .*line 3"):
        make_topology("edge_list", 4, path=str(f))
    f.write_text("0 1\nx 2\n")
    with pytest.raises(ConfigError, match="line 2"):
        make_topology("edge_list", 4, path=str(f))
    f.write_text("0 1\n1 0\n\n1 9\n")
    with pytest.raises(ConfigError, match=r"line 4: node 9 is out of range"):
        make_topology("edge_list", 4, path=str(f))
    with pytest.raises(ConfigError, match=r"topology\.path: .*not found"):
        make_topology("edge_list", 4, path=str(tmp_path / "missing.txt"))
    with pytest.raises(ConfigError, match=r"topology\.path"):
        make_topology("edge_list", 4)


# ------------------------------------------------------------------ validation
def test_not_strongly_connected_names_node(tmp_path):
    f = tmp_path / "g.txt"
    f.write_text("0 1\n1 0\n1 2\n")  # 2 receives but never sends back; 3 is isolated
    with pytest.raises(ConfigError) as e:
        make_topology("edge_list", 4, path=str(f))
    assert e.value.option == "topology"
    assert "node 3 cannot be reached from node 0" in str(e.value)
    adj = np.zeros((3, 3), bool)
    adj[1, 0] = adj[0, 1] = adj[2, 1] = True  # 1 -> 2 only
    with pytest.raises(ConfigError, match="node 2 cannot reach node 0; the graph must be strongly connected"):
        check_strongly_connected(adj)


def test_check_stochastic_messages():
    W = np.array([[0.5, 0.25], [0.5, 0.5]])
    with pytest.raises(ConfigError, match="column 1 of W sums to 0.75"):
        check_stochastic(W, "column", why="push-sum needs every column to sum to 1")
    with pytest.raises(ConfigError, match="negative"):
        check_stochastic(np.array([[1.5, 0.0], [-0.5, 1.0]]), "column")


def test_metropolis_on_directed_graph_raises():
    with pytest.raises(ConfigError) as e:
        make_topology("directed_ring", 8, weights="metropolis")
    assert e.value.option == "topology.weights"
    with pytest.raises(ConfigError, match="topology.weights"):
        metropolis_weights(make_topology("exponential", 8).adjacency())


def test_bad_names_and_sizes():
    with pytest.raises(ConfigError, match="nodes: need at least 2 nodes, got 1"):
        make_topology("ring", 1)
    with pytest.raises(ConfigError) as e:
        make_topology("moebius", 8)
    assert e.value.option == "topology"
    for name in TOPOLOGIES:
        assert name in str(e.value)
    with pytest.raises(ConfigError, match=r"topology\.weights.*metropolis.*uniform"):
        make_topology("ring", 8, weights="equal")
    with pytest.raises(ConfigError, match=r"topology\.time_varying"):
        make_topology("ring", 8, time_varying=True)


# ------------------------------------------------------------------ exponential
def test_static_exponential_graph():
    topo = make_topology("exponential", 8)
    assert topo.out_neighbors(0) == [1, 2, 4] and topo.in_neighbors(0) == [4, 6, 7]
    np.testing.assert_allclose(topo.weights_np()[topo.weights_np() > 0], 0.25)
    assert topo.is_doubly_stochastic


def test_time_varying_exponential_exact_averaging_over_one_period():
    topo = make_topology("exponential", 8, time_varying=True)
    assert topo.time_varying and topo.period == 3
    for t in range(3):
        assert topo.out_neighbors(0, step=t) == [2**t]
        assert topo.out_neighbors(0, step=t + 3) == [2**t]
    P = torch.eye(8)
    for t in range(topo.period):
        P = topo.weights(t) @ P
    np.testing.assert_allclose(P.numpy(), np.full((8, 8), 1 / 8), atol=1e-6)
    assert topo.spectral_gap == 1.0
    assert topo.is_doubly_stochastic and topo.is_regular
    topo.validate_for(push_sum=False)


def test_time_varying_exponential_non_power_of_two():
    topo = make_topology("exponential", 6, time_varying=True)
    assert topo.period == 3  # ceil(log2 6)
    assert 0 < topo.spectral_gap < 1


def test_uniform_weights_function_and_topology_class():
    adj = np.zeros((3, 3), bool)
    adj[1, 0] = adj[2, 0] = adj[0, 1] = adj[0, 2] = True
    W = uniform_weights(adj)
    np.testing.assert_allclose(W[:, 0], [1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(W[:, 1], [1 / 2, 1 / 2, 0])
    topo = Topology("custom", adj)
    topo.validate()
    assert "spectral gap" in topo.describe() and "0.3333" in topo.describe()
