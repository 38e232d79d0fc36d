"""Any plain torch.nn model, any loss, any chunk size: the simulator's execution path (issue "any model")."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call

import decent8
from decent8.cli.main import main
from decent8.models import StackedModel
from decent8.models.execution import candidates, choose_chunk, parse_chunk
from decent8.errors import ConfigError


class UserNet(nn.Module):
    """Only torch.nn parts: Conv2d, BatchNorm2d, Dropout, Linear."""

    def __init__(self, p_drop: float = 0.5) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(p_drop)
        self.fc = nn.Linear(4 * 8 * 8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.drop(torch.relu(self.bn(self.conv(x)))).flatten(1))


def _stacked(k: int = 4, chunk: int = 1, p_drop: float = 0.5) -> tuple[StackedModel, torch.Tensor]:
    torch.manual_seed(0)
    sm = StackedModel(UserNet(p_drop), nodes=k, chunk=chunk)
    params = sm.flat_parameters().unsqueeze(0).repeat(k, 1) + 0.05 * torch.randn(k, sm.dim)
    return sm, params


def _node_state(sm: StackedModel, params: torch.Tensor, i: int) -> dict[str, torch.Tensor]:
    named = sm.layout.unflatten(params[i])
    assert sm.buffers is not None and sm.buffer_layout is not None
    named.update({n: v.clone() for n, v in sm.buffer_layout.unflatten(sm.buffers[i]).items()})
    return named


@pytest.mark.parametrize("chunk", [1, 2, 4])
def test_user_module_per_node_forward_batchnorm_and_dropout(chunk):
    k = 4
    sm, params = _stacked(k, chunk)
    x = torch.randn(k, 6, 1, 8, 8) * torch.arange(1, k + 1).view(k, 1, 1, 1, 1)  # node scales differ
    y = torch.randint(0, 3, (k, 6))

    # one training step: BatchNorm running statistics are per node, equal to node i's own module
    before = [_node_state(sm, params, i) for i in range(k)]
    sm.module.drop.p = 0.0
    sm.loss_and_grad(params, x, y)
    for i in range(k):
        plain = UserNet(0.0)
        plain.load_state_dict(before[i], strict=False)
        plain.train()
        plain(x[i])
        got = sm.buffer_layout.unflatten(sm.buffers[i])
        assert torch.allclose(got["bn.running_mean"], plain.bn.running_mean, atol=1e-6)
        assert torch.allclose(got["bn.running_var"], plain.bn.running_var, atol=1e-5)
    means = sm.buffer_layout.unflatten(sm.buffers)["bn.running_mean"]
    assert not torch.allclose(means[0], means[3])

    # eval: node i's output equals its parameters and buffers run through the plain module alone
    xt = torch.randn(5, 1, 8, 8)
    out = sm.logits(params, xt)
    for i in range(k):
        plain = UserNet()
        plain.load_state_dict(_node_state(sm, params, i), strict=False)
        plain.eval()
        assert torch.allclose(out[i], plain(xt), atol=1e-5)

    # dropout masks differ between nodes: same parameters and inputs, different outputs
    sm.module.drop.p = 0.5
    same = params[:1].repeat(k, 1)
    sm.module.train()
    outs = sm.forward(same, xt.unsqueeze(0).expand(k, *xt.shape).contiguous())
    sm.module.eval()
    assert not torch.allclose(outs[0], outs[1])


@pytest.mark.slow   # > 20 s on the 2-core CI machine under load
def test_parameters_after_20_steps_do_not_depend_on_chunk(tmp_path):
    """The math is the same whatever c is (a deterministic model: no dropout)."""
    x = torch.randn(256, 1, 8, 8)
    y = torch.randint(0, 3, (256,))
    finals = {}
    for chunk in (1, 2, 4):
        r = decent8.train(lambda: UserNet(0.0), (x, y, x[:32], y[:32]), nodes=4, epochs=5, sim__chunk=str(chunk),
                          algorithm="choco", compression="identity", data__batch_size=16, checkpoint=False,
                          algorithm__consensus_rounds=0, out_dir=str(tmp_path), name=f"c{chunk}", seed=1)
        assert r.summary["steps"] == 20 and r.summary["sim_chunk"] == chunk
        finals[chunk] = r.parameters
    assert torch.allclose(finals[1], finals[2], atol=1e-5)
    assert torch.allclose(finals[1], finals[4], atol=1e-5)


@pytest.mark.slow   # > 6 s on 2 cores: kept out of the fast subset (issue 30)
def test_auto_chunk_records_choice_and_leaves_state(tmp_path):
    sm, params = _stacked(4, p_drop=0.0)
    x, y = torch.randn(4, 6, 1, 8, 8), torch.randint(0, 3, (4, 6))
    bufs, rng = sm.buffers.clone(), torch.get_rng_state()
    choice = choose_chunk(sm, params, x, y, "auto", steps=1, use_cache=False)
    assert torch.equal(sm.buffers, bufs) and torch.equal(torch.get_rng_state(), rng)
    assert choice.chunk in (1, 2, 4) and set(choice.seconds_per_step) <= {"1", "2", "4"}
    assert choice.saved_bytes_per_node > 0 and sm.chunk == choice.chunk
    assert candidates(1024, 10**9) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert candidates(6, 3) == [1, 2]
    assert parse_chunk("auto") is None and parse_chunk(3) == 3
    for bad in (0, -2, "x", 1.5):
        with pytest.raises(ConfigError, match="sim.chunk"):
            parse_chunk(bad)
    # this machine's decision is cached: the same model, k and batch reuse it without timing,
    # and the cache holds the timings it was chosen by (issue 29)
    first = choose_chunk(sm, params, x, y, "auto", steps=1)
    again = choose_chunk(sm, params, x, y, "auto", steps=1)
    assert not first.cached and again.cached and again.chunk == first.chunk
    assert again.seconds_per_step == pytest.approx(first.seconds_per_step) and again.seconds_per_step
    # the main job's run folder records the choice
    code = main(["train", "epochs=1", "progress=false", f"out_dir={tmp_path}", "name=auto", "--quiet"])
    assert code == 0
    ex = json.loads((tmp_path / "auto" / "execution.json").read_text())
    cfg = (tmp_path / "auto" / "config.yaml").read_text()
    import yaml
    assert ex["requested"] == "auto" and yaml.safe_load(cfg)["sim"]["chunk"] == ex["spec"]
    assert ex["seconds_per_step"] and ex["source"]  # timed now, or read back from this machine's cache


@pytest.mark.slow
def test_convex_example_reaches_the_centralized_optimum(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("convex", Path(__file__).parents[2] / "examples" / "convex.py")
    convex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(convex)
    assert convex.solve(logistic=False, out_dir=str(tmp_path)) < 1e-2
    assert convex.solve(logistic=True, out_dir=str(tmp_path)) < 1e-2


@pytest.mark.slow
def test_regression_reports_loss_not_accuracy(tmp_path):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(400, 5, generator=g)
    y = a @ torch.randn(5, 1, generator=g)
    r = decent8.train(lambda input_shape: nn.Linear(input_shape[0], 1), (a, y), loss="mse", nodes=4, epochs=3,
                      algorithm="dpsgd", compression="identity", out_dir=str(tmp_path), checkpoint=False)
    s = json.loads((r.path / "summary.json").read_text())
    assert s["mean_node_accuracy"] is None and s["loss"] == "mse" and s["mean_node_loss"] < 1.0
    assert (r.path / "curves.png").stat().st_size > 0


@pytest.mark.slow   # > 6 s on 2 cores: kept out of the fast subset (issue 30)
def test_custom_loss_callable_and_torch_dataset(tmp_path):
    x = torch.randn(200, 1, 8, 8)
    y = torch.randint(0, 3, (200,))
    ds = torch.utils.data.TensorDataset(x, y)
    calls = []

    def my_loss(out, target):
        calls.append(1)
        return nn.functional.cross_entropy(out, target, label_smoothing=0.1)

    r = decent8.train(UserNet(0.0), ds, loss=my_loss, nodes=4, epochs=1, out_dir=str(tmp_path), checkpoint=False)
    assert calls and r.summary["loss"] == "my_loss" and r.summary["steps"] >= 1


USER_MODULE = textwrap.dedent('''
    import torch
    from torch import nn

    def factory(input_shape, num_classes):
        return nn.Sequential(nn.Flatten(), nn.Linear(int(torch.tensor(input_shape).prod()), num_classes))

    def not_a_module():
        return 42

    def wrong_outputs():
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 3))   # 3 outputs for 10 classes

    def vector_loss(out, y):
        return (out - out).sum(1)                                # one value per sample, not per node
''')


@pytest.fixture
def user_pkg(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "d8user.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    return tmp_path


def test_cli_import_path_model_and_tensors_data(user_pkg, capsys):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 4, size=300)
    np.savez(user_pkg / "data.npz", x=x, y=y)
    out = user_pkg / "runs"
    code = main(["train", "model=d8user:factory", "data.name=tensors", f"data.path={user_pkg / 'data.npz'}",
                 "nodes=4", "epochs=1", "progress=false", f"out_dir={out}", "name=t", "--quiet"])
    assert code == 0
    s = json.loads((out / "t" / "summary.json").read_text())
    assert s["model"] == "d8user:factory" and s["parameters"] == 64 * 4 + 4 and s["dataset"] == "tensors"


@pytest.mark.parametrize("args,option", [
    (["model=d8user_missing:factory"], "model"),
    (["model=d8user:not_a_module"], "model"),
    (["model=d8user:wrong_outputs"], "loss"),
    (["loss=d8user:vector_loss"], "loss"),
    (["sim.chunk=0"], "sim.chunk"),
    (["loss=hinge"], "loss"),
    (["data.name=tensors"], "data.path"),
])
def test_cli_bad_model_loss_chunk_one_line_exit_2(user_pkg, capsys, args, option):
    out = user_pkg / "runs"
    code = main(["train", *args, "epochs=1", "progress=false", f"out_dir={out}"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and option in err
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.slow   # > 6 s on 2 cores: kept out of the fast subset (issue 30)
def test_text_data_gets_a_text_model_by_default(tmp_path):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 50, (240, 12), generator=g)
    ids[:, 8:] = 0  # padding
    y = (ids[:, 0] > 25).long()
    r = decent8.train(None, (ids, y), nodes=4, epochs=2, out_dir=str(tmp_path), checkpoint=False)
    assert r.summary["parameters"] == 50 * 64 + 64 * 64 + 64 + 64 * 2 + 2
    assert isinstance(r.averaged_model(), nn.Module)
