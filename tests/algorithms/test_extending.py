"""Extension points (docs/extending.md): ``examples/my_algorithm.py`` (periodic gossip, not
part of decent8) runs from the user's folder by import path, in the simulator and on 4 gloo
processes with the same parameters, with top-k compression, through a kill and --resume,
and in ``decent8 cost``; ``compression=`` and ``topology=`` import paths; the resume gate."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "my_algorithm.py"
ALG = "algorithm=my_algorithm:MyAlgorithm"
#: 4 nodes on digits: ~22 steps per epoch, 3 epochs ≈ 66 steps (≥ 20), gossip every 4th step
CONFIG = ["nodes=4", "device=cpu", "data.name=digits", "model=mlp", "model.width=16", "topology=directed_ring",
          ALG, "compression=topk", "compression.ratio=0.9", "epochs=3", "algorithm.consensus_rounds=3",
          "progress=false", "seed=5", "sim.chunk=1", "dist_timeout_s=60"]


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def decent8(folder: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m decent8 ARGS`` run from ``folder`` (the user's folder with my_algorithm.py)."""
    return subprocess.run([sys.executable, "-m", "decent8", *args], cwd=folder, env=_env(), capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def user_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("user")
    shutil.copy(EXAMPLE, folder / "my_algorithm.py")
    return folder


@pytest.fixture(scope="module")
def sim_run(user_folder) -> Path:
    done = decent8(user_folder, "train", *CONFIG, "out_dir=runs", "name=sim", "--quiet")
    assert done.returncode == 0, done.stderr
    return user_folder / "runs" / "sim"


def test_the_example_is_short_and_decent8_does_not_know_it():
    lines = EXAMPLE.read_text().splitlines()
    code = [x for x in lines if x.strip()]
    assert len(lines) <= 40, len(lines)
    assert not (ROOT / "src" / "decent8" / "algorithms" / "my_algorithm.py").exists()
    assert "periodic_gossip" not in (ROOT / "src" / "decent8" / "algorithms" / "registry.py").read_text()
    assert code


@pytest.mark.slow   # > 6 s on 2 cores: kept out of the fast subset (issue 30)
def test_the_example_trains_in_the_simulator_gossiping_every_fourth_step(sim_run):
    s = json.loads((sim_run / "summary.json").read_text())
    assert s["algorithm"] == "my_algorithm:MyAlgorithm" and s["compression"] == "topk"
    steps = 3 * s["steps_per_epoch"]
    assert steps >= 20 and s["steps"] == steps + 3 and s["mean_node_accuracy"] > 0.2   # chance: 0.1
    assert s["sim_time_s"] > 0 and s["time_model"]                      # the time model ran
    # bytes: steps // 4 gossip rounds in training + 3 consensus rounds, one top-k message each
    choco_bytes = s["message_bytes"] * 4                                # per gossip round
    assert s["bytes_sent_per_node"] == pytest.approx(choco_bytes * (steps // 4 + 3))


@pytest.mark.slow   # three `decent8` processes (> 6 s on 2 cores): kept out of the fast subset (issue 30)
def test_the_examples_own_option_sets_the_period_and_is_checked(user_folder):
    cfg = [c for c in CONFIG if not c.startswith(("epochs=", "algorithm.consensus_rounds="))]
    done = decent8(user_folder, "train", *cfg, "epochs=1", "algorithm.consensus_rounds=0",
                   "algorithm.params.period=8", "out_dir=runs", "name=period8", "--quiet")
    assert done.returncode == 0, done.stderr
    run = user_folder / "runs" / "period8"
    s = json.loads((run / "summary.json").read_text())
    steps = s["steps_per_epoch"]
    assert s["message_bytes"] * 8 * (steps // 8) == pytest.approx(s["bytes_sent_per_node"])  # every 8th step
    assert "period: 8" in (run / "config.yaml").read_text()                                   # reruns as it ran
    for bad, says in [("algorithm.params.perod=8", "has no parameter 'perod'; its parameters: period"),
                      ("algorithm.params.period=2.5", "must be int like its default 4")]:
        done = decent8(user_folder, "train", *cfg, bad, "out_dir=runs")
        assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
        assert says in done.stderr


@pytest.mark.slow   # > 6 s on 2 cores: kept out of the fast subset (issue 30)
def test_the_same_parameters_on_4_gloo_processes(user_folder, sim_run):
    done = decent8(user_folder, "launch", "--nodes", "4", *CONFIG, "backend=distributed", "out_dir=runs",
                   "name=dist", "--quiet")
    assert done.returncode == 0, done.stderr
    z_sim = torch.load(sim_run / "checkpoint.pt", weights_only=False)["engine"]["z"]
    for r in range(4):
        z = torch.load(user_folder / "runs" / "dist" / f"checkpoint-rank{r}.pt", weights_only=False)["engine"]["z"]
        assert (z[0] - z_sim[r]).abs().max().item() < 1e-5
    a = json.loads((sim_run / "summary.json").read_text())
    b = json.loads((user_folder / "runs" / "dist" / "summary.json").read_text())
    assert a["bytes_sent_per_node"] == b["bytes_sent_per_node"]


@pytest.mark.slow   # > 6 s on 2 cores: kept out of the fast subset (issue 30)
def test_a_killed_run_resumes_only_when_the_algorithm_is_named_again(user_folder, sim_run):
    run = user_folder / "runs" / "cut"
    p = subprocess.Popen([sys.executable, "-m", "decent8", "train", *CONFIG, "out_dir=runs", "name=cut", "--quiet"],
                         cwd=user_folder, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not (run / "checkpoint.pt").exists():
        assert p.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert not (run / "summary.json").exists()
    refused = decent8(user_folder, "train", "--resume", str(run))
    assert refused.returncode == 2 and "algorithm.name=my_algorithm:MyAlgorithm" in refused.stderr
    done = decent8(user_folder, "train", "--resume", str(run), ALG, "--quiet")
    assert done.returncode == 0, done.stderr
    a = torch.load(sim_run / "checkpoint.pt", weights_only=False)["engine"]
    b = torch.load(run / "checkpoint.pt", weights_only=False)["engine"]
    assert torch.equal(a["z"], b["z"]) and torch.equal(a["algorithm"]["x_hat"], b["algorithm"]["x_hat"])
    assert json.loads((run / "summary.json").read_text())["node_accuracies"] == \
        json.loads((sim_run / "summary.json").read_text())["node_accuracies"]


def test_decent8_cost_counts_the_examples_buffers(user_folder):
    done = decent8(user_folder, "cost", "--model", "resnet20", "--algorithm", "my_algorithm:MyAlgorithm",
                   "--format", "json", "--totals-only")
    assert done.returncode == 0, done.stderr
    mem = json.loads(done.stdout)["training"]["memory_breakdown_mb"]["fp32"]
    assert mem["algorithm_buffers"] == pytest.approx(2 * mem["weights"])     # Choco's x̂ and s


# ------------------------------------------------------- compression= and topology= import paths
COMPRESSOR = '''
import torch
from decent8.compression.base import Compressor
from decent8.compression.payload import Payload

class Half(Compressor):
    """fp16 values: 2 bytes per parameter."""
    name = "half"
    @classmethod
    def suggest_gamma(cls, scale, ratio):
        return 0.1      # the consensus step it runs with (a compressor declares it: no silent default)
    def encode(self, x, generators=None):
        return Payload({"values": x.to(torch.float16)})
    def decode(self, payload):
        return payload.tensors["values"].to(torch.float32)
    def spec(self):
        return {"values": ((self.layout.dim,), torch.float16)}

def chain_ring(n):
    """A directed ring written out as an adjacency matrix (A[i, j]: i sends to j)."""
    a = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        a[i, (i + 1) % n] = True
    return a.numpy()
'''


def test_compression_and_topology_import_paths_train_and_are_gated_on_resume(tmp_path):
    from decent8.config import load_config
    from decent8.errors import ConfigError
    from decent8.train.loop import train

    (tmp_path / "user_ext.py").write_text(COMPRESSOR)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        args = ["nodes=4", "device=cpu", "model=mlp", "model.width=8", "epochs=1", "progress=false",
                "algorithm=choco", "compression=user_ext:Half", "topology=user_ext:chain_ring",
                "algorithm.consensus_rounds=0", f"out_dir={tmp_path}", "name=ext"]
        summary, run = train(load_config(None, args), quiet=True)
        ref, _ = train(load_config(None, [*args[:7], "compression=identity", "topology=directed_ring",
                                          *args[9:-1], "name=ref"]), quiet=True)
        assert summary["message_bytes"] * 2 == ref["message_bytes"]       # fp16: half the bytes
        assert summary["spectral_gap"] == pytest.approx(ref["spectral_gap"])
        with pytest.raises(ConfigError, match="compression.name=user_ext:Half"):
            train(None, resume=run, named_code={"topology.name": "user_ext:chain_ring"})
    finally:
        os.chdir(cwd)
