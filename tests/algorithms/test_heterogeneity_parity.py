"""Issue 17: gradient tracking, GUT, QG-GUTm, D² and RelaySGD give the same parameters, state and
bytes in the simulator and on 4 gloo processes (one node each), step by step on the
heterogeneous least-squares problem (tests/heterogeneity_problem.py).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import torch

from decent8.cli.launch_cmd import LocalNodes
from decent8.comm.simulator import SimulatorCommunicator
from decent8.topology import make_topology

from tests.heterogeneity_problem import make_engine, problem

pytestmark = [pytest.mark.skipif(not torch.distributed.is_available(), reason="needs torch.distributed"),
              pytest.mark.slow]          # 4 worker processes: ~7 s

N = 4
STEPS = 12
#: (case name, algorithm, topology, engine options)
CASES = [
    ("gt", "gt", "directed_ring", {}),
    ("gt_topk", "gt", "ring", {"compression": "topk", "gamma": 0.5}),
    ("gt_push", "gt", "star", {"push_sum": True}),
    ("gut", "gut", "directed_ring", {"momentum": 0.9}),
    ("qg_gutm", "qg_gutm", "ring", {"kind": "qgm", "momentum": 0.9}),
    ("d2", "d2", "ring", {"gamma": 0.5}),
    ("relaysgd", "relaysgd", "ring", {}),
]

WORKER = f'''
import os, sys, torch
sys.path.insert(0, sys.argv[2])
from decent8.comm.distributed import DistributedCommunicator
from decent8.topology import make_topology
from tests.heterogeneity_problem import make_engine, problem

out, r = sys.argv[1], int(os.environ["RANK"])
A, b, _ = problem(0.3, n={N})
res = {{}}
for case, name, topo, kw in {CASES!r}:
    comm = DistributedCommunicator(make_topology(topo, {N}), "cpu", 30.0)
    engine = make_engine(name, comm, A, b, **kw)
    for t in range({STEPS}):
        engine.train_step(None, None, 0.1 if t < 6 else 0.05)
    engine.consensus_round()
    res[case] = engine.state_dict()
    comm.barrier()
torch.save(res, f"{{out}}/rank{{r}}.pt")
comm.barrier()   # leave together
comm.close()
'''


def simulate(name: str, topo: str, kw: dict) -> dict:
    A, b, _ = problem(0.3, n=N)
    engine = make_engine(name, SimulatorCommunicator(make_topology(topo, N)), A, b, **kw)
    for t in range(STEPS):
        engine.train_step(None, None, 0.1 if t < 6 else 0.05)
    engine.consensus_round()
    return engine.state_dict()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    root = tmp_path_factory.mktemp("hetero_parity")
    script = root / "worker.py"
    script.write_text(WORKER)
    repo = str(Path(__file__).resolve().parents[2])
    group = LocalNodes(N, [sys.executable, str(script), str(root), repo], log_dir=root)
    deadline = time.monotonic() + 240
    while any(c is None for c in group.poll()):
        if time.monotonic() > deadline:
            group.stop()
            pytest.fail("parity workers still running after 240 s")
        time.sleep(0.05)
    group.close()
    codes = group.poll()
    assert codes == [0] * N, "\n".join((root / f"node{r}.log").read_text() for r in range(N))
    return [torch.load(root / f"rank{r}.pt", weights_only=False) for r in range(N)]


@pytest.mark.parametrize("case,name,topo,kw", CASES, ids=[c[0] for c in CASES])
def test_simulator_and_distributed_agree_row_by_row(ranks, case, name, topo, kw):
    sim = simulate(name, topo, kw)
    for r in range(N):
        got = ranks[r][case]
        assert got["z"].shape == (1, sim["z"].shape[1])
        assert (got["z"][0] - sim["z"][r]).abs().max().item() < 1e-5, (case, r)
        assert set(got["algorithm"]) == set(sim["algorithm"])
        for key, buf in sim["algorithm"].items():
            assert (got["algorithm"][key][0] - buf[r]).abs().max().item() < 1e-5, (case, key, r)
        assert got["bytes_sent"].tolist() == [sim["bytes_sent"][r].item()], case
