"""Network/device model, simulated clock and faults (SPEC §12, decent8.timing)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from decent8.algorithms import make_algorithm, make_allreduce_algorithm
from decent8.collectives.ring import RingAllReduce
from decent8.comm.simulator import SimulatorCommunicator
from decent8.compression import make_compressor
from decent8.config import load_config
from decent8.errors import ConfigError
from decent8.layout import ParamLayout
from decent8.seeding import node_generators
from decent8.timing import (DeviceModel, FaultModel, FaultySimulatorCommunicator, NetworkModel, TrafficRecorder,
                            SimClock, faulty_weights, ring_hops_time)
from decent8.timing.network import MBIT
from decent8.topology import Topology, make_topology
from decent8.train.build import build
from decent8.train.loop import train

from tests.helpers import small_config


def fixed_device(compute) -> DeviceModel:
    c = np.asarray(compute, dtype=float)
    return DeviceModel("fixed", len(c), 1.0, c)


# ------------------------------------------------------------ ring all-reduce
@pytest.mark.parametrize("M", [4, 8])
def test_ring_allreduce_time_is_the_alpha_beta_formula(M):
    """fp32 ring all-reduce of d = 100 over M workers: 2(M − 1) hops of α + chunk/β with
    chunk = ceil(100 / M)·4 bytes; the clock adds the slowest node's compute."""
    alpha, bw = 2e-3, 8.0  # 8 Mbit/s = 1e6 B/s
    comm = SimulatorCommunicator(make_topology("ring", M))
    recorder = comm.observe(TrafficRecorder())
    x = torch.randn(M, 100)
    out = RingAllReduce(comm, "ring").sum(x)
    assert torch.allclose(out, x.sum(0).expand(M, 100), atol=1e-4)
    log = recorder.pop_log()
    chunk = -(-100 // M) * 4
    assert len(log.hops) == 2 * (M - 1) and all(b == chunk for b, _ in log.hops)
    net = NetworkModel.uniform(M, alpha, bw)
    expected = 2 * (M - 1) * (alpha + chunk / 1e6)
    assert ring_hops_time(log.hops, net, np.zeros((M, M))) == pytest.approx(expected, rel=1e-12)
    compute = np.linspace(0.01, 0.05, M)
    clock = SimClock(comm.topology, net, fixed_device(compute))
    assert clock.advance(log, compute) == pytest.approx(0.05 + expected, rel=1e-12)


def test_marsit_step_time_uses_one_bit_chunks():
    """Marsit on 8 workers, d = 100: padded to 128 (a multiple of 8·M), chunks of 16 bits
    = 2 bytes, 14 hops → 14·(α + 2/β)."""
    M, alpha = 8, 1e-3
    comm = SimulatorCommunicator(make_topology("ring", M))
    recorder = comm.observe(TrafficRecorder())
    alg = make_allreduce_algorithm("marsit", comm, "ring", generators=node_generators(0, "compress", list(range(M))))
    alg.init_state(torch.zeros(M, 100))
    alg.aggregate(torch.randn(M, 100), 0, 0.1)
    log = recorder.pop_log()
    assert [b for b, _ in log.hops] == [2.0] * 14
    net = NetworkModel.uniform(M, alpha, 8.0)
    assert ring_hops_time(log.hops, net, np.zeros((M, M))) == pytest.approx(14 * (alpha + 2 / 1e6), rel=1e-12)


# ------------------------------------------------------------ gossip on an irregular graph
def irregular() -> Topology:
    """0→1, 0→2, 1→2, 2→3, 2→0, 3→0 (adj[i, j]: j → i); out-degrees 2, 1, 2, 1."""
    adj = np.zeros((4, 4), dtype=bool)
    for j, i in [(0, 1), (0, 2), (1, 2), (2, 3), (2, 0), (3, 0)]:
        adj[i, j] = True
    return Topology("irregular", adj)


def test_gossip_step_on_an_irregular_graph_equals_the_hand_computation(tmp_path):
    """Messages of 250 fp32 = 1000 B, β = 8 Mbit/s = 1e6 B/s, α = 10 ms; the links file
    makes 2→0 slow to start (α = 50 ms) and 0→2 narrow (4 Mbit/s). Shared uplinks:
    node 0 and 2 send two messages, so their messages take 2000 B / β.

        node 0: C 0.10 + max(3→0: .01 + .001, 2→0: .05 + .002) = 0.152
        node 1: C 0.20 + (0→1: .01 + .002)                        = 0.212
        node 2: C 0.05 + max(0→2: .01 + 2000/5e5, 1→2: .011)     = 0.064
        node 3: C 0.30 + (2→3: .01 + .002)                        = 0.312  ← the step
    """
    links = tmp_path / "links.csv"
    links.write_text("src,dst,latency_s,bandwidth_mbit_s\n2,0,0.05,8\n# a comment\n0,2,0.01,4\n")
    topo = irregular()
    cfg = load_config(None, ["network=custom", "network.latency_s=0.01", "network.bandwidth_mbit_s=8",
                             f"network.links={links}"])
    net = NetworkModel.from_config(cfg.network, 4)
    comm = SimulatorCommunicator(topo)
    recorder = comm.observe(TrafficRecorder())
    comp = make_compressor("identity", ParamLayout.single(250))
    alg = make_algorithm("dpsgd", comm, comp, 1.0, False, None)
    z = torch.randn(4, 250)
    alg.init_state(z)
    alg.step(z, 0)
    log = recorder.pop_log()
    assert log.message_bytes == 1000 and log.gossip_step == 0
    compute = [0.10, 0.20, 0.05, 0.30]
    clock = SimClock(topo, net, fixed_device(compute))
    assert clock.step_time(log, np.array(compute)) == pytest.approx(0.312, abs=1e-12)
    # the receive times alone (compute 0): node 0 waits longest, for the slow 2→0 link
    assert clock.step_time(log, np.zeros(4)) == pytest.approx(0.052, abs=1e-12)
    # overlap: max over nodes of max(C_i, A_i) = node 3's 0.30
    assert SimClock(topo, net, fixed_device(compute), overlap=True).step_time(log, np.array(compute)) == pytest.approx(0.30)
    # independent links: every message takes 1000 B / β → node 3: 0.30 + 0.011
    net.shared_uplink = False
    assert clock.step_time(log, np.array(compute)) == pytest.approx(0.311, abs=1e-12)


def test_jitter_and_stragglers_are_seeded():
    cfg = load_config(None, ["network.jitter_s=0.001", "device_model=fixed", "device_model.step_s=0.1",
                             "device_model.straggler_fraction=0.25", "device_model.straggler_factor=3"])
    net = NetworkModel.from_config(cfg.network, 8, seed=5)
    assert np.array_equal(net.jitter(3), NetworkModel.from_config(cfg.network, 8, seed=5).jitter(3))
    assert not np.array_equal(net.jitter(3), net.jitter(4)) and net.jitter(3).min() >= 0
    from decent8.timing import device_from_config
    dev = device_from_config(cfg.device_model, 8, "int8", seed=1)
    c = dev.compute_times(0)
    assert sorted(c.round(6).tolist()) == [0.025] * 6 + [0.075] * 2  # 0.1 / r=4, two nodes 3x slower


# ------------------------------------------------------------ faults
def test_faulty_weights_keep_rows_or_columns_stochastic():
    W = irregular().weights_np()
    D = np.ones((4, 4), dtype=bool)
    D[3, 2] = D[1, 0] = False
    ps = faulty_weights(W, D, push_sum=True)
    assert np.allclose(ps.sum(axis=0), 1) and ps[3, 2] == 0 and ps[2, 2] == pytest.approx(W[2, 2] + W[3, 2])
    rr = faulty_weights(W, D, push_sum=False)
    assert np.allclose(rr.sum(axis=1), 1) and rr[3, 2] == 0 and rr[3, 3] == 1.0


def test_dropout_with_push_sum_still_reaches_the_exact_average():
    """Irregular directed graph, 30 % node dropout and 20 % link failure per round: push-sum
    gossip (D-PSGD with push_sum, γ = 1) keeps Σ z and Σ ω exact every round and every
    node's z/ω reaches the true average; with the plain row re-weighting instead the nodes
    agree on a value that is not the average."""
    topo = irregular()
    faults = FaultModel(4, node_drop=0.3, link_drop=0.2, seed=7)
    comp = make_compressor("identity", ParamLayout.single(3))
    x0 = torch.tensor([[1.0, 0.0, 4.0], [2.0, 8.0, -1.0], [-3.0, 5.0, 0.5], [6.0, 1.0, 2.0]])
    target = x0.mean(0)
    results = {}
    for push_sum in (True, False):
        comm = FaultySimulatorCommunicator(topo, faults, push_sum)
        alg = make_algorithm("dpsgd", comm, comp, 1.0, push_sum, None)
        z = x0.clone()
        alg.init_state(z)
        for t in range(400):
            alg.step(z, t)
            if push_sum:
                assert torch.allclose(z.sum(0), x0.sum(0), atol=1e-4)
                assert alg.omega.sum().item() == pytest.approx(4.0, abs=1e-4)
        results[push_sum] = alg.debiased(z)
        if push_sum:  # fewer bytes than a fault-free run: down nodes sent nothing
            assert comm.bytes_sent.sum().item() < 400 * 6 * 2 * 12 + 400 * 6 * 4
    assert torch.allclose(results[True], target.expand(4, 3), atol=5e-4)
    plain = results[False]
    assert torch.allclose(plain, plain[0].expand(4, 3), atol=1e-4)  # consensus …
    assert (plain[0] - target).abs().max().item() > 1e-2              # … but not on the average


def test_fault_masks_are_seeded_and_drop_at_the_rate():
    f = FaultModel(8, node_drop=0.1, link_drop=0.0, seed=3)
    up, d = f.draw(11)
    up2, d2 = f.draw(11)
    assert np.array_equal(d, d2) and np.array_equal(up, up2) and np.all(np.diag(d))
    rate = 1 - np.mean([f.draw(t)[0].mean() for t in range(2000)])
    assert rate == pytest.approx(0.1, abs=0.01)


# ------------------------------------------------------------ end to end
def test_sim_time_in_every_metrics_line_and_summary_equals_the_formula(tmp_path):
    """Choco 99 % top-k, 4-node directed ring, fixed compute 10 ms, α = 1 ms, β = 8 Mbit/s
    (1e6 B/s), one out-neighbour: every step takes 0.01 + 0.001 + b/1e6 and every
    consensus round 0.001 + b/1e6, with b the real top-k payload."""
    over = small_config(["epochs=2", "data.subset=400", "algorithm=choco", "algorithm.consensus_rounds=3",
                         "device_model=fixed",
                         "device_model.step_s=0.01", "network=custom", "network.latency_s=0.001",
                         "network.bandwidth_mbit_s=8", f"out_dir={tmp_path}", "name=r"])
    summary, path = train(load_config(None, over), quiet=True)
    b = summary["message_bytes"]
    per_epoch = summary["steps_per_epoch"]
    step = 0.01 + 0.001 + b / 1e6
    rows = [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines()]
    final, rows = rows[-1], rows[:-1]   # the last line: after the final consensus rounds, as summary.json
    assert [r["sim_time_s"] for r in rows] == pytest.approx([per_epoch * step, 2 * per_epoch * step], rel=1e-9)
    assert summary["sim_time_s"] == pytest.approx(2 * per_epoch * step + 3 * (0.001 + b / 1e6), rel=1e-9)
    assert final["after_consensus_rounds"] == 3 and final["sim_time_s"] == summary["sim_time_s"]
    assert all(r["measured_compute_s"] > 0 and r["measured_comm_s"] > 0 for r in rows)
    assert summary["measured_compute_s_per_step"] > 0 and (path / "time.png").is_file()


@pytest.mark.slow
def test_faulty_run_is_reproducible_and_sends_fewer_bytes(tmp_path):
    base = small_config(["epochs=1", "algorithm=dpsgd", "compression=identity", "algorithm.consensus_rounds=0",
                         "checkpoint=false", f"out_dir={tmp_path}"])
    a, _ = train(load_config(None, [*base, "faults.node_drop=0.3", "name=a"]), quiet=True)
    b, _ = train(load_config(None, [*base, "faults.node_drop=0.3", "name=b"]), quiet=True)
    c, _ = train(load_config(None, [*base, "name=c"]), quiet=True)
    assert a["node_accuracies"] == b["node_accuracies"] and a["sim_time_s"] == b["sim_time_s"]
    assert a["bytes_sent_per_node"] < c["bytes_sent_per_node"]


@pytest.mark.parametrize("override, option", [
    (["network=fiber"], "network"),
    (["network=custom"], "network.latency_s"),
    (["network.bandwidth_mbit_s=0"], "network.bandwidth_mbit_s"),
    (["network.links=/nonexistent.csv"], "network.links"),
    (["faults.node_drop=1.5"], "faults.node_drop"),
    (["faults.link_drop=0.1", "algorithm=psgd", "topology=ring"], "faults.link_drop"),
    (["device_model=fixed"], "device_model.step_s"),
    (["device_model=gpu"], "device_model"),
    (["device_model.node_factors=[1,2]"], "device_model.node_factors"),
    (["clock.as_model=resnet99"], "clock.as_model"),
])
def test_bad_timing_options_are_one_line_errors_naming_the_option(override, option):
    with pytest.raises(ConfigError) as e:
        build(load_config(None, small_config(override)))
    assert e.value.option == option and "\n" not in str(e.value)


def test_crossover_bandwidth_of_two_affine_step_times():
    """T(β) = a + b·x, x = 1/β in s/B. Uncompressed: a 1 ms, b 1e6 B; compressed needs twice
    the steps with a 1 ms, b 1e4 B: 2(1e-3 + 1e4 x) < 1e-3 + 1e6 x ⇔ x > 1e-3/980000 ⇔
    β < 9.8e8 B/s = 7840 Mbit/s."""
    from decent8.experiments.tta import crossover
    base, comp = {"a": 1e-3, "b": 1e6}, {"a": 1e-3, "b": 1e4}
    assert crossover(comp, base, 200, 100) == "below 7,840"
    assert crossover(comp, base, 100, 100) == "always"
    assert crossover({"a": 2e-3, "b": 2e6}, base, 100, 100) == "never"


@pytest.mark.slow   # > 6 s: kept out of the fast subset
def test_resume_continues_the_clock_and_the_fault_draws(tmp_path):
    """A run cut after epoch 1 and resumed ends with the uninterrupted run's accuracy and
    simulated time (faults, latency jitter and compute jitter are seeded by step / round)."""
    import yaml

    from decent8.config import to_dict
    common = small_config(["algorithm=dpsgd", "compression=identity", "algorithm.consensus_rounds=2",
                           "faults.node_drop=0.2", "network.jitter_s=0.001", "device_model.jitter_sigma=0.3",
                           f"out_dir={tmp_path}"])
    full, _ = train(load_config(None, [*common, "epochs=2", "name=full"]), quiet=True)
    _, run = train(load_config(None, [*common, "epochs=1", "name=part"]), quiet=True)
    (run / "config.yaml").write_text(yaml.safe_dump(to_dict(load_config(None, [*common, "epochs=2", "name=part"]))))
    resumed, _ = train(None, resume=run, quiet=True)
    assert resumed["node_accuracies"] == full["node_accuracies"]
    assert resumed["sim_time_s"] == pytest.approx(full["sim_time_s"], rel=1e-12)


def test_building_the_clock_leaves_the_global_rng_alone():
    """Counting FLOPs builds a model; the run's global RNG stream (stochastic rounding) must
    not depend on whether that count was already cached in this process."""
    from decent8.timing import _reference_layout, _train_flops
    cfg = load_config(None, small_config(["clock.as_model=resnet20", "model=resnet20", "data.name=digits"]))
    _train_flops.cache_clear()
    _reference_layout.cache_clear()
    build(cfg)
    first = torch.get_rng_state()
    build(cfg)  # counts cached now
    assert torch.equal(first, torch.get_rng_state())


@pytest.mark.parametrize("device_model, per_step", [("fixed", False), ("measured", True)])
def test_the_loop_waits_for_the_device_each_step_only_for_the_measured_device_model(tmp_path, monkeypatch,
                                                                                      device_model, per_step):
    """No host sync per step unless device_model=measured needs each step's own time:
    otherwise one wait per epoch (counted as compute), and the clock is unchanged."""
    import decent8.train.loop as loop
    calls = []
    monkeypatch.setattr(loop, "device_sync", lambda device: calls.append(device))
    over = small_config(["epochs=2", "data.subset=400", "algorithm=choco", f"device_model={device_model}",
                         "device_model.step_s=0.01",
                         f"out_dir={tmp_path}", "name=r"])
    summary, _ = train(load_config(None, over), quiet=True)
    steps = summary["steps_per_epoch"]
    assert steps > 1
    assert len(calls) == (2 * steps if per_step else 2)
    assert summary["measured_compute_s_per_step"] > 0 and summary["measured_comm_s_per_step"] > 0


def test_backlog_counts_as_compute_of_the_interval_and_the_run():
    timer = build(load_config(None, small_config(["device_model=fixed", "device_model.step_s=0.01"]))).timer
    assert not timer.step_sync and not getattr(timer.comm, "sync_calls", False)
    timer.after_step(0, 0.5, 0.2)
    timer.after_step(1, 0.25, 0.05)
    timer.add_backlog(0.1)
    assert timer.interval() == pytest.approx(((0.3 + 0.2 + 0.1) / 2, 0.25 / 2))
    assert timer.run_means() == pytest.approx((0.3, 0.125))
