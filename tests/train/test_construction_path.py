"""What users run is what was measured: one construction path, the frozen resolved config,
and a communicator whose every path records its traffic (train/resolve.py, comm/base.py)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import yaml

import decent8
from decent8.comm.base import Communicator
from decent8.comm.simulator import SimulatorCommunicator
from decent8.compression import make_compressor
from decent8.config import evolve, freeze, from_dict, is_frozen, load_config, to_dict
from decent8.layout import ParamLayout
from decent8.timing import FaultModel, FaultySimulatorCommunicator, TrafficRecorder
from decent8.topology import make_topology
from decent8.train.build import build
from decent8.train.resolve import resolve

FAST = ["model=mlp", "model.width=16", "progress=false", "algorithm.consensus_rounds=2", "device=cpu"]


@pytest.fixture
def communicators(monkeypatch):
    """Every communicator built while the test runs (the one `decent8 train` makes itself)."""
    made: list[Communicator] = []
    init = Communicator.__init__

    def recording_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(Communicator, "__init__", recording_init)
    return made


def test_choco_topk_through_decent8_train_takes_the_sparse_increment(tmp_path, communicators):
    """The 16-node Choco top-k run of the API: every gossip round is a sparse increment, none
    falls back to the dense decode + W @ q path the benchmarks do not measure."""
    summary, _ = decent8.train("mlp", nodes=16, algorithm="choco", compression="topk", epochs=1, progress=False,
                               out_dir=str(tmp_path), model__width=16)
    (comm,) = communicators
    assert comm.paths["increment:sparse"] == summary["steps"] > summary["consensus_rounds"]   # rounds count as steps
    assert comm.paths["increment:dense"] == 0 and comm.paths["exchange"] == 0
    assert summary["bytes_sent_per_node"] > 0 and summary["sim_time_s"] > 0   # the recorder saw those rounds


def test_the_cli_run_records_every_round_on_the_path_it_took(tmp_path, communicators):
    from decent8.cli.main import main
    assert main(["train", "nodes=8", "epochs=1", f"out_dir={tmp_path}", "name=r", *FAST]) == 0
    (comm,) = communicators
    summary = yaml.safe_load((tmp_path / "r" / "summary.json").read_text())
    assert comm.paths["increment:sparse"] == summary["steps"] and comm.paths["increment:dense"] == 0


def _faulty(topo, push_sum):
    return FaultySimulatorCommunicator(topo, FaultModel(topo.n, node_drop=0.2, link_drop=0.3, seed=5), push_sum)


@pytest.mark.parametrize("push_sum", [False, True])
def test_sparse_increment_with_faults_equals_the_dense_one_and_sends_what_was_sent(push_sum):
    """Faults re-weight W → W'(t) for the sparse path too: its increment equals the dense
    (W' − I) q, bytes count only the nodes that were up, and the recorder logs both paths alike."""
    topo = make_topology("ring", 20) if not push_sum else make_topology("directed_ring", 20)
    comp = make_compressor("topk", ParamLayout([("a", (30,)), ("b", (4, 5))]), ratio=0.8)
    sparse_comm, dense_comm = _faulty(topo, push_sum), _faulty(topo, push_sum)
    rec_s, rec_d = sparse_comm.observe(TrafficRecorder()), dense_comm.observe(TrafficRecorder())
    for step in range(6):
        x = torch.randn(20, 50, generator=torch.Generator().manual_seed(step))
        payload = comp.encode(x)
        dense = dense_comm.exchange_increment(payload, comp, step)
        inc = sparse_comm.exchange_increment(payload, comp, step, sparse=comp.decode_sparse(payload))
        got = torch.zeros(20, 50, dtype=torch.float64)
        for rows, cols, vals in inc.slots:
            got[rows[:, None], cols] += vals
        up, delivered = sparse_comm.faults.draw(step)
        w = sparse_comm.plan(step).matrix(torch.float64).to_dense()
        q = comp.decode(payload).double()
        assert torch.allclose(got, (w - torch.eye(20, dtype=torch.float64)) @ q, atol=1e-12)
        assert torch.allclose(got, dense, atol=1e-12)
        assert not up.all() or not delivered.all()      # the draw did drop something
        log_s, log_d = rec_s.pop_log(), rec_d.pop_log()
        assert log_s == log_d and log_s.gossip_step == step and log_s.message_bytes == payload.nbytes_per_node()
    assert torch.equal(sparse_comm.bytes_sent, dense_comm.bytes_sent)
    assert sparse_comm.paths["increment:sparse"] == 6 and dense_comm.paths["increment:dense"] == 6
    expected = sum(topo.out_degree(t) * sparse_comm.faults.draw(t)[0] for t in range(6)) * payload.nbytes_per_node()
    assert np.allclose(sparse_comm.bytes_sent.numpy(), expected)


def test_a_choco_run_with_faults_takes_the_sparse_path_and_differs_from_the_fault_free_run(tmp_path, communicators):
    args = dict(nodes=8, algorithm="choco", compression="topk", epochs=1, progress=False, model__width=16)
    faulty, _ = decent8.train("mlp", out_dir=str(tmp_path / "a"), faults={"node_drop": 0.3}, **args)
    clean, _ = decent8.train("mlp", out_dir=str(tmp_path / "b"), **args)
    comm_faulty, comm_clean = communicators
    assert isinstance(comm_faulty, FaultySimulatorCommunicator)
    assert comm_faulty.paths["increment:sparse"] > 0 and comm_faulty.paths["increment:dense"] == 0
    assert faulty["bytes_sent_per_node"] < clean["bytes_sent_per_node"]
    assert faulty["consensus_distance"] != clean["consensus_distance"]


def test_every_public_call_is_recorded_whatever_the_backend_implements():
    """The public calls live in the base class only: a backend implements ``_exchange`` …,
    so no subclass can drop the recording (the reason the sparse path was once skipped)."""
    for name in ("exchange", "exchange_increment", "mix_scalars", "ring_pass", "permute_pass"):
        owners = [cls for cls in (SimulatorCommunicator, FaultySimulatorCommunicator) if name in vars(cls)]
        assert owners == [], f"{name} overridden by {owners}"
    comm = SimulatorCommunicator(make_topology("ring", 4))
    rec = comm.observe(TrafficRecorder())
    comm.ring_pass(torch.zeros(4, 3))
    comm.permute_pass(torch.zeros(4, 5, dtype=torch.uint8), [1, 0, 3, 2])
    comm.mix_scalars(torch.ones(4, 2), 7)
    log = rec.pop_log()
    assert log.hops == [(12.0, None), (5.0, (1, 0, 3, 2))] and log.scalar_bytes == 8.0 and log.gossip_step == 7
    assert dict(comm.paths) == {"ring": 1, "permute": 1, "scalars": 1} and comm.comm_time_s > 0


# ----------------------------------------------------------------- the resolved config
def test_the_resolved_config_is_frozen_and_records_every_default():
    user = load_config(None, ["nodes=8", *FAST])
    resolved = resolve(user)
    assert is_frozen(resolved) and not is_frozen(user)
    assert user.algorithm.gamma is None and user.optimizer.lr is None and user.optimizer.momentum is None
    assert (resolved.algorithm.gamma, resolved.optimizer.lr, resolved.optimizer.momentum) == (0.05, 0.1, 0.9)
    for edit in (lambda c: setattr(c, "seed", 3), lambda c: setattr(c.algorithm, "gamma", 1.0),
                 lambda c: setattr(c.sim, "chunk", "1"), lambda c: setattr(c.model, "name", "cnn")):
        with pytest.raises(dataclasses.FrozenInstanceError, match="frozen"):
            edit(resolved)
    assert resolve(resolved) is resolved                          # idempotent
    assert resolve(from_dict(to_dict(resolved))) == resolved       # ... from its config.yaml too
    changed = evolve(resolved, {"sim.chunk": "1"})
    assert changed.sim.chunk == "1" and resolved.sim.chunk == "auto" and is_frozen(changed)


def test_build_holds_the_resolved_config_and_leaves_the_users_alone():
    user = load_config(None, ["nodes=4", "algorithm=dpsgd", "compression=identity", *FAST])
    before = to_dict(user)
    c = build(user)
    assert to_dict(user) == before and is_frozen(c.cfg) and c.cfg == resolve(user)
    assert c.gamma == c.cfg.algorithm.gamma == 1.0
    assert build(c.cfg).cfg is c.cfg


def test_config_yaml_is_the_resolved_config_with_the_measured_execution(tmp_path):
    from decent8.cli.main import main
    args = ["nodes=4", "epochs=1", f"out_dir={tmp_path}", "name=run", *FAST]
    assert main(["train", *args]) == 0
    saved = from_dict(yaml.safe_load((tmp_path / "run" / "config.yaml").read_text()))
    summary = yaml.safe_load((tmp_path / "run" / "summary.json").read_text())
    expected = evolve(resolve(load_config(None, args)), {"sim.chunk": saved.sim.chunk, "sim.compile": "false"})
    assert to_dict(saved) == to_dict(expected) and saved.sim.chunk != "auto"
    assert summary["algorithm_defaults"] == {"optimizer.momentum": 0.9, "optimizer.lr": 0.1}


def test_a_frozen_config_that_skipped_resolve_is_resolved_by_build():
    user = load_config(None, ["nodes=4", *FAST])
    assert build(freeze(load_config(None, ["nodes=4", *FAST]))).cfg == resolve(user)
