"""``algorithm.consensus`` on the torch.distributed backend (gloo, 4 local processes): the
final rounds of each kind end with the simulator's numbers (both backends run the same
algorithm and communicator code; exact rounds send the dense fp32 model)."""
from __future__ import annotations

import json
import sys

import pytest
import torch

from decent8.cli.launch_cmd import LocalNodes
from decent8.config import load_config
from decent8.train.loop import train
from tests._gloo import wait_nodes

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not torch.distributed.is_available(), reason="needs torch.distributed")]

N = 4
ROUNDS = 5
CONFIG = [f"nodes={N}", "device=cpu", "data.name=digits", "model=mlp", "model.width=16", "topology=directed_ring",
          "algorithm=choco", "compression=topk", "epochs=1", f"algorithm.consensus_rounds={ROUNDS}", "progress=false",
          "dist_timeout_s=20", "seed=3", "sim.chunk=1", "tensorboard=false", "checkpoint=false"]


@pytest.mark.parametrize("kind", ["compressed", "exact"])
def test_final_rounds_on_gloo_ranks_end_like_the_simulator(tmp_path, kind):
    args = [*CONFIG, f"algorithm.consensus={kind}", f"out_dir={tmp_path}"]
    sim, _ = train(load_config(None, [*args, "name=sim"]), quiet=True)
    group = LocalNodes(N, [sys.executable, "-m", "decent8", "train", *args, "backend=distributed", "name=dist",
                           "--quiet"], log_dir=tmp_path)
    assert wait_nodes(group, 240) == [0] * N, "\n".join((tmp_path / f"node{r}.log").read_text() for r in range(N))
    dist = json.loads((tmp_path / "dist" / "summary.json").read_text())
    assert dist["consensus"] == sim["consensus"] == kind
    assert dist["node_accuracies"] == sim["node_accuracies"]
    assert dist["averaged_model_accuracy"] == sim["averaged_model_accuracy"]
    assert dist["consensus_distance"] == pytest.approx(sim["consensus_distance"], rel=1e-4, abs=1e-6)
    assert dist["before_consensus_rounds"] == pytest.approx(sim["before_consensus_rounds"], rel=1e-4, abs=1e-6)
    assert dist["bytes_sent_per_node"] == sim["bytes_sent_per_node"]
    # what the rounds sent: 5 messages of the run's format (compressed) or of 4·d bytes (exact), one out-neighbour
    trained = sim["message_bytes"] * sim["steps_per_epoch"]
    per_round = 4 * sim["parameters"] if kind == "exact" else sim["message_bytes"]
    assert sim["bytes_sent_per_node"] == pytest.approx(trained + ROUNDS * per_round)
