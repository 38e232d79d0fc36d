"""The memory model of a run (decent8.cost.memory.run_memory) and the pre-flight refusal.

The estimate is held against the measured peak resident memory of a training run in a
fresh subprocess (``ru_maxrss``), for D-PSGD, Choco top-k and Deep-Squeeze top-k.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from decent8.cost.memory import run_memory
from decent8.train import build as build_module

from tests.helpers import call

# MLP on digits (8×8 inputs, 10 classes): 64·w + w + w·w + w + 10·w + 10 parameters
MLP128 = 64 * 128 + 128 + 128 * 128 + 128 + 128 * 10 + 10


def test_bytes_per_parameter_by_algorithm():
    """Hand-counted from what each component allocates (float32 4 B, float64 8 B)."""
    # Choco top-k: z 4 + (m 4, d 4) + (x̂ 4, hi 4, lo 4, x½ − x̂ 4) = 28 kept; a checkpoint copies z, m, x̂, hi, lo (+20)
    choco = run_memory(MLP128, 10, "choco", compression="topk")
    assert (choco.kept, choco.step, choco.checkpoint, choco.per_parameter) == (28, 34, 48, 48)
    assert choco.total == 10 * MLP128 * 48
    # without checkpoints the step decides: + gradient 4 + top-k's selection 2
    assert run_memory(MLP128, 10, "choco", compression="topk", checkpoint=False).per_parameter == 34
    # D-PSGD: z 4 + m 4 + d 4; a step adds the gradient 4 and Σ_j W_ij x½_j with the communicator's temporaries 8
    assert run_memory(MLP128, 10, "dpsgd", compression="identity").per_parameter == 24
    # Deep-Squeeze: z, m, d, e = 16; a step adds the gradient, v, c, Σ_j W_ij c_j, their difference, top-k's 2
    assert run_memory(MLP128, 10, "deepsqueeze", compression="topk").per_parameter == 16 + 4 + 16 + 2
    # Adam keeps m and v; quasi-global momentum holds the direction and the model before the step
    assert run_memory(MLP128, 10, "dpsgd", "adam", "identity").kept == 4 + 8
    assert run_memory(MLP128, 10, "dpsgd", "qgm", "identity").step == 4 + 4 + 4 + 8 + 8


def test_a_run_that_cannot_fit_is_refused_in_one_line(monkeypatch, tmp_path):
    """200 nodes of a width-128 MLP need 200 · 26,122 · 48 B = 0.25 GB beyond the process:
    with 0.1 GB more than the process holds available, the run stops before any run folder."""
    monkeypatch.setattr(build_module, "_memory_bytes", lambda device: build_module._process_bytes() + 10**8)
    rc, out, err = call(["train", "model=mlp", "model.width=128", "nodes=200", "device=cpu", "epochs=1",
                         f"out_dir={tmp_path}", "progress=false"])
    assert rc == 2 and len(err) == 1, err
    line = err[0]
    need = 200 * MLP128 * 48
    assert line.startswith("decent8: error: nodes: 200 node(s) of mlp width 128 (26,122 parameters) need about ")
    assert "(48 B per parameter and node: model 4, optimizer 8, algorithm 16, checkpoint copy 20;" in line
    held_gb = float(line.split("; ")[1].split(" GB held")[0])
    assert float(line.split("need about ")[1].split(" GB")[0]) == pytest.approx(need / 1e9 + held_gb, abs=0.02)
    # the largest node count that fits in 90 % of the 0.1 GB, and checkpoint=false (34 B) as the other way out
    assert f"use nodes={9 * 10**7 // (MLP128 * 48):,} or fewer, checkpoint=false (34 B)" in line
    assert not any(tmp_path.iterdir())


CHILD = r"""
import json, resource, sys
import decent8
from decent8.train import build as b
seen = {}
original = b.check_model_size
def check(*args, **kwargs):
    seen["held"] = b._process_bytes()
    seen["estimate"] = original(*args, **kwargs)
    return seen["estimate"]
b.check_model_size = check
decent8.train(**json.loads(sys.argv[1]))
seen["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(seen))
"""


@pytest.mark.slow
@pytest.mark.parametrize("algorithm,compression", [("dpsgd", "identity"), ("choco", "topk"), ("deepsqueeze", "topk")])
def test_estimate_within_20_percent_of_the_measured_peak(algorithm, compression, tmp_path):
    """150 nodes of a width-512 MLP (301,066 parameters, 181 MB per model-sized fp32 buffer),
    trained one epoch through ``decent8.train`` in a fresh process: the estimate (what the
    process held at the check plus :func:`run_memory`) is within 20 % of its peak resident memory,
    and so is the nodes' state alone (the peak minus what was held at the check)."""
    options = {"model": "mlp", "model.width": 512, "nodes": 150, "data.batch_size": 4, "epochs": 1,
               "algorithm": algorithm, "compression": compression, "algorithm.consensus_rounds": 1,
               "eval.nodes": 4, "sim.chunk": 1, "device": "cpu", "tensorboard": False, "out_dir": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(options)], capture_output=True, text=True,
                          timeout=600, env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    state = run_memory(301_066, 150, algorithm, compression=compression).total
    assert seen["estimate"] - state == pytest.approx(seen["held"], abs=2**20)   # what the process held
    seen["held"] = seen["estimate"] - state
    print(f"{algorithm}/{compression}: estimate {seen['estimate'] / 2**20:.0f} MB, peak {seen['peak'] / 2**20:.0f} MB, "
          f"state {state / 2**20:.0f} MB vs peak − held {(seen['peak'] - seen['held']) / 2**20:.0f} MB")
    assert seen["estimate"] == pytest.approx(seen["peak"], rel=0.2)
    assert state == pytest.approx(seen["peak"] - seen["held"], rel=0.2)


def test_decent8_cost_shows_the_simulated_runs_memory():
    """``decent8 cost --nodes``: the same declarations as the pre-flight check — the
    10,000-node MNIST MLP (118,282 parameters) with Choco top-k holds 48 B per parameter and node."""
    rc, out, err = call(["cost", "--model", "mlp", "--dataset", "mnist", "--width", "128", "--nodes", "10000",
                         "--algorithm", "choco", "--compression", "topk", "--format", "json"])
    assert rc == 0, err
    m = json.loads(out)["simulation_memory"]
    assert (m["parameters"], m["bytes_per_parameter"]) == (118_282, 48)
    assert m["gb"] == pytest.approx(10_000 * 118_282 * 48 / 1e9)
    assert m["parts"] == {"model": 4, "optimizer": 8, "algorithm": 16, "checkpoint copy": 20}
