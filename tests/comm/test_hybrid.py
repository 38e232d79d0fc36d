"""Node blocks over torch.distributed (comm/block.py, comm/placement.py): n = 16 nodes
over R = 1, 2 and 4 gloo ranks end with the one-process simulator's parameters after
20 steps for every algorithm family, uneven blocks (n = 10 over 4 ranks) too; bytes
per node equal the simulator's, and the bytes between ranks are crossing edges ×
payload (block and random placement); a killed rank is named with its nodes, and
``--resume`` ends like the uninterrupted run.

One process group per R runs every case (gloo groups are slow to start); the three
groups run at the same time while this process computes the simulator's references.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from decent8.cli.launch_cmd import LocalNodes
from decent8.comm.placement import (block_placement, block_sizes, crossing_edges, describe_nodes, make_placement,
                                    random_placement)
from decent8.errors import ConfigError
from decent8.timing.network import NetworkModel
from decent8.topology import make_topology
from tests._gloo import wait_nodes

sys.path.insert(0, str(Path(__file__).parent))
from hybrid_steps import CASES, STEPS, UNEVEN, config, run_steps  # noqa: E402

WORKER = Path(__file__).parent / "hybrid_worker.py"
GROUPS = [(1, "block"), (2, "random"), (4, "block")]
#: irregular directed graph on 16 nodes (out-degrees 1..3), for push-sum
GRAPH = "0 1\n0 2\n1 2\n2 3\n3 0\n4 5\n5 6\n6 7\n7 8\n8 9\n9 10\n10 11\n11 12\n12 13\n13 14\n14 15\n15 4\n3 9\n9 0\n3 4\n"


# ------------------------------------------------------------------ placement (no processes)
def test_block_placement_sizes_and_a_ring_crosses_each_boundary_once_each_way():
    assert block_sizes(10, 4) == [3, 3, 2, 2] and block_placement(10, 4) == [0, 0, 0, 1, 1, 1, 2, 2, 3, 3]
    w = make_topology("ring", 16).weights_np(0)
    for R in (1, 2, 4, 8):
        assert crossing_edges(w, block_placement(16, R)) == (0 if R == 1 else 2 * R)
    owner = random_placement(16, 4, seed=3)
    assert sorted(np.bincount(owner).tolist()) == [4, 4, 4, 4] and owner == random_placement(16, 4, seed=3)
    assert crossing_edges(w, owner) > 2 * 4       # a random placement breaks locality
    assert describe_nodes([8, 9, 10]) == "8–10" and describe_nodes([1, 5]) == "1, 5"


def test_placement_file_and_its_errors(tmp_path):
    f = tmp_path / "p.txt"
    f.write_text("# rank of each node\n1 1 0\n0\n")
    assert make_placement(str(f), 4, 2) == [1, 1, 0, 0]
    with pytest.raises(ConfigError, match="holds 4 ranks, but there are 5 nodes"):
        make_placement(str(f), 5, 2)
    with pytest.raises(ConfigError, match="rank 2 holds no node"):
        make_placement(str(f), 4, 3)
    with pytest.raises(ConfigError, match="every rank must hold at least one node"):
        make_placement("block", 3, 4)


def test_links_between_ranks_get_their_own_profile_in_the_time_model():
    net = NetworkModel.uniform(4, 1e-5, 10_000.0)
    changed = net.apply_placement([0, 0, 1, 1], 2e-3, 50.0)
    assert changed == 8
    assert net.alpha[1, 0] == 1e-5 and net.alpha[2, 1] == 2e-3 and net.beta[3, 0] == 50.0 * 1e6 / 8
    # the simulator's clock: a ring over 2 ranks with slow links between them takes longer
    from decent8.train.loop import train
    base = ["nodes=8", "device=cpu", "data.name=digits", "data.subset=400", "model=mlp", "model.width=8", "epochs=1",
            "progress=false", "topology=ring", "algorithm=dpsgd", "compression=identity", "algorithm.consensus_rounds=0",
            "checkpoint=false", "tensorboard=false", "device_model=fixed", "device_model.step_s=0.01"]
    fast, _ = train(config_only(base + ["name=fast"]), quiet=True)
    slow, _ = train(config_only(base + ["name=slow", "dist.ranks=2", "dist.network=wifi"]), quiet=True)
    # per step, the slowest arrival is over a link between ranks: α + 2b/β (shared uplink, 2 neighbours)
    b, steps = fast["message_bytes"], fast["steps"]
    per_step = (2e-3 + 2 * b / (50.0 * 1e6 / 8)) - (1e-5 + 2 * b / (10_000.0 * 1e6 / 8))
    assert slow["sim_time_s"] - fast["sim_time_s"] == pytest.approx(steps * per_step, rel=1e-6)


def test_launch_ranks_sets_dist_ranks_and_checks_the_placement_before_starting(tmp_path):
    from decent8.cli.launch_cmd import plan_launch
    args = ["nodes=10", "device=cpu", "data.name=digits", "model=mlp", "model.width=8", "topology=ring",
            "algorithm=dpsgd", "compression=identity", f"out_dir={tmp_path}"]
    labels: list[str] = []
    procs, train_args = plan_launch(args, None, 4, labels)
    assert procs == 4 and "dist.ranks=4" in train_args and "backend=distributed" in train_args
    assert labels == ["rank 0 (nodes 0–2)", "rank 1 (nodes 3–5)", "rank 2 (nodes 6–7)", "rank 3 (nodes 8–9)"]
    with pytest.raises(ConfigError, match="every rank must hold at least one node"):
        plan_launch(args, None, 11)
    with pytest.raises(ConfigError, match="dist.placement"):
        plan_launch([*args, "dist.placement=nope.txt"], None, 2)


def config_only(overrides):
    from decent8.config import load_config
    import tempfile
    return load_config(None, [*overrides, f"out_dir={tempfile.mkdtemp()}"])


# ------------------------------------------------------------------ parity over R ranks
@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hybrid")
    graph = root / "g16.txt"
    graph.write_text(GRAPH)
    groups = []
    for R, placement in GROUPS:
        logs = root / f"logs-R{R}"
        logs.mkdir()
        groups.append((R, LocalNodes(R, [sys.executable, str(WORKER), str(root), str(graph), placement],
                                     log_dir=logs, env={**os.environ, "OMP_NUM_THREADS": "1"})))
    # meanwhile: the simulator's references
    sim = {name: run_steps(config(case, str(graph), [])) for name, case in {**CASES, **UNEVEN}.items()}
    deadline = time.monotonic() + 600
    for R, group in groups:
        wait_nodes(group, 600, f"R={R} ranks", deadline=deadline, poll_s=0.2)
        logs = "\n".join((root / f"logs-R{R}" / f"node{r}.log").read_text()[-3000:] for r in range(R))
        assert group.poll() == [0] * R, logs
    return root, sim


@pytest.mark.slow   # > 6 s on 2 cores: kept out of the fast subset (issue 30)
@pytest.mark.parametrize("R,placement", GROUPS)
def test_blocks_on_R_ranks_end_with_the_simulators_parameters_and_bytes(runs, R, placement):
    root, sim = runs
    got = torch.load(root / f"hybrid-R{R}-{placement}.pt", weights_only=False)
    names = list(CASES) + (list(UNEVEN) if R == 4 else [])
    assert sorted(got) == sorted(names)
    for name in names:
        want_p, want_b, _ = sim[name]
        p, b, rec = got[name]["params"], got[name]["bytes"], got[name]["record"]
        rel = (p - want_p).abs().max().item() / want_p.abs().max().item()
        assert rel <= 1e-5, (name, rel)
        assert torch.equal(b, want_b), name                              # bytes per node: the simulator's
        assert rec["dist_ranks"] == R
        n = want_p.shape[0]
        assert rec["dist_block_sizes"] == [len(x) for x in _blocks(make_placement(placement, n, R, seed=5), R)]
        assert rec["bytes_between_ranks"] == rec["bytes_between_ranks_measured"], name   # counted = on the wire
        if R == 1:
            assert rec["bytes_between_ranks"] == 0 and rec["crossing_edges"] == 0
    # a static graph and a fixed payload: between ranks = crossing edges × payload × steps
    rec = got["dpsgd"]["record"]
    payload = sim["dpsgd"][0].shape[1] * 4          # fp32 model
    assert rec["bytes_between_ranks_measured"] == rec["crossing_edges"] * payload * STEPS
    w = make_topology("ring", 16).weights_np(0)
    assert rec["crossing_edges"] == crossing_edges(w, make_placement(placement, 16, R, seed=5))
    if (R, placement) == (4, "block"):
        assert rec["crossing_edges"] == 8


def _blocks(owner, R):
    from decent8.comm.placement import blocks
    return blocks(owner, R)


@pytest.mark.slow   # > 6 s on 2 cores: kept out of the fast subset (issue 30)
@pytest.mark.parametrize("R,placement", GROUPS)
def test_every_block_communicator_call_matches_the_simulator_rows(runs, R, placement):
    root, _ = runs
    for r in range(R):
        for item in torch.load(root / f"comm-R{R}-{placement}-rank{r}.pt", weights_only=False):
            assert item["diff"] <= 1e-6, (R, r, item)


# ------------------------------------------------------------------ a killed rank, resume
#: D-PSGD (continuous in its inputs: the float32 rounding of in-block vs whole-graph mixing
#: stays ~1e-7 over the run; a top-k selection could flip on it and diverge visibly)
KILL_CONFIG = ["nodes=8", "device=cpu", "data.name=digits", "model=mlp", "model.width=8", "topology=ring",
               "algorithm=dpsgd", "compression=identity", "epochs=4", "algorithm.consensus_rounds=3", "optimizer.milestones=[3.0]", "progress=false",
               "dist_timeout_s=20", "seed=3", "sim.chunk=1", "tensorboard=false"]


@pytest.mark.slow   # > 6 s on 2 cores: kept out of the fast subset (issue 30)
def test_a_killed_rank_is_named_with_its_nodes_and_resume_ends_like_the_uninterrupted_run(tmp_path):
    from decent8.train.loop import train
    (tmp_path / "logs").mkdir()
    run = tmp_path / "run"
    group = LocalNodes(2, [sys.executable, "-m", "decent8", "train", *KILL_CONFIG, "backend=distributed", "dist.ranks=2",
                           f"out_dir={tmp_path}", "name=run", "--quiet"], log_dir=tmp_path / "logs",
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    text = lambda r: (tmp_path / "logs" / f"node{r}.log").read_text()  # noqa: E731
    # meanwhile the uninterrupted reference: the same config in the simulator
    from decent8.config import load_config
    train(load_config(None, [*KILL_CONFIG, f"out_dir={tmp_path}", "name=sim"]), quiet=True)
    deadline = time.monotonic() + 300
    while not (run / "checkpoint-rank1.prev.pt").exists():   # rank 1 has saved epoch 2
        assert time.monotonic() < deadline and all(c is None for c in group.poll()), text(0) + text(1)
        time.sleep(0.01)
    os.kill(group.pids[1], signal.SIGKILL)
    killed_at = time.monotonic()
    while group.poll()[0] is None and time.monotonic() - killed_at < 60:
        time.sleep(0.02)
    took = time.monotonic() - killed_at
    group.stop()
    group.close()
    errors = [ln for ln in text(0).splitlines() if ln.startswith("decent8: error:")]
    assert group.poll()[0] not in (0, None) and took < 30, (took, text(0))
    assert len(errors) == 1 and "rank 1 (nodes 4–7)" in errors[0], text(0)
    assert "Traceback" not in text(0)
    # --resume with another number of ranks: one line saying why not
    from decent8.cli.launch_cmd import plan_launch
    with pytest.raises(ConfigError, match="trained on 2 ranks, not 4"):
        plan_launch(["--resume", str(run)], None, 4)
    done = subprocess.run([sys.executable, "-m", "decent8", "launch", "--resume", str(run), "--quiet"],
                          capture_output=True, text=True, timeout=400, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    sim = torch.load(tmp_path / "sim" / "checkpoint.pt", weights_only=False)["engine"]
    for r, nodes in enumerate(([0, 1, 2, 3], [4, 5, 6, 7])):
        state = torch.load(run / f"checkpoint-rank{r}.pt", weights_only=False)
        assert state["epoch"] == 4
        z = state["engine"]["z"]
        assert (z - sim["z"][nodes]).abs().max().item() <= 1e-5 * sim["z"].abs().max().item()
        assert state["engine"]["bytes_sent"].tolist() == sim["bytes_sent"][nodes].tolist()
    a = json.loads((tmp_path / "sim" / "summary.json").read_text())
    b = json.loads((run / "summary.json").read_text())
    assert b["node_accuracies"] == pytest.approx(a["node_accuracies"], abs=0.003) and b["steps"] == a["steps"]
    assert b["dist_ranks"] == 2 and b["crossing_edges"] == 4
