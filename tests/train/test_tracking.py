"""Experiment tracking backends (issue 33; train/tracking.py)."""
from __future__ import annotations

import pytest

from decent8.errors import ConfigError

ROWS = [{"epoch": 1, "step": 5, "train_loss": 1.5, "mean_node_accuracy": 0.5, "node_accuracies": [0.4, 0.6]},
        {"epoch": 2, "step": 10, "train_loss": 0.75, "mean_node_accuracy": 0.8, "consensus_distance": float("nan")}]


def test_tracking_option_is_checked():
    from decent8.train.tracking import parse_tracking
    assert parse_tracking(None) == [] and parse_tracking("none") == [] and parse_tracking(" ") == []
    assert parse_tracking("tensorboard, tensorboard") == ["tensorboard"]
    with pytest.raises(ConfigError, match=r"tracking: unknown value 'mlfow' \(did you mean 'mlflow'\?\)"):
        parse_tracking("mlfow")


def test_missing_backend_is_one_line(monkeypatch):
    from decent8.train import tracking
    from decent8.train.tracking import parse_tracking
    real = tracking.import_library

    def fake(name):   # wandb not installed (faked before it is imported: no half-imported wandb left behind)
        if name.split(".")[0] == "wandb":
            raise ImportError("no wandb")
        return real(name)
    monkeypatch.setattr(tracking, "import_library", fake)
    with pytest.raises(ConfigError, match=r"^tracking: wandb is not installed: pip install wandb"):
        parse_tracking("wandb")


def test_mlflow_file_store_reads_back(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from decent8.train.tracking import Trackers
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run = tmp_path / "myrun"
    run.mkdir()
    t = Trackers(run, "false", "mlflow", {"nodes": 8, "topology.name": "base"})
    for r in ROWS:
        t.log(r)
    t.close()
    client = MlflowClient(tracking_uri=(run / "mlruns").resolve().as_uri())
    exp = client.get_experiment_by_name("decent8")
    (r,) = client.search_runs([exp.experiment_id])
    assert r.info.run_name == "myrun" and r.info.status == "FINISHED"
    assert r.data.params == {"nodes": "8", "topology.name": "base"}
    hist = client.get_metric_history(r.info.run_id, "mean_node_accuracy")
    assert [(m.step, m.value) for m in sorted(hist, key=lambda m: m.step)] == [(5, 0.5), (10, 0.8)]
    assert "consensus_distance" not in r.data.metrics        # NaN is not logged; lists are not scalars
    assert "node_accuracies" not in r.data.metrics


def read_wandb_records(path):
    """The protobuf records of an offline ``.wandb`` file: a 7-byte header (":W&B", magic, version),
    then LevelDB-log framing (32 KiB blocks; records of crc32 u32, length u16, type u8 —
    1 full, 2 first, 3 middle, 4 last)."""
    import struct

    from wandb.proto import wandb_internal_pb2 as pb2
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, buf, out = 7, b"", []
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0 and length == 0:
            pos += left
            continue
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind == 1:
            out.append(chunk)
        elif kind == 2:
            buf = chunk
        elif kind == 3:
            buf += chunk
        elif kind == 4:
            out.append(buf + chunk)
    records = []
    for d in out:
        r = pb2.Record()
        r.ParseFromString(d)
        records.append(r)
    return records


def test_wandb_offline_files(tmp_path, monkeypatch):
    import json

    from decent8.train.tracking import Trackers
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "wrun"
    run.mkdir()
    t = Trackers(run, "false", "wandb", {"nodes": 8})
    for r in ROWS:
        t.log(r)
    t.close()
    (folder,) = (run / "wandb").glob("offline-run-*")
    (log,) = folder.glob("*.wandb")
    import time
    for _ in range(120):   # W&B's service process writes the file after finish() returns
        records = read_wandb_records(log)
        if any(r.WhichOneof("record_type") == "exit" for r in records):
            break
        time.sleep(0.5)
    history = [{i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item} for r in records
               if r.WhichOneof("record_type") == "history"]
    assert [(h["_step"], h["mean_node_accuracy"], h["train_loss"]) for h in history] == [(5, 0.5, 1.5), (10, 0.8, 0.75)]
    assert all("consensus_distance" not in h and "node_accuracies" not in h for h in history)
    runs = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert runs and runs[0].display_name == "wrun"
    config = {i.key or "/".join(i.nested_key): i.value_json for r in runs for i in r.config.update}
    assert json.loads(config["nodes"]) == {"value": 8} or json.loads(config["nodes"]) == 8


@pytest.mark.slow   # > 6 s: a whole `decent8 train`
def test_train_with_tracking_mlflow_end_to_end(tmp_path, monkeypatch):
    import json

    from mlflow.tracking import MlflowClient

    from decent8.cli.main import main
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert main(["train", "nodes=4", "epochs=2", "model.width=4", "progress=false", "checkpoint=false",
                 "tensorboard=false", "sim.chunk=1", "algorithm.consensus_rounds=2", "device=cpu",
                 "tracking=mlflow", f"out_dir={tmp_path}", "name=t"]) == 0
    summary = json.loads((tmp_path / "t" / "summary.json").read_text())
    client = MlflowClient(tracking_uri=(tmp_path / "t" / "mlruns").resolve().as_uri())
    (r,) = client.search_runs([client.get_experiment_by_name("decent8").experiment_id])
    assert r.data.params["nodes"] == "4" and r.data.params["tracking"] == "mlflow"
    # the last logged value is the summary's (after the final consensus rounds)
    assert r.data.metrics["mean_node_accuracy"] == pytest.approx(summary["mean_node_accuracy"])
    steps = sorted(m.step for m in client.get_metric_history(r.info.run_id, "mean_node_accuracy"))
    assert steps[-1] == summary["steps"] and len(steps) == 3      # epochs 1, 2 and the final evaluation


def test_mlflow_store_opens_in_a_fresh_process_as_documented(tmp_path, monkeypatch):
    """docs/usage.md: another process (``MlflowClient``, ``mlflow ui``) opens the run's file
    store with ``MLFLOW_ALLOW_FILE_STORE=true`` and nothing else decent8 did."""
    import os
    import subprocess
    import sys

    from decent8.train.tracking import Trackers
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run = tmp_path / "myrun"
    run.mkdir()
    t = Trackers(run, "false", "mlflow", {"nodes": 8})
    for r in ROWS:
        t.log(r)
    t.close()
    reader = ("import os, sys\nfrom pathlib import Path\nos.environ['MLFLOW_ALLOW_FILE_STORE'] = 'true'\n"
              "from mlflow.tracking import MlflowClient\n"
              "c = MlflowClient(tracking_uri=Path(sys.argv[1]).resolve().as_uri())\n"
              "(r,) = c.search_runs([c.get_experiment_by_name('decent8').experiment_id])\n"
              "print(r.info.run_name, r.data.params['nodes'], r.data.metrics['mean_node_accuracy'])\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    out = subprocess.run([sys.executable, "-c", reader, str(run / "mlruns")], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["myrun", "8", "0.8"]
