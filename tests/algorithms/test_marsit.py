"""Marsit and its baselines on the ring / 2-D torus all-reduce (MARSIT.md).

Unbiased bit-wise sign aggregation (vectorised trials), the real bytes on the wire,
the fp32 all-reduce against the exact mean, the update rules, the engine/CLI path and
one-line errors for bad input.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch
import yaml

from decent8.algorithms import ALLREDUCE_ALGORITHMS, make_allreduce_algorithm
from decent8.algorithms.marsit import BitVoteCodec, sign_allreduce
from decent8.cli.main import main
from decent8.collectives import RingAllReduce
from decent8.comm import SimulatorCommunicator
from decent8.comm.base import Communicator
from decent8.errors import ConfigError
from decent8.seeding import node_generators
from decent8.topology import make_topology


class RecordingComm(SimulatorCommunicator):
    """The simulator, remembering the dtype and per-node bytes of every ring pass."""

    def __init__(self, topology):
        super().__init__(topology)
        self.passes: list[tuple[torch.dtype, int]] = []

    def _ring_pass(self, chunk):
        self.passes.append((chunk.dtype, chunk[0].numel() * chunk.element_size()))
        return super()._ring_pass(chunk)

    def _permute_pass(self, chunk, dst):
        self.passes.append((chunk.dtype, chunk[0].numel() * chunk.element_size()))
        return super()._permute_pass(chunk, dst)


def comm_for(shape: str, n: int, rows=None, cols=None, cls=SimulatorCommunicator):
    return cls(make_topology(shape, n, rows=rows, cols=cols))


def gens(n: int, seed: int = 0):
    return node_generators(seed, "test", list(range(n)))


# ------------------------------------------------------------- fp32 all-reduce
@pytest.mark.parametrize("shape,n,rows,cols", [
    ("ring", 2, None, None), ("ring", 3, None, None), ("directed_ring", 8, None, None),
    ("torus", 8, 2, 4), ("torus", 9, None, None), ("torus", 12, 4, 3), ("torus", 5, None, None),
])
def test_fp32_ring_and_torus_allreduce_equal_the_exact_mean(shape, n, rows, cols):
    comm = comm_for(shape, n, rows, cols)
    ar = RingAllReduce(comm, shape, rows, cols)
    x = torch.randn(n, 1001, generator=torch.Generator().manual_seed(n))
    out = ar.mean(x)
    assert out.shape == x.shape
    assert torch.allclose(out, x.mean(0, keepdim=True).expand_as(x), atol=1e-6)
    assert all(torch.equal(out[0], out[i]) for i in range(n))   # the same bits on every node


def test_torus_levels_and_neighbours():
    ar = RingAllReduce(comm_for("torus", 8, 2, 4), "torus", 2, 4)
    assert ar.levels == [4, 2]                 # rows of 4, then columns of 2
    assert RingAllReduce(comm_for("torus", 5), "torus").levels == [5]   # 1 × 5 is a ring


# ------------------------------------------------ unbiased bit-wise aggregation
def positive_patterns(M: int, seed: int) -> torch.Tensor:
    """``[M, M + 1]``: coordinate j has j positive workers, chosen at random."""
    g = torch.Generator().manual_seed(seed)
    pattern = torch.zeros(M, M + 1, dtype=torch.bool)
    for j in range(M + 1):
        pattern[torch.randperm(M, generator=g)[:j], j] = True
    return pattern


def assert_unbiased(comm, ar, M: int, trials: int = 3000):
    pattern = positive_patterns(M, seed=M)
    # every trial is one more copy of the M + 1 coordinates in the flat vector: all trials
    # run in one all-reduce, the copies land in every chunk (every chain order)
    positive = pattern.repeat(1, trials)
    bits = sign_allreduce(ar, positive, BitVoteCodec(gens(M), unbiased=True))
    assert all(torch.equal(bits[0], bits[i]) for i in range(M))
    freq = bits[0].view(trials, M + 1).double().mean(0)
    frac = pattern.double().mean(0)
    se = (frac * (1 - frac) / trials).sqrt()
    assert torch.all((freq - frac).abs() <= 3 * se + 1e-12), (freq, frac, se)
    # E[2v − 1] is the mean of the workers' signs
    assert torch.allclose(2 * freq - 1, (2 * pattern.double() - 1).mean(0), atol=6 * se.max().item() + 1e-12)


@pytest.mark.parametrize("M", [2, 3, 8, 16])
def test_final_bit_is_one_with_the_fraction_of_positive_workers_on_a_ring(M):
    comm = comm_for("ring", M)
    assert_unbiased(comm, RingAllReduce(comm, "ring"), M)


@pytest.mark.parametrize("rows,cols", [(2, 2), (2, 4), (4, 4)])
def test_final_bit_is_unbiased_on_a_torus(rows, cols):
    comm = comm_for("torus", rows * cols, rows, cols)
    assert_unbiased(comm, RingAllReduce(comm, "torus", rows, cols), rows * cols)


def test_cascading_re_signing_is_biased_towards_the_end_of_the_chain():
    """Only worker 0 is positive. In chunk j the chain starts at worker j, so worker 0 is
    at chain position p = (−j mod M) + 1. Marsit: P(1) = 1/M in every chunk; re-signing
    with fair ties: 2^−(M − p + 1) (2^−(M − 1) at p = 1)."""
    M, trials = 8, 4000
    ar = RingAllReduce(comm_for("ring", M), "ring")
    positive = torch.zeros(M, 8 * M * trials, dtype=torch.bool)
    positive[0] = True
    for unbiased in (True, False):
        bits = sign_allreduce(ar, positive, BitVoteCodec(gens(M, 1), unbiased=unbiased))
        per_chunk = bits[0].view(M, -1).double()
        for j in range(M):
            p = (-j) % M + 1
            want = 1 / M if unbiased else 2.0 ** -(M - max(p, 2) + 1)
            se = math.sqrt(want * (1 - want) / per_chunk.shape[1])
            got = per_chunk[j].mean().item()
            assert abs(got - want) <= 4 * se, (unbiased, j, got, want)


# ------------------------------------------------------------------------ bytes
def padded(d: int, m: int) -> int:
    return -(-d // m) * m


@pytest.mark.parametrize("M", [2, 3, 8])
def test_marsit_sends_one_bit_per_element_per_hop(M):
    d = 1001
    comm = comm_for("ring", M, cls=RecordingComm)
    algo = make_allreduce_algorithm("marsit", comm, "ring", generators=gens(M), eta_s=0.01, K=2)
    algo.init_state(torch.zeros(M, d))
    u = torch.randn(M, d, generator=torch.Generator().manual_seed(0))
    algo.aggregate(u, step=0, lr=0.1)                      # a sign step
    L = padded(d, 8 * M)
    assert L - d < 8 * M
    chunk_bytes = L // (8 * M)
    assert comm.passes == [(torch.uint8, chunk_bytes)] * (2 * (M - 1))   # what ring_pass moved
    bits_per_worker = 2 * (M - 1) * L / M                  # = 2(M − 1)·d/M + padding
    assert comm.bytes_sent.tolist() == [bits_per_worker / 8] * M
    assert algo.message_bytes() == bits_per_worker / 8
    # step 1 is the K-th: one fp32 all-reduce instead
    comm.passes.clear()
    before = comm.bytes_sent.clone()
    algo.aggregate(u, step=1, lr=0.1)
    Lf = padded(d, M)
    assert comm.passes == [(torch.float32, Lf // M * 4)] * (2 * (M - 1))
    assert (comm.bytes_sent - before).tolist() == [2 * (M - 1) * Lf / M * 4] * M


def test_torus_bytes_per_worker():
    R, C, d = 2, 4, 1001
    comm = comm_for("torus", R * C, R, C, cls=RecordingComm)
    algo = make_allreduce_algorithm("marsit", comm, "torus", R, C, generators=gens(R * C))
    algo.init_state(torch.zeros(R * C, d))
    algo.aggregate(torch.randn(R * C, d), step=0, lr=0.1)
    L = padded(d, 8 * R * C)
    want = 2 * (C - 1) * L / (8 * C) + 2 * (R - 1) * L / (8 * C * R)
    assert comm.bytes_sent.tolist() == [want] * (R * C)
    assert algo.message_bytes() == want
    assert all(dtype == torch.uint8 for dtype, _ in comm.passes)


@pytest.mark.parametrize("name", ALLREDUCE_ALGORITHMS)
@pytest.mark.parametrize("shape,n,rows,cols", [("ring", 5, None, None), ("torus", 8, 2, 4)])
def test_message_bytes_match_what_the_passes_moved(name, shape, n, rows, cols):
    comm = comm_for(shape, n, rows, cols, cls=RecordingComm)
    algo = make_allreduce_algorithm(name, comm, shape, rows, cols, generators=gens(n))
    algo.init_state(torch.zeros(n, 777))
    algo.aggregate(torch.randn(n, 777), step=0, lr=0.1)
    sent = sum(b for _, b in comm.passes)
    assert comm.bytes_sent.tolist() == [float(sent)] * n
    assert algo.message_bytes() == sent


# ----------------------------------------------------------------- update rules
def test_psgd_applies_the_mean_update():
    comm = comm_for("ring", 4)
    algo = make_allreduce_algorithm("psgd", comm, "ring")
    u = torch.randn(4, 50)
    algo.init_state(u)
    assert torch.allclose(algo.aggregate(u, 0, 0.1), u.mean(0).expand(4, 50), atol=1e-7)


@pytest.mark.parametrize("K", [0, 4])
def test_marsit_compensation_keeps_x_minus_mean_c_on_the_sgd_path(K):
    """y = x − mean(c) follows exact SGD; every K-th step x lands on y and c = 0."""
    n, d, lr = 4, 300, 0.1
    comm = comm_for("ring", n)
    algo = make_allreduce_algorithm("marsit", comm, "ring", generators=gens(n), base_lr=lr, eta_s=0.003, K=K)
    x = torch.zeros(n, d)
    algo.init_state(x)
    sgd = torch.zeros(d)
    g = torch.Generator().manual_seed(5)
    for t in range(10):
        u = 0.01 * torch.randn(n, d, generator=g)
        applied = algo.aggregate(u, t, lr)
        assert all(torch.equal(applied[0], applied[i]) for i in range(n))
        x -= applied
        sgd -= u.mean(0)
        y = x - algo.c.mean(0)
        assert torch.allclose(y, sgd.expand(n, d), atol=1e-5)
        if K and (t + 1) % K == 0:
            assert torch.count_nonzero(algo.c) == 0
            assert torch.allclose(x, sgd.expand(n, d), atol=1e-5)
        else:
            assert torch.allclose(applied.abs(), torch.full_like(applied, 0.003))


def test_marsit_reset_drop_applies_only_the_steps_mean_update():
    n, d = 4, 200
    algo = make_allreduce_algorithm("marsit", comm_for("ring", n), "ring", generators=gens(n), eta_s=0.003, K=2,
                                    reset="drop")
    algo.init_state(torch.zeros(n, d))
    u0, u1 = torch.randn(n, d) * 0.01, torch.randn(n, d) * 0.01
    algo.aggregate(u0, 0, 0.1)
    assert torch.count_nonzero(algo.c) > 0
    applied = algo.aggregate(u1, 1, 0.1)                  # the K-th step
    assert torch.allclose(applied, u1.mean(0).expand(n, d), atol=1e-7)
    assert torch.count_nonzero(algo.c) == 0


def test_ef_signsgd_is_exact_when_every_worker_sends_the_same_scaled_sign():
    n, d = 4, 64 * 4 * 2
    comm = comm_for("ring", n)
    algo = make_allreduce_algorithm("ef_signsgd", comm, "ring")
    u = torch.where(torch.rand(d) > 0.5, 0.25, -0.25).expand(n, d).clone()
    algo.init_state(u)
    assert torch.allclose(algo.aggregate(u, 0, 0.1), u, atol=1e-7)
    assert torch.count_nonzero(algo.e) == 0
    # different magnitudes: the error keeps what the sign dropped
    v = torch.randn(n, d)
    algo.aggregate(v, 1, 0.1)
    assert torch.count_nonzero(algo.e) > 0


def test_torus_needs_permute_pass():
    class RingOnly(SimulatorCommunicator):
        _permute_pass = Communicator._permute_pass

    with pytest.raises(ConfigError, match="permute_pass"):
        RingAllReduce(RingOnly(make_topology("torus", 8, rows=2, cols=4)), "torus", 2, 4)
    # a plain ring needs only ring_pass
    ar = RingAllReduce(RingOnly(make_topology("ring", 4)), "ring")
    x = torch.randn(4, 9)
    assert torch.allclose(ar.mean(x), x.mean(0).expand(4, 9), atol=1e-6)


# ----------------------------------------------------------- engine, CLI, errors
SMALL = ["nodes=4", "topology=ring", "skew=0", "model.width=4", "device=cpu", "progress=false",
         "algorithm.consensus_rounds=2"]


def test_marsit_k_trains_through_the_cli_with_real_bytes(tmp_path, capsys):
    # momentum pinned: one epoch with the (plain-SGD) marsit default is too short for the 0.3 check
    assert main(["train", "algorithm=marsit", "marsit.K=5", "marsit.eta_s=0.005", "optimizer.momentum=0.9", *SMALL, "epochs=1",
                 f"out_dir={tmp_path}", "name=m"]) == 0
    out = capsys.readouterr().out
    assert "sign-bits" in out
    run = tmp_path / "m"
    for f in ("config.yaml", "metrics.jsonl", "summary.json", "curves.png", "checkpoint.pt"):
        assert (run / f).exists(), f
    s = json.loads((run / "summary.json").read_text())
    steps = s["steps_per_epoch"]
    assert s["steps"] == steps + 2 and s["compression"] == "sign-bits" and s["algorithm"] == "marsit"
    d, M = s["parameters"], 4
    fp32_steps = steps // 5
    fp32_bytes = 2 * (M - 1) * padded(d, M) / M * 4
    assert s["message_bytes"] == 2 * (M - 1) * padded(d, 8 * M) / M / 8
    assert s["bytes_sent_per_node"] == (steps - fp32_steps) * s["message_bytes"] + fp32_steps * fp32_bytes
    assert s["consensus_distance"] < 1e-10                 # all workers hold the same model
    assert s["mean_node_accuracy"] > 0.3


@pytest.mark.slow
def test_marsit_resume_equals_the_uninterrupted_run(tmp_path):
    common = ["algorithm=marsit", "marsit.K=7", *SMALL, f"out_dir={tmp_path}", "--quiet"]
    assert main(["train", *common, "epochs=2", "name=full"]) == 0
    assert main(["train", *common, "epochs=1", "name=cut"]) == 0
    cfg_file = tmp_path / "cut" / "config.yaml"
    cfg = yaml.safe_load(cfg_file.read_text())
    cfg["epochs"] = 2
    cfg_file.write_text(yaml.safe_dump(cfg))
    (tmp_path / "cut" / "summary.json").unlink()
    assert main(["train", "--resume", str(tmp_path / "cut"), "--quiet"]) == 0
    a = torch.load(tmp_path / "full" / "checkpoint.pt", weights_only=False)["engine"]
    b = torch.load(tmp_path / "cut" / "checkpoint.pt", weights_only=False)["engine"]
    assert torch.equal(a["z"], b["z"])
    assert torch.equal(a["algorithm"]["compensation"], b["algorithm"]["compensation"])
    assert torch.equal(a["bytes_sent"], b["bytes_sent"])


BAD = [
    (["algorithm=marsit", "topology=complete"], "topology"),
    (["algorithm=psgd", "topology=star"], "topology"),
    (["algorithm=signsgd", "topology=exponential"], "topology"),
    (["algorithm=marsit", "topology=ring", "allreduce.K=-1"], "allreduce.K"),
    (["algorithm=marsit", "topology=ring", "allreduce.K=2.5"], "allreduce.K"),
    (["algorithm=marsit", "topology=ring", "allreduce.eta_s=0"], "allreduce.eta_s"),
    (["algorithm=marsit", "topology=ring", "allreduce.eta_s=-0.1"], "allreduce.eta_s"),
    (["algorithm=marsit", "topology=ring", "algorithm.push_sum=true"], "push_sum"),
    (["algorithm=marsit", "topology=ring", "allreduce.reset=sometimes"], "allreduce.reset"),
    (["algorithm=marsit", "topology=torus", "nodes=8", "topology.rows=3"], "topology.rows"),
    (["algorithm=marsit", "allreduce.bogus=1"], "allreduce.bogus"),
]


@pytest.mark.parametrize("args,option", BAD)
def test_bad_input_is_one_line_exit_2(args, option, tmp_path, capsys):
    code = main(["train", *args, f"out_dir={tmp_path / 'runs'}"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("decent8: error: ") and option in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_bad_input_exit_2_in_a_subprocess(tmp_path):
    r = subprocess.run([sys.executable, "-m", "decent8", "train", "algorithm=marsit", "topology=complete"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "topology" in r.stderr, r.stderr


def test_the_old_marsit_group_is_read_as_allreduce_with_a_one_line_notice(capsys, monkeypatch):
    from decent8 import config as config_module
    from decent8.config import from_dict, load_config

    monkeypatch.setattr(config_module, "_NOTICED", set())
    cfg = load_config(None, ["algorithm=psgd", "marsit.K=7", "allreduce.eta_s=0.01"])
    assert (cfg.allreduce.K, cfg.allreduce.eta_s) == (7, 0.01) and not hasattr(cfg, "marsit")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'marsit' is now 'allreduce'" in err[0]
    load_config(None, ["marsit.reset=drop"])                       # once per process
    assert capsys.readouterr().err == ""
    old_run = from_dict({"marsit": {"K": 3}, "allreduce": {"eta_s": 0.2}})   # a stored config.yaml: silent
    assert (old_run.allreduce.K, old_run.allreduce.eta_s) == (3, 0.2)
