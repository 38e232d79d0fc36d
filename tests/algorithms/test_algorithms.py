"""Gossip algorithms (SPEC §3): push-sum consensus, identity equivalences, invariants."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from decent8.algorithms import make_algorithm, resolve_push_sum
from decent8.comm import SimulatorCommunicator
from decent8.compression import make_compressor
from decent8.errors import ConfigError
from decent8.layout import ParamLayout
from decent8.topology import make_topology

from tests.helpers import engine_trajectory


def irregular_topology(tmp_path):
    """Strongly connected directed graph whose out-degrees are 3, 1, 2, 1, 1."""
    edges = "0 1\n0 2\n0 3\n1 2\n2 3\n2 4\n3 4\n4 0\n"
    path = tmp_path / "g.txt"
    path.write_text(edges)
    topo = make_topology("edge_list", 5, path=str(path))
    assert len(set(topo.out_degree().tolist())) > 1
    assert not topo.is_doubly_stochastic
    return topo


@pytest.mark.parametrize("name", ["dpsgd", "deepsqueeze", "choco"])
def test_push_sum_reaches_exact_average_on_irregular_digraph(tmp_path, name):
    topo = irregular_topology(tmp_path)
    comm = SimulatorCommunicator(topo)
    d = 7
    comp = make_compressor("identity", ParamLayout.single(d))
    algo = make_algorithm(name, comm, comp, gamma=1.0, push_sum=True)
    x0 = torch.randn(5, d, generator=torch.Generator().manual_seed(0))
    z = x0.clone()
    algo.init_state(z)
    for t in range(400):
        algo.step(z, t)
    x = algo.debiased(z)
    target = x0.mean(0)
    assert (x - target).abs().max().item() < 1e-6
    # ω really moved away from 1 on this irregular graph, and its sum is preserved
    assert algo.omega.std().item() > 1e-3
    assert abs(algo.omega.sum().item() - 5.0) < 1e-5


def test_without_push_sum_column_stochastic_gossip_is_biased(tmp_path):
    """The same graph without push-sum does not reach the average: push-sum is needed."""
    topo = irregular_topology(tmp_path)
    comm = SimulatorCommunicator(topo)
    comp = make_compressor("identity", ParamLayout.single(3))
    algo = make_algorithm("dpsgd", comm, comp, gamma=1.0, push_sum=False)
    x0 = torch.randn(5, 3, generator=torch.Generator().manual_seed(1))
    z = x0.clone()
    algo.init_state(z)
    for t in range(400):
        algo.step(z, t)
    assert (z - x0.mean(0)).abs().max().item() > 1e-2


def test_push_sum_resolution_and_validation(tmp_path):
    topo = irregular_topology(tmp_path)
    assert resolve_push_sum("choco", "auto", topo.is_doubly_stochastic) is True
    assert resolve_push_sum("choco", "auto", True) is False
    assert resolve_push_sum("sparse_push", "auto", True) is True
    with pytest.raises(ConfigError, match="algorithm.push_sum"):
        resolve_push_sum("sparse_push", "false", True)
    with pytest.raises(ConfigError, match="not doubly stochastic"):
        topo.validate_for(push_sum=False)


@pytest.mark.parametrize("name", [pytest.param("choco", marks=pytest.mark.slow), "deepsqueeze"])
def test_identity_compression_reproduces_dpsgd_trajectory(name):
    """SPEC §3: with C = identity and γ = 1, Choco-SGD and Deep-Squeeze are D-PSGD."""
    ref = engine_trajectory(["algorithm=dpsgd", "compression=identity", "algorithm.gamma=1"], steps=20)
    got = engine_trajectory([f"algorithm={name}", "compression=identity", "algorithm.gamma=1"], steps=20)
    assert not torch.equal(ref[0], ref[-1])          # the parameters really moved
    assert (got[-1] - ref[-1]).abs().max().item() < 1e-6


def test_choco_topk_preserves_node_average_of_public_copies():
    """With doubly stochastic W the gossip step leaves Σ_i x_i unchanged (only local steps move it)."""
    topo = make_topology("ring", 6)
    comm = SimulatorCommunicator(topo)
    layout = ParamLayout([("a", (50,)), ("b", (4, 5))])
    comp = make_compressor("topk", layout, ratio=0.9)
    algo = make_algorithm("choco", comm, comp, gamma=0.3, push_sum=False)
    z = torch.randn(6, layout.dim, generator=torch.Generator().manual_seed(3))
    algo.init_state(z)
    before = z.sum(0).clone()
    for t in range(30):
        algo.step(z, t)
    assert torch.allclose(z.sum(0), before, atol=1e-4)


def test_choco_topk_reaches_consensus_gossip_only():
    topo = make_topology("ring", 6)
    comm = SimulatorCommunicator(topo)
    layout = ParamLayout([("a", (40,)), ("b", (20,))])
    comp = make_compressor("topk", layout, ratio=0.8)
    algo = make_algorithm("choco", comm, comp, gamma=0.2, push_sum=False)
    z = torch.randn(6, layout.dim, generator=torch.Generator().manual_seed(4))
    mean = z.mean(0).clone()
    algo.init_state(z)
    start = ((z - mean) ** 2).sum().item()
    for t in range(2000):
        algo.step(z, t)
    assert ((z - mean) ** 2).sum().item() < 1e-6 * start
    # the average is kept to float32 rounding (the old running sum s drifted ~1e-4 in 2000 rounds)
    assert torch.allclose(z.mean(0), mean, atol=2e-6)


def test_deepsqueeze_error_feedback_matches_hand_computation():
    """Two nodes, complete graph (W = ½·ones), top-1 of 2 entries, γ = 0.5: one step by hand."""
    topo = make_topology("complete", 2)
    comm = SimulatorCommunicator(topo)
    layout = ParamLayout.single(2)
    comp = make_compressor("topk", layout, ratio=0.5)
    algo = make_algorithm("deepsqueeze", comm, comp, gamma=0.5, push_sum=False)
    z = torch.tensor([[3.0, -1.0], [0.5, 2.0]])
    algo.init_state(z)
    algo.step(z, 0)
    # v = x (e = 0); c_0 = [3, 0], c_1 = [0, 2]; e = v − c
    c = np.array([[3.0, 0.0], [0.0, 2.0]])
    w = np.full((2, 2), 0.5)
    r = w @ c - c
    expect = np.array([[3.0, -1.0], [0.5, 2.0]]) + 0.5 * r
    np.testing.assert_allclose(z.numpy(), expect, atol=1e-6)
    np.testing.assert_allclose(algo.error.numpy(), [[0.0, -1.0], [0.5, 0.0]], atol=1e-6)


def test_dpsgd_refuses_compression():
    topo = make_topology("ring", 4)
    comm = SimulatorCommunicator(topo)
    comp = make_compressor("topk", ParamLayout.single(10), ratio=0.9)
    with pytest.raises(ConfigError, match="compression"):
        make_algorithm("dpsgd", comm, comp, gamma=1.0, push_sum=False)
