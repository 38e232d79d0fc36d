"""Marsit and its baselines: the simulator and the torch.distributed backend (gloo,
4 local processes) give the same bits and the same parameters for the same seed.

1. The all-reduce algorithms on fixed updates, step by step: every applied update,
   the compensation / error buffers and the byte counts agree exactly (ring; the 2-D
   torus too once the distributed backend implements ``permute_pass``).
2. ``decent8 launch --nodes 4 … algorithm=marsit`` against ``decent8 train`` in the
   simulator: the same checkpointed parameters, compensation, bytes and accuracies.
   (A small MLP: its per-node gradients are bitwise the same with 4 nodes stacked
   and with one per process, so the sign bits cannot differ by rounding.)

Skipped only where torch has no torch.distributed; a broken backend or a missing
``decent8 launch`` command fails (the first test).
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from tests._gloo import wait_nodes


pytestmark = [pytest.mark.slow, pytest.mark.skipif(not torch.distributed.is_available(),
                                                  reason="this torch build has no torch.distributed")]


def test_the_distributed_backend_and_the_launch_command_are_there():
    """What the parity runs below need: a broken backend or a missing command fails here, never skips."""
    from decent8.cli.main import COMMANDS
    from decent8.comm.distributed import DistributedCommunicator

    assert "launch" in COMMANDS and callable(DistributedCommunicator)


N = 4
D = 1001
STEPS = 6
SEED = 7
CASES = [("psgd", 0), ("marsit", 0), ("marsit", 3), ("signsgd", 0), ("ef_signsgd", 0)]

#: One rank: the all-reduce algorithms on the updates ``updates(t)`` (the same on every
#: process), with this node's generator; saves what it applied and its buffers.
WORKER = f'''
import os, sys, torch
from decent8.algorithms import make_allreduce_algorithm
from decent8.comm.distributed import DistributedCommunicator
from decent8.seeding import node_generators
from decent8.topology import make_topology

out, n, r = sys.argv[1], int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
comm = DistributedCommunicator(make_topology("ring", n), "cpu", timeout_s=60)
shapes = [("ring", None, None)] + ([("torus", 2, n // 2)] if comm.has_permute_pass else [])
res = {{}}
for shape, rows, cols in shapes:
    for name, K in {CASES!r}:
        comm.bytes_sent.zero_()
        algo = make_allreduce_algorithm(name, comm, shape, rows, cols, node_generators({SEED}, "compress", [r]),
                                        base_lr=0.1, eta_s=0.01, K=K)
        algo.init_state(torch.zeros(1, {D}))
        applied = []
        for t in range({STEPS}):
            u = torch.randn(n, {D}, generator=torch.Generator().manual_seed(100 + t)) * 0.01
            applied.append(algo.aggregate(u[r:r + 1], t, 0.1 if t < 3 else 0.05))
        res[f"{{shape}}/{{name}}/{{K}}"] = {{"applied": torch.cat(applied), "state": algo.state_dict(),
                                           "bytes": comm.bytes_sent.clone()}}
torch.save(res, f"{{out}}/rank{{r}}.pt")
comm.barrier()   # leave together: a rank exiting while peers still talk to it can abort
comm.close()
'''


def simulate(shape: str, rows, cols, name: str, K: int) -> dict:
    from decent8.algorithms import make_allreduce_algorithm
    from decent8.comm import SimulatorCommunicator
    from decent8.seeding import node_generators
    from decent8.topology import make_topology

    comm = SimulatorCommunicator(make_topology(shape, N, rows=rows, cols=cols))
    algo = make_allreduce_algorithm(name, comm, shape, rows, cols, node_generators(SEED, "compress", list(range(N))),
                                    base_lr=0.1, eta_s=0.01, K=K)
    algo.init_state(torch.zeros(N, D))
    applied = []
    for t in range(STEPS):
        u = torch.randn(N, D, generator=torch.Generator().manual_seed(100 + t)) * 0.01
        applied.append(algo.aggregate(u, t, 0.1 if t < 3 else 0.05))
    return {"applied": torch.stack(applied, 1), "state": algo.state_dict(), "bytes": comm.bytes_sent.clone()}


def run_nodes(command: list[str], log_dir, limit_s: float = 240) -> list[int]:
    from decent8.cli.launch_cmd import LocalNodes

    return wait_nodes(LocalNodes(N, command, log_dir=log_dir), limit_s)


def test_allreduce_algorithms_apply_the_same_bits_in_both_backends(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    codes = run_nodes([sys.executable, str(script), str(tmp_path)], tmp_path)
    assert codes == [0] * N, "\n".join((tmp_path / f"node{r}.log").read_text() for r in range(N))
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(N)]
    assert ranks[0], "no results"
    for key in ranks[0]:
        shape, name, K = key.split("/")
        rows, cols = (2, N // 2) if shape == "torus" else (None, None)
        sim = simulate(shape, rows, cols, name, int(K))
        for r in range(N):
            got = ranks[r][key]
            assert torch.equal(got["applied"], sim["applied"][r]), (key, r)   # the same sign bits / sums
            for buf, value in sim["state"].items():
                assert torch.equal(got["state"][buf][0], value[r]), (key, r, buf)
            assert got["bytes"].tolist() == [sim["bytes"][r].item()], (key, r)


CONFIG = [f"nodes={N}", "device=cpu", "data.name=digits", "model=mlp", "model.width=16", "topology=ring", "skew=0",
          "algorithm=marsit", "marsit.K=5", "marsit.eta_s=0.01", "epochs=2", "algorithm.consensus_rounds=2",
          "progress=false", "seed=3", "dist_timeout_s=30",
          "sim.chunk=1"]  # each node computed exactly as a rank computes it: the parameters are bit-equal


def test_decent8_launch_marsit_ends_with_the_simulators_parameters(tmp_path):
    from decent8.config import load_config
    from decent8.train.loop import train

    train(load_config(None, [*CONFIG, f"out_dir={tmp_path}", "name=sim"]), quiet=True)
    done = subprocess.run([sys.executable, "-m", "decent8", "launch", "--nodes", str(N), *CONFIG,
                           f"out_dir={tmp_path}", "name=dist", "--quiet"],
                          capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    sim = torch.load(tmp_path / "sim" / "checkpoint.pt", weights_only=False)["engine"]
    for r in range(N):
        eng = torch.load(tmp_path / "dist" / f"checkpoint-rank{r}.pt", weights_only=False)["engine"]
        assert torch.equal(eng["z"][0], sim["z"][r]), r
        assert torch.equal(eng["algorithm"]["compensation"][0], sim["algorithm"]["compensation"][r]), r
        assert eng["bytes_sent"].tolist() == [sim["bytes_sent"][r].item()]
    a = json.loads((tmp_path / "sim" / "summary.json").read_text())
    b = json.loads((tmp_path / "dist" / "summary.json").read_text())
    assert b["node_accuracies"] == a["node_accuracies"]
    assert (b["bytes_sent_per_node"], b["message_bytes"], b["steps"]) == (a["bytes_sent_per_node"], a["message_bytes"], a["steps"])
