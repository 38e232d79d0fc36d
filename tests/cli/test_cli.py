"""The decent8 command: bad input, the run folder, resume."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import yaml

from decent8.cli.main import main

FAST = ["epochs=2", "model.width=4", "progress=false", "algorithm.consensus_rounds=3", "device=cpu"]


def run_cli(args, tmp_path):
    return subprocess.run([sys.executable, "-m", "decent8", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)


BAD = [
    (["train", "algorithm=sgd_magic"], "algorithm"),
    (["train", "topology=moebius"], "topology"),
    (["train", "compression=zip"], "compression"),
    (["train", "skew=1.5"], "skew"),
    (["train", "skew=-0.1"], "skew"),
    (["train", "nodes=1"], "nodes"),
    (["train", "nodes=abc"], "nodes"),
    (["train", "no_such_option=3"], "no_such_option"),
    (["train", "topology=star", "algorithm.push_sum=false"], "topology"),
    (["train", "topology=star", "topology.weights=metropolis", "algorithm=sparse_push", "algorithm.push_sum=false"], "push_sum"),
    (["train", "topology=directed_ring", "topology.weights=metropolis"], "topology.weights"),
    (["train", "compression.ratio=1.2"], "compression.ratio"),
    (["train", "device=tpu"], "device"),
]


@pytest.mark.parametrize("args,option", BAD)
def test_bad_input_is_one_line_exit_2_and_leaves_no_run_folder(args, option, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main([*args, f"out_dir={tmp_path / 'runs'}"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert err.startswith("decent8: error: ") and option in err
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_graph_not_strongly_connected_and_malformed_yaml(tmp_path, capsys):
    g = tmp_path / "g.txt"
    g.write_text("0 1\n1 2\n2 3\n")   # a path: node 3 reaches nobody
    assert main(["train", "topology=edge_list", f"topology.path={g}", "nodes=4", f"out_dir={tmp_path}/r"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "node" in err and "strongly connected" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: 8\n  skew: [0.1,\n")
    assert main(["train", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "YAML" in err and "line 2" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.slow   # > 6 s: kept out of the fast subset
def test_usage_errors_exit_2_in_a_subprocess(tmp_path):
    r = run_cli(["train", "algorithm=nope"], tmp_path)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "allowed" in r.stderr
    r = run_cli(["train", "--bogus-flag"], tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1


@pytest.mark.slow   # > 6 s: kept out of the fast subset
def test_train_writes_the_documented_run_folder(tmp_path, capsys):
    assert main(["train", *FAST, f"out_dir={tmp_path}", "name=r1"]) == 0
    out = capsys.readouterr().out
    assert "mean node accuracy" in out and "spectral gap" in out and "bytes sent per node" in out
    run = tmp_path / "r1"
    for f in ("config.yaml", "metrics.jsonl", "summary.json", "curves.png", "checkpoint.pt", "partition.png",
              "partition.csv"):
        assert (run / f).exists(), f
    summary = json.loads((run / "summary.json").read_text())
    for key in ("mean_node_accuracy", "averaged_model_accuracy", "consensus_distance", "bytes_sent_per_node",
                "spectral_gap", "wall_time_s"):
        assert key in summary
    assert 0.0 <= summary["mean_node_accuracy"] <= 1.0 and 0.0 <= summary["averaged_model_accuracy"] <= 1.0
    # bytes: every step and consensus round, one message per out-edge (directed ring: 1)
    assert summary["bytes_sent_per_node"] == summary["steps"] * summary["message_bytes"]
    # the kernels that produced the numbers (the suite selects the documented AVX2 ones, conftest.py)
    env = summary["environment"]
    assert env["torch"] == torch.__version__ and env["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert env["kernel_selection"].get("ATEN_CPU_CAPABILITY") == os.environ.get("ATEN_CPU_CAPABILITY")
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    # the epochs, then the evaluation after the final consensus rounds: summary.json's numbers
    assert [r["epoch"] for r in rows] == [1, 2, 2] and rows[-1]["after_consensus_rounds"] == 3
    assert rows[-1]["mean_node_accuracy"] == summary["mean_node_accuracy"]
    # the saved config reruns the run: same summary numbers
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert cfg["name"] == "r1" and cfg["epochs"] == 2
    assert main(["train", str(run / "config.yaml"), "name=r2"]) == 0
    again = json.loads((tmp_path / "r2" / "summary.json").read_text())
    assert again["mean_node_accuracy"] == summary["mean_node_accuracy"]
    assert again["consensus_distance"] == pytest.approx(summary["consensus_distance"], rel=1e-9)
    # an existing folder is not overwritten
    assert main(["train", *FAST, f"out_dir={tmp_path}", "name=r1"]) == 2


@pytest.mark.slow   # > 20 s on the 2-core CI machine
def test_resume_from_epoch_checkpoint_equals_uninterrupted_run(tmp_path):
    common = ["epochs=4", "model.width=4", "progress=false", "algorithm.consensus_rounds=2", "device=cpu",
              "optimizer.kind=qgm", "compression=randomk", "compression.ratio=0.9", f"out_dir={tmp_path}"]
    assert main(["train", *common, "name=full", "--quiet"]) == 0
    # an interrupted run: 2 epochs done, then resumed to 4 (its checkpoint predates the consensus rounds)
    assert main(["train", *[c for c in common if not c.startswith("epochs")], "epochs=2", "name=cut", "--quiet"]) == 0
    cfg_file = tmp_path / "cut" / "config.yaml"
    cfg = yaml.safe_load(cfg_file.read_text())
    cfg["epochs"] = 4
    cfg_file.write_text(yaml.safe_dump(cfg))
    (tmp_path / "cut" / "summary.json").unlink()
    assert main(["train", "--resume", str(tmp_path / "cut"), "--quiet"]) == 0
    a = torch.load(tmp_path / "full" / "checkpoint.pt", weights_only=False)
    b = torch.load(tmp_path / "cut" / "checkpoint.pt", weights_only=False)
    assert a["epoch"] == b["epoch"] == 4
    assert torch.equal(a["engine"]["z"], b["engine"]["z"])
    assert torch.equal(a["engine"]["optimizer"]["buf"], b["engine"]["optimizer"]["buf"])
    sa = json.loads((tmp_path / "full" / "summary.json").read_text())
    sb = json.loads((tmp_path / "cut" / "summary.json").read_text())
    assert sa["mean_node_accuracy"] == sb["mean_node_accuracy"]
    assert sa["bytes_sent_per_node"] == sb["bytes_sent_per_node"]
    rows = [json.loads(line) for line in (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2, 3, 4, 4]   # + the point after the final consensus rounds


def test_topology_and_partition_commands(tmp_path, capsys):
    assert main(["topology", "directed_ring", "nodes=8"]) == 0
    out = capsys.readouterr().out
    assert "0.0761" in out          # 1 − cos(π/8)
    png = tmp_path / "classes.png"
    assert main(["partition", "skew=0.8", "nodes=8", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "total" in out and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
