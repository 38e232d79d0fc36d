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
    import builtins

    from decent8.train.tracking import parse_tracking
    real = builtins.__import__

    def fake(name, *a, **k):
        if name == "wandb":
            raise ImportError("no wandb")
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(ConfigError, match=r"^tracking: wandb is not installed: pip install wandb"):
        parse_tracking("wandb")


def test_mlflow_file_store_reads_back(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
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


def test_wandb_offline_files(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from decent8.train.tracking import Trackers
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "wrun"
    run.mkdir()
    t = Trackers(run, "false", "wandb", {"nodes": 8})
    for r in ROWS:
        t.log(r)
    t.close()
    (folder,) = (run / "wandb").glob("offline-run-*")
    import json
    summary = json.loads((folder / "files" / "wandb-summary.json").read_text())
    assert summary["mean_node_accuracy"] == 0.8 and summary["train_loss"] == 0.75
    assert "nodes" in (folder / "files" / "config.yaml").read_text()


@pytest.mark.slow   # > 6 s: a whole `decent8 train`
def test_train_with_tracking_mlflow_end_to_end(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
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
