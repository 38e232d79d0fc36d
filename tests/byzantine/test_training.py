"""Training with ``byzantine.*``: with no attacker every robust rule trains like plain
averaging (digits, IID), and a seeded attack × defence ends the same in the simulator and
on 2 gloo ranks holding blocks of nodes (both run :class:`decent8.byzantine.RobustGossip`
over :meth:`~decent8.comm.base.Communicator.exchange_messages`), for D-PSGD and for
Choco-SGD's per-edge public copies."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from decent8.cli.launch_cmd import LocalNodes
from decent8.config import load_config
from decent8.train.loop import train
from tests._gloo import wait_nodes

pytestmark = pytest.mark.slow   # whole training runs: minutes on the shared 2-core machine

IID = ["data.name=digits", "model=mlp", "model.width=32", "nodes=8", "device=cpu", "skew=0", "algorithm=dpsgd",
       "compression=identity", "topology=torus", "topology.rows=2", "topology.cols=4", "epochs=10", "eval_every=10",
       "algorithm.consensus_rounds=5", "checkpoint=false", "progress=false", "tensorboard=false", "sim.chunk=1"]


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    out = tmp_path_factory.mktemp("plain")
    return train(load_config(None, [*IID, f"out_dir={out}", "name=plain"]), quiet=True)[0]


@pytest.mark.parametrize("rule", ["clipped_gossip", "trimmed_mean", "median", "self_centered_clipping"])
def test_with_no_attacker_every_rule_trains_within_one_point_of_plain_averaging(tmp_path, plain, rule):
    robust, _ = train(load_config(None, [*IID, f"out_dir={tmp_path}", "name=robust", f"byzantine.aggregator={rule}",
                                         "byzantine.b=1"]), quiet=True)
    assert robust["byzantine"] == {"nodes": [], "attack": "none", "aggregator": rule, "b": 1}
    assert robust["honest_mean_node_accuracy"] == robust["mean_node_accuracy"]
    print(f"{rule}: {robust['mean_node_accuracy']:.4f} (plain averaging {plain['mean_node_accuracy']:.4f})")
    assert abs(robust["mean_node_accuracy"] - plain["mean_node_accuracy"]) <= 0.01


PARITY = ["data.name=digits", "model=mlp", "model.width=16", "nodes=8", "device=cpu", "skew=0.8", "algorithm=dpsgd",
          "compression=identity", "topology=torus", "topology.rows=2", "topology.cols=4", "epochs=1",
          "algorithm.consensus_rounds=3", "byzantine.nodes=1", "byzantine.attack=alie",
          "byzantine.aggregator=trimmed_mean", "checkpoint=false", "progress=false", "tensorboard=false", "seed=2",
          "sim.chunk=1", "dist_timeout_s=30"]


#: Choco-SGD's per-edge public copies (decent8.byzantine.copies), top-k messages, the same attack and rule
CHOCO = ["algorithm=choco", "compression=topk", "compression.ratio=0.9"]


@pytest.mark.skipif(not torch.distributed.is_available(), reason="needs torch.distributed")
@pytest.mark.parametrize("algorithm", [[], CHOCO], ids=["dpsgd", "choco-topk"])
def test_alie_against_trimmed_mean_ends_the_same_on_two_gloo_ranks(tmp_path, algorithm):
    args = [*PARITY, *algorithm]
    sim, _ = train(load_config(None, [*args, f"out_dir={tmp_path}", "name=sim"]), quiet=True)
    group = LocalNodes(2, [sys.executable, "-m", "decent8", "train", *args, f"out_dir={tmp_path}", "name=dist",
                           "backend=distributed", "dist.ranks=2", "--quiet"], log_dir=tmp_path)
    assert wait_nodes(group, 400) == [0, 0], "\n".join((tmp_path / f"node{r}.log").read_text() for r in range(2))
    dist = json.loads((tmp_path / "dist" / "summary.json").read_text())
    assert dist["byzantine"] == sim["byzantine"] and len(sim["byzantine"]["nodes"]) == 1
    assert dist["node_accuracies"] == sim["node_accuracies"]
    assert dist["honest_mean_node_accuracy"] == pytest.approx(sim["honest_mean_node_accuracy"], abs=1e-12)
    assert dist["honest_consensus_distance"] == pytest.approx(sim["honest_consensus_distance"], rel=1e-4, abs=1e-7)
    assert dist["bytes_sent_per_node"] == sim["bytes_sent_per_node"]


#: 4 nodes on 2 ranks of 2 (``decent8 launch --nodes 4 --ranks 2``), placed at random: node 2 lies (dissensus)
#: to its ring neighbours 1 and 3, which ClippedGossip protects
HYBRID = ["data.name=digits", "model=mlp", "model.width=16", "device=cpu", "skew=0.8", "algorithm=dpsgd",
          "compression=identity", "topology=ring", "epochs=1", "algorithm.consensus_rounds=3", "byzantine.nodes=[2]",
          "byzantine.attack=dissensus", "byzantine.aggregator=clipped_gossip", "byzantine.b=1", "checkpoint=false",
          "progress=false", "tensorboard=false", "seed=1", "sim.chunk=1", "dist_timeout_s=30"]


@pytest.mark.skipif(not torch.distributed.is_available(), reason="needs torch.distributed")
def test_dissensus_against_clipped_gossip_ends_the_same_through_decent8_launch_ranks(tmp_path):
    """The CLI path: ``decent8 launch --nodes 4 --ranks 2`` with a random placement (blocks that
    are not contiguous ids, so the lying node's receivers sit on either rank) against the
    one-process simulator, with the bound of the 2-rank test above. Seed 1 places nodes 0, 3 on
    rank 0 and 1, 2 on rank 1: the lying node 2 reaches node 1 on its own rank and node 3 across."""
    from decent8.comm.placement import blocks, make_placement
    assert blocks(make_placement("random", 4, 2, 1), 2) == [[0, 3], [1, 2]]
    sim, _ = train(load_config(None, [*HYBRID, "nodes=4", f"out_dir={tmp_path}", "name=sim"]), quiet=True)
    done = subprocess.run([sys.executable, "-m", "decent8", "launch", "--nodes", "4", "--ranks", "2", *HYBRID,
                           "dist.placement=random", f"out_dir={tmp_path}", "name=dist", "--quiet"],
                          capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    dist = json.loads((tmp_path / "dist" / "summary.json").read_text())
    assert dist["byzantine"] == sim["byzantine"] == {"nodes": [2], "attack": "dissensus",
                                                     "aggregator": "clipped_gossip", "b": 1}
    assert dist["node_accuracies"] == sim["node_accuracies"]
    assert dist["honest_mean_node_accuracy"] == pytest.approx(sim["honest_mean_node_accuracy"], abs=1e-12)
    assert dist["honest_consensus_distance"] == pytest.approx(sim["honest_consensus_distance"], rel=1e-4, abs=1e-7)
    assert dist["bytes_sent_per_node"] == sim["bytes_sent_per_node"]
