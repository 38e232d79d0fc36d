"""Topologies of recent work (issue 33): Base-(k+1) graphs, hypercubes, per-round random graphs."""
from __future__ import annotations

import numpy as np
import pytest

from decent8.config import load_config
from decent8.errors import ConfigError
from decent8.topology import RandomTopology, base_graph, is_doubly_stochastic, make_topology


def product(topo, rounds: int, start: int = 0) -> np.ndarray:
    P = np.eye(topo.n)
    for t in range(start, start + rounds):
        P = topo.weights_np(t) @ P
    return P


# ----------------------------------------------------------- finite-time graphs
@pytest.mark.parametrize("n", [6, 10, 25])
@pytest.mark.parametrize("k", [1, 2, 4])
def test_base_graph_reaches_exact_consensus_in_its_stated_rounds(n, k):
    topo = make_topology("base", n, degree=k)
    m = topo.rounds_to_consensus()
    assert m == topo.period and f"{m} rounds" in topo.description
    x = np.random.default_rng(n * 10 + k).normal(size=(n, 3))
    y = product(topo, m) @ x
    assert np.abs(y - x.mean(axis=0)).max() <= 1e-6
    # one round short is not exact (the graph needs every round)
    assert np.abs(product(topo, m - 1) @ x - x.mean(axis=0)).max() > 1e-3
    for t in range(m):
        W = topo.weights_np(t)
        assert is_doubly_stochastic(W) and np.allclose(W, W.T)
        assert topo.out_degree(t).max() <= k          # at most k peers per round


def test_base_graph_round_counts_hand_checked():
    # n = 6, k = 1: 6 = 2 · 3 → 3 blocks... product form: blocks of 3 (simple Base-2 on 3 nodes:
    # pair (0,1); node 2 with node 0 at c = 2/3; pair (0,1) again = 3 rounds) + 1 round pairing the blocks.
    Ws = base_graph(6, 1)
    assert len(Ws) == 4
    np.testing.assert_allclose(Ws[1][:3, :3], [[1 / 3, 0, 2 / 3], [0, 1, 0], [2 / 3, 0, 1 / 3]])
    # n = (k+1)^p: the (k+1)-ary hypercube, p rounds of cliques of k+1
    assert len(base_graph(25, 4)) == 2 and len(base_graph(27, 2)) == 3
    np.testing.assert_allclose(base_graph(25, 4)[0][:5, :5], np.full((5, 5), 0.2))


@pytest.mark.parametrize("n", [8, 16, 32])
def test_one_peer_hypercube_exact_in_log2_n_rounds(n):
    topo = make_topology("hypercube", n, time_varying=True)
    d = int(np.log2(n))
    assert topo.period == d and topo.rounds_to_consensus() == d
    np.testing.assert_allclose(product(topo, d), np.full((n, n), 1 / n), atol=1e-12)
    assert all(topo.out_degree(t).tolist() == [1] * n for t in range(d))
    # the dimensions commute: any d consecutive rounds average exactly
    np.testing.assert_allclose(product(topo, d, start=1), np.full((n, n), 1 / n), atol=1e-12)


def test_static_hypercube():
    topo = make_topology("hypercube", 16)
    assert topo.out_degree().tolist() == [4] * 16 and topo.in_neighbors(5) == [1, 4, 7, 13]
    assert topo.is_doubly_stochastic and topo.is_undirected
    # W = (I + Σ_b P_b)/5: eigenvalues (5 − 2|S|)/5, so λ₂ = 3/5 and the gap is 2/5
    assert abs(topo.spectral_gap - 0.4) < 1e-12
    assert topo.rounds_to_consensus() is None


def test_rounds_to_consensus_tells_finite_time_from_asymptotic():
    assert make_topology("complete", 7).rounds_to_consensus() == 1
    assert make_topology("ring", 8).rounds_to_consensus() is None
    assert make_topology("exponential", 32, time_varying=True).rounds_to_consensus() == 5
    assert make_topology("erdos_renyi", 16, seed=1).rounds_to_consensus() is None


# ----------------------------------------------------------- random per round
@pytest.mark.parametrize("name,weights", [("erdos_renyi", "uniform"), ("erdos_renyi", "metropolis"),
                                          ("random_matching", "uniform"), ("random_k_out", "uniform")])
def test_random_graphs_reproducible_from_seed_and_round(name, weights):
    a = make_topology(name, 20, weights=weights, seed=7)
    b = make_topology(name, 20, weights=weights, seed=7)
    c = make_topology(name, 20, weights=weights, seed=8)
    assert isinstance(a, RandomTopology)
    for t in (0, 3, 1000, 3):              # any order: no state beyond (seed, round)
        np.testing.assert_array_equal(a.weights_np(t), b.weights_np(t))
    assert any(not np.array_equal(a.adjacency(t), c.adjacency(t)) for t in range(5))
    assert any(not np.array_equal(a.adjacency(0), a.adjacency(t)) for t in range(1, 5))  # new graph each round
    for t in range(30):
        W = a.weights_np(t)
        np.testing.assert_allclose(W.sum(axis=0), 1.0, atol=1e-12)   # column-stochastic: push-sum works
        assert (W >= 0).all()
        if a.is_doubly_stochastic:
            np.testing.assert_allclose(W.sum(axis=1), 1.0, atol=1e-12)
    assert a.is_doubly_stochastic == (name == "random_matching" or weights == "metropolis")


def test_random_graph_structure():
    m = make_topology("random_matching", 9, seed=0)
    for t in range(20):
        adj = m.adjacency(t)
        assert (adj == adj.T).all() and adj.sum(axis=0).max() == 1 and adj.sum() == 8   # 4 pairs, one node out
        W = m.weights_np(t)
        assert set(np.round(W[adj], 12)) == {0.5}
    k = make_topology("random_k_out", 12, degree=3, seed=0)
    assert all(k.out_degree(t).tolist() == [3] * 12 for t in range(20))
    assert not k.is_undirected and k.mean_out_degree() == 3
    er = make_topology("erdos_renyi", 40, degree=4, seed=0)
    mean_deg = np.mean([er.out_degree(t).mean() for t in range(300)])
    assert abs(mean_deg - 4) < 0.15            # E[deg] = (n−1)p = 4; sd of the mean ≈ 0.02
    assert all((er.adjacency(t) == er.adjacency(t).T).all() for t in range(5))
    assert 0 < er.spectral_gap < 1


def test_random_topology_options_are_checked():
    with pytest.raises(ConfigError, match="topology.degree"):
        make_topology("ring", 8, degree=3)
    with pytest.raises(ConfigError, match="topology.degree"):
        make_topology("random_k_out", 8, degree=2.5)
    with pytest.raises(ConfigError, match="topology.degree"):
        make_topology("erdos_renyi", 8, degree=9)
    with pytest.raises(ConfigError, match="topology.weights"):
        make_topology("random_k_out", 8, weights="metropolis")
    with pytest.raises(ConfigError, match="nodes.*power-of-two"):
        make_topology("hypercube", 12)
    er = make_topology("erdos_renyi", 8)
    with pytest.raises(ConfigError, match="metropolis"):
        er.validate_for(push_sum=False)
    er.validate_for(push_sum=True)


def test_config_and_cli(capsys):
    from decent8.cli.main import main
    cfg = load_config(None, ["topology=erdos_renyi", "topology.degree=3"])
    assert cfg.topology.params == {"degree": 3}                  # the function's keyword argument
    assert main(["topology", "base", "nodes=10"]) == 0
    out = capsys.readouterr().out
    assert "rounds to exact consensus: 6" in out and "base-2 graph" in out
    assert main(["topology", "random_matching", "nodes=16"]) == 0
    out = capsys.readouterr().out
    assert "consensus rate per round, measured" in out and "asymptotic only" in out


# ----------------------------------------------------------- training on them
@pytest.mark.parametrize("overrides", [
    ["topology=base", "nodes=6"],
    ["topology=hypercube", "topology.time_varying=true", "nodes=8"],
    ["topology=hypercube", "nodes=8"],
    ["topology=erdos_renyi", "topology.weights=metropolis", "nodes=8"],
    ["topology=erdos_renyi", "nodes=8"],                      # uniform weights: push-sum (auto)
    ["topology=random_matching", "nodes=8"],
    ["topology=random_k_out", "topology.degree=2", "nodes=8"],  # directed: push-sum
])
def test_short_training_run_on_each_new_topology(overrides):
    import torch

    from decent8.train.build import build
    from decent8.train.engine import Engine
    cfg = load_config(None, ["device=cpu", "progress=false", "model.width=4", "algorithm=dpsgd", "sim.chunk=1",
                             "compression=identity", *overrides])
    c = build(cfg)
    assert c.push_sum == (not c.topology.is_doubly_stochastic)
    engine = Engine(c.model, c.algorithm, c.optimizer, c.comm, c.x0)
    idx = c.sampler.epoch_indices(0)
    for s in range(3):
        batch = idx[:, s]
        loss = engine.train_step(c.dataset.x_train[batch], c.dataset.y_train[batch], lr=0.1)
        assert torch.isfinite(loss).all()
    x = engine.params().clone()
    assert (x - x.mean(0)).abs().max() > 1e-4          # the nodes differ after local steps
    # finite-time (a fixed sequence): one aligned period averages exactly. (A random matching sequence
    # can also hit exact consensus by chance at n = 8, but it has no period to align to.)
    if not isinstance(c.topology, RandomTopology) and c.topology.rounds_to_consensus() is not None:
        while engine.step_count % c.topology.period:
            engine.consensus_round()
        for _ in range(c.topology.period):
            engine.consensus_round()
        y = engine.params()
        if c.topology.is_doubly_stochastic:
            torch.testing.assert_close(y.mean(0), x.mean(0), atol=1e-5, rtol=0)
        assert (y - y.mean(0)).abs().max() < 1e-5
    else:
        for _ in range(60):
            engine.consensus_round()
        y = engine.params()
        assert (y - y.mean(0)).abs().max() < 1e-3 * (x - x.mean(0)).abs().max()


# ----------------------------------------------------------- did you mean
def test_did_you_mean_on_mistyped_values_and_options():
    from decent8.errors import choice_error, did_you_mean
    assert did_you_mean("rign", ["ring", "torus", "star"]) == " (did you mean 'ring'?)"
    assert did_you_mean("TopK", ["topk", "randomk"]) == " (did you mean 'topk'?)"   # case only
    assert did_you_mean("zzz", ["ring", "torus"]) == ""
    e = choice_error("topology", "exponentail", ["exponential", "ring"])
    assert e.option == "topology" and "did you mean 'exponential'?" in str(e) and "allowed: exponential, ring" in str(e)
    with pytest.raises(ConfigError, match=r"did you mean 'ring'\?"):
        make_topology("rign", 8)
    with pytest.raises(ConfigError, match=r"optimizer.lrr: unknown option \(did you mean 'lr'\?\); allowed in optimizer"):
        load_config(None, ["optimizer.lrr=0.1"])
    with pytest.raises(ConfigError, match=r"nodez: unknown option \(did you mean 'nodes'"):
        load_config(None, ["nodez=4"])
    with pytest.raises(ConfigError, match=r"topology.weigths: unknown option \(did you mean 'weights'\?\)"):
        load_config(None, ["topology.weigths=uniform"])
    with pytest.raises(ConfigError) as e:
        load_config(None, ["optimizer.qqqq=1"])
    assert "did you mean" not in str(e.value)


def test_choco_refuses_time_varying_topologies():
    # Choco's neighbour sum s += W q is only Σ_j W_ij x̂_j for a static W (found by the topology sweep:
    # on one-peer graphs the nodes never reached consensus)
    from decent8.train.build import build
    for extra in (["topology=exponential", "topology.time_varying=true"], ["topology=random_matching"]):
        cfg = load_config(None, ["device=cpu", "progress=false", "model.width=4", "sim.chunk=1", "algorithm=choco",
                                 "nodes=8", *extra])
        with pytest.raises(ConfigError, match="choco keeps .* running sum"):
            build(cfg)
