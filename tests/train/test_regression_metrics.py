"""Regression as a first-class task: RMSE, MAE and R² in metrics, summary and the printed
table; a user's metric (``metrics=pkg.module:fn`` and the API); the one-line messages
around it (a classification loss on real targets, push-sum switched on, AD-PSGD on an
irregular graph, a key given twice, torch tensors where numpy arrays are taken)."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import decent8
from decent8.errors import ConfigError
from tests.helpers import call

ROOT = Path(__file__).resolve().parents[2]


def _data(seed: int = 0, rows: int = 240, dim: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, dim, generator=g)
    y = x @ torch.randn(dim, generator=g) + 0.3 * torch.randn(rows, generator=g)
    return x, y


def _linear() -> nn.Module:
    return nn.Linear(5, 1)


def _half_mse(outputs: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    """Two metrics: the mean squared error over 2, and the largest absolute error."""
    err = outputs.reshape(-1).double() - targets.reshape(-1).double()
    return {"half_mse": 0.5 * float((err ** 2).mean()), "max_abs": float(err.abs().max())}


@pytest.fixture(scope="module")
def mse_run(tmp_path_factory):
    x, y = _data()
    out = tmp_path_factory.mktemp("reg")
    split = (x[:192], y[:192], x[192:], y[192:])
    return decent8.train(_linear, split, loss="mse", metrics=_half_mse, nodes=4, epochs=2, algorithm="dpsgd",
                         compression="identity", topology="ring", out_dir=str(out), checkpoint=False,
                         algorithm__consensus_rounds=0, sim__chunk=1, tensorboard="false"), split


def test_rmse_mae_r2_match_the_definitions(mse_run):
    summary, (_, _, x_test, y_test) = mse_run[0][0], mse_run[1]
    # loss=mse: the test loss is the mean squared error, so RMSE² equals it (both float32 sums
    # over the test set, in other orders: 7.6e-6 apart measured on one machine, hence 1e-4)
    assert summary["averaged_model_rmse"] ** 2 == pytest.approx(summary["averaged_model_loss"], rel=1e-4)
    assert summary["mean_node_rmse"] ** 2 <= summary["mean_node_loss"] * (1 + 1e-4)  # mean of √ ≤ √ of mean
    var = float(((y_test.double() - y_test.double().mean()) ** 2).mean())
    assert summary["averaged_model_r2"] == pytest.approx(1 - summary["averaged_model_loss"] / var, rel=1e-4)
    # MAE by hand from the averaged model's parameters
    params = mse_run[0].parameters.double().mean(0)
    w, b = params[:5], params[5]
    pred = x_test.double() @ w + b
    assert summary["averaged_model_mae"] == pytest.approx(float((pred - y_test.double()).abs().mean()), rel=1e-5)
    assert summary["min_node_r2"] <= summary["mean_node_r2"]


def test_a_user_metric_is_reported_for_nodes_and_the_averaged_model(mse_run):
    summary, folder = mse_run[0][:2]
    assert summary["averaged_model_half_mse"] == pytest.approx(0.5 * summary["averaged_model_loss"], rel=1e-4)
    assert summary["mean_node_half_mse"] == pytest.approx(0.5 * summary["mean_node_loss"], rel=1e-4)
    assert summary["averaged_model_max_abs"] >= summary["averaged_model_mae"]
    rows = [json.loads(line) for line in (Path(folder) / "metrics.jsonl").read_text().splitlines()]
    assert all("mean_node_half_mse" in r and "averaged_model_rmse" in r for r in rows)
    from decent8.cli.train_cmd import summary_table
    table = summary_table(summary)
    for label in ("test RMSE", "test MAE", "test R²", "half_mse", "max_abs"):
        assert label in table


USER_CODE = '''
import torch
def huber(outputs, targets):
    return torch.nn.functional.huber_loss(outputs.reshape(-1), targets.reshape(-1).to(outputs.dtype))
def within(outputs, targets):
    return float(((outputs.reshape(-1) - targets.reshape(-1)).abs() < 0.5).double().mean())
def linear(input_shape):
    return torch.nn.Linear(input_shape[-1], 1)
def irregular(n):
    a = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        a[i, (i + 1) % n] = a[(i + 1) % n, i] = True
    a[0, n // 2] = a[n // 2, 0] = True
    return a
def ring_topology(n):
    from decent8.topology.topology import Topology
    a = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        a[i, (i + 1) % n] = a[(i + 1) % n, i] = True
    return Topology("mine", a, "metropolis")
'''


@pytest.fixture()
def user_dir(tmp_path, monkeypatch):
    (tmp_path / "h48user.py").write_text(USER_CODE)
    x, y = _data(1)
    torch.save({"x": x, "y": y}, tmp_path / "reg.pt")
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop("h48user", None)


@pytest.mark.slow
def test_cli_regression_with_own_model_loss_and_metric(user_dir):
    rc, out, err = call(["train", "data.name=tensors", "data.path=reg.pt", "model=h48user:linear", "loss=h48user:huber",
                         "metrics=h48user:within", "nodes=4", "epochs=1", "algorithm=dpsgd", "compression=identity",
                         "topology=ring", "out_dir=runs", "name=r", "progress=false", "checkpoint=false", "sim.chunk=1",
                         "tensorboard=false"])
    assert rc == 0, err
    summary = json.loads((user_dir / "runs" / "r" / "summary.json").read_text())
    for key in ("rmse", "mae", "r2", "within"):
        assert math.isfinite(summary[f"averaged_model_{key}"]) and math.isfinite(summary[f"mean_node_{key}"])
    assert "test RMSE" in out and "within (node mean / averaged)" in out


def test_real_targets_without_a_regression_loss_suggest_mse(user_dir):
    rc, _, err = call(["train", "data.name=tensors", "data.path=reg.pt", "model=mlp", "epochs=1", "--check"])
    assert rc == 2 and len(err) == 1 and "loss=mse" in err[0] and "real numbers" in err[0]


def test_push_sum_switched_on_says_so_in_one_line(user_dir):
    rc, _, err = call(["train", "topology=h48user:irregular", "epochs=1", "--check", "nodes=8"])
    assert rc == 0, err
    notes = [e for e in err if "push-sum is on" in e]
    assert len(notes) == 1 and "algorithm.push_sum=auto" in notes[0] and "metropolis" in notes[0]
    rc, _, err = call(["train", "topology=ring", "epochs=1", "--check"])
    assert not [e for e in err if "push-sum" in e]


def test_adpsgd_names_the_topology_not_push_sum(user_dir):
    rc, _, err = call(["train", "algorithm=adpsgd", "compression=identity", "topology=erdos_renyi", "--check"])
    assert rc == 2 and err[-1].startswith("decent8: error: topology:") and "erdos_renyi" in err[-1]
    rc, _, err = call(["train", "algorithm=adpsgd", "compression=identity", "topology=h48user:irregular", "--check"])
    assert rc == 2 and "topology:" in err[-1] and "metropolis" in err[-1] and "push_sum:" not in err[-1]


def test_a_key_given_twice_warns_in_one_line(user_dir):
    rc, out, err = call(["train", "nodes=4", "model=mlp", "nodes=6", "model.name=cnn", "--print-config"])
    assert rc == 0
    assert [e for e in err if "nodes is given 2 times" in e] and [e for e in err if "model.name is given 2" in e]
    assert "nodes: 6" in out


def test_torch_tensors_are_taken_where_numpy_arrays_are(user_dir):
    from decent8.topology.topology import Topology
    ring = torch.zeros(6, 6, dtype=torch.bool)
    for i in range(6):
        ring[i, (i + 1) % 6] = ring[(i + 1) % 6, i] = True
    a, b = Topology("t", ring, "metropolis"), Topology("n", ring.numpy(), "metropolis")
    assert a.period == 1 and np.allclose(a.weights_np(0), b.weights_np(0))
    two = Topology("t2", [ring, ring])
    assert two.period == 2
    rc, _, err = call(["train", "topology=h48user:ring_topology", "algorithm=dpsgd", "compression=identity",
                       "epochs=1", "--check"])
    assert rc == 0, err


def test_a_metric_that_raises_is_one_line(user_dir):
    (user_dir / "h48bad.py").write_text("def bad(o, t):\n    raise ValueError('no')\n")
    x, y = _data()
    with pytest.raises(ConfigError, match="metrics: .*bad raised ValueError: no"):
        decent8.train(_linear, (x, y), loss="mse", metrics="h48bad:bad", nodes=4, epochs=1, out_dir="runs",
                      checkpoint=False, sim__chunk=1)
    sys.modules.pop("h48bad", None)
