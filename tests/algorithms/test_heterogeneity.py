"""Issue 17: the heterogeneity-robust algorithms (gradient tracking, D², GUT, QG-GUTm, RelaySGD).

On a heterogeneous least-squares problem (8 nodes, each with its own optimum, constant
step size, full local gradients) D-PSGD stalls at a distance to the global optimum that
grows linearly with the heterogeneity, while gradient tracking, D² and RelaySGD converge to it.
Plus: their messages and bytes, checkpointed state, the CLI and the one-line errors.
"""
from __future__ import annotations

import pytest
import torch

from decent8.comm.simulator import SimulatorCommunicator
from decent8.config import load_config
from decent8.errors import ConfigError
from decent8.topology import make_topology
from decent8.train.build import build

from tests.heterogeneity_problem import make_engine, problem

STEPS = 1500
LR = 0.3


def distance(name: str, h: float, topology: str = "ring", steps: int = STEPS, **kw) -> float:
    A, b, x_opt = problem(h)
    comm = SimulatorCommunicator(make_topology(topology, 8))
    engine = make_engine(name, comm, A, b, **kw)
    for _ in range(steps):
        engine.train_step(None, None, LR)
    return (engine.params() - x_opt).norm(dim=1).max().item()


def test_dpsgd_stalls_at_a_distance_proportional_to_heterogeneity():
    d = [distance("dpsgd", h) for h in (0.05, 0.1, 0.2)]
    assert d[0] > 1e-2
    assert d[1] / d[0] == pytest.approx(2.0, rel=0.02)
    assert d[2] / d[0] == pytest.approx(4.0, rel=0.02)


@pytest.mark.parametrize("h", [0.05, 0.2])
def test_gradient_tracking_converges_to_the_global_optimum(h):
    assert distance("gt", h) < 1e-6


@pytest.mark.parametrize("h", [0.05, 0.2])
def test_d2_converges_to_the_global_optimum(h):
    # the 8-node ring with 1/3 weights has λ_min(W) = −1/3: Exact diffusion's (I + W)/2
    assert distance("d2", h, gamma=0.5) < 1e-6


@pytest.mark.parametrize("n", [8, 7])
def test_relaysgd_on_the_chain_converges_to_the_global_optimum(n):
    A, b, x_opt = problem(0.2, n=n)
    comm = SimulatorCommunicator(make_topology("ring", n))
    engine = make_engine("relaysgd", comm, A, b)
    for _ in range(STEPS):
        engine.train_step(None, None, LR)
    assert (engine.params() - x_opt).norm(dim=1).max().item() < 1e-6
    # one dense message per chain neighbour and step: the two ends send one, the others two
    per_msg = STEPS * 5 * 4.0
    assert comm.bytes_sent.tolist() == [per_msg] + [2 * per_msg] * (n - 2) + [per_msg]


def test_gradient_tracking_with_push_sum_converges_on_an_irregular_directed_graph(tmp_path):
    """Push-DIGing: column-stochastic W, de-biased z / ω."""
    graph = tmp_path / "g.txt"
    graph.write_text("0 1\n1 2\n2 3\n3 4\n4 5\n5 6\n6 7\n7 0\n0 4\n2 6\n")   # out-degrees 2, 1, 2, 1, …
    A, b, x_opt = problem(0.1)
    topo = make_topology("edge_list", 8, path=str(graph))
    assert not topo.is_doubly_stochastic
    engine = make_engine("gt", SimulatorCommunicator(topo), A, b, push_sum=True)
    for _ in range(3000):
        engine.train_step(None, None, 0.1)
    assert (engine.params() - x_opt).norm(dim=1).max().item() < 1e-5
    assert engine.algorithm.omega.std().item() > 1e-3          # ω is not constant here


def test_compressed_gradient_tracking_beer_converges():
    """Both variables through Choco public copies (50 % top-k): still the exact optimum."""
    assert distance("gt", 0.1, compression="topk", gamma=0.5, steps=4000) < 1e-5


def test_gut_stays_bounded_and_never_worse_than_dpsgd_here():
    """GUT (μ = 0.1) on the same problem: bounded, at or below D-PSGD's bias (its
    constant-step fixed point is D-PSGD's, see gut.py)."""
    assert distance("gut", 0.1, topology="directed_ring") <= distance("dpsgd", 0.1, topology="directed_ring") * 1.01


def test_gut_without_gradients_reaches_consensus_at_the_mean():
    A, b, _ = problem(0.1)
    comm = SimulatorCommunicator(make_topology("directed_ring", 8))
    engine = make_engine("gut", comm, A * 0, b * 0)      # zero gradients: pure gossip with tracking
    engine.z.copy_(torch.randn(8, 5, generator=torch.Generator().manual_seed(1)))
    mean = engine.z.mean(0).clone()
    for _ in range(400):
        engine.train_step(None, None, LR)
    assert (engine.z - mean).abs().max().item() < 1e-4


def test_gradient_tracking_sends_two_messages_per_step_and_tracks_the_average():
    A, b, _ = problem(0.2)
    comm = SimulatorCommunicator(make_topology("directed_ring", 8))
    engine = make_engine("gt", comm, A, b)
    for _ in range(5):
        _, g = engine.model.loss_and_grad(engine.params())   # the direction of this step (momentum 0)
        engine.train_step(None, None, 0.05)
    # Σ_i y_i equals Σ_i of the last local directions: the tracking error e = y − d sums to 0
    assert torch.allclose(engine.algorithm.y.sum(0), g.sum(0), atol=1e-5)
    assert engine.algorithm.e.sum(0).abs().max().item() < 1e-12
    # first step has no tracker message: 1 + 2·4 messages of 5 float32 to one out-neighbour
    assert comm.bytes_sent.tolist() == [9 * 5 * 4.0] * 8
    engine.consensus_round()                                 # gossip-only: the model alone
    assert comm.bytes_sent.tolist() == [10 * 5 * 4.0] * 8


@pytest.mark.parametrize("name,kw", [("gt", {}), ("gt", {"compression": "topk"}), ("d2", {"gamma": 0.5}),
                                     ("gut", {}), ("qg_gutm", {"kind": "qgm", "momentum": 0.9}), ("relaysgd", {})])
def test_state_dict_resumes_exactly(name, kw):
    A, b, _ = problem(0.2)
    topo = make_topology("ring", 8)
    ref = make_engine(name, SimulatorCommunicator(topo), A, b, **kw)
    for _ in range(7):
        ref.train_step(None, None, 0.05)
    state = ref.state_dict()
    assert set(ref.algorithm.buffers()) <= set(state["algorithm"])
    for _ in range(5):
        ref.train_step(None, None, 0.05)
    resumed = make_engine(name, SimulatorCommunicator(topo), A, b, **kw)
    resumed.load_state_dict(state)
    for _ in range(5):
        resumed.train_step(None, None, 0.05)
    assert torch.equal(resumed.z, ref.z)


# ------------------------------------------------------------------ CLI / config
def cfg(*overrides: str):
    return load_config(None, ["data.name=digits", "model=mlp", "model.width=8", "nodes=4", "device=cpu",
                              "epochs=1", *overrides])


@pytest.mark.parametrize("overrides,algo,kind", [
    (["algorithm=gt", "compression=identity"], "GradientTracking", "local"),
    (["algorithm=gt", "compression=topk"], "GradientTracking", "local"),
    (["algorithm=gt", "compression=identity", "topology.weights=uniform", "topology=star"], "GradientTracking", "local"),
    (["algorithm=d2", "compression=identity", "topology=ring", "algorithm.gamma=0.5"], "D2", "local"),
    (["algorithm=gut", "compression=identity"], "GUT", "local"),
    (["algorithm=qg_gutm", "compression=identity"], "QGGUTm", "qgm"),
    (["algorithm=relaysgd", "compression=identity", "topology=ring"], "RelaySGD", "local"),
])
def test_built_from_the_cli_config(overrides, algo, kind):
    c = build(cfg(*overrides))
    assert type(c.algorithm).__name__ == algo
    assert c.optimizer.name == kind


@pytest.mark.parametrize("overrides,option,needle", [
    (["algorithm=d2", "compression=identity"], "topology", "symmetric"),               # directed ring
    (["algorithm=d2", "compression=identity", "topology=ring", "nodes=8", "algorithm.gamma=1"], "algorithm.gamma", "−1/3"),
    (["algorithm=d2", "compression=topk", "topology=ring"], "compression", "uncompressed"),
    (["algorithm=gut", "compression=topk"], "compression", "uncompressed"),
    (["algorithm=gut", "compression=identity", "algorithm.push_sum=true"], "algorithm.push_sum", "push-sum"),
    (["algorithm=gt", "compression=topk", "algorithm.push_sum=true"], "compression", "Push-DIGing"),
    (["algorithm=gt", "compression=identity", "optimizer.kind=qgm"], "optimizer.kind", "quasi-global"),
    (["algorithm=gut", "compression=identity", "algorithm.mu=1.5"], "algorithm.mu", "[0, 1]"),
    (["algorithm=relaysgd", "compression=identity"], "topology", "chain"),
    (["algorithm=relaysgd", "compression=identity", "topology=ring", "algorithm.gamma=0.5"], "algorithm.gamma", "no consensus step size"),
])
def test_unsupported_combinations_are_one_line_config_errors(overrides, option, needle):
    with pytest.raises(ConfigError) as e:
        build(cfg(*overrides))
    assert e.value.option == option
    assert needle in str(e.value) and "\n" not in str(e.value)
