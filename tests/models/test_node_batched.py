"""Node-batched layers (sim.chunk=layers:N): the same math as the per-node loop, for the
models made of layers that have a node-batched form, and a clear refusal otherwise."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import decent8
from decent8.errors import ConfigError
from decent8.models import StackedModel, init_parameters, make_model
from decent8.models.execution import choose_chunk, layers_mismatch, parse_execution
from decent8.models.strategies import strategy_for
from decent8.models.node_batched import unsupported
from decent8.quant.layers import set_stochastic
from decent8.quant.quantizer import QuantSpec


class PlainNet(nn.Module):
    """Plain torch.nn layers only, with a functional op in forward."""

    def __init__(self, p_drop: float = 0.0) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.drop = nn.Dropout(p_drop)
        self.fc1 = nn.Linear(4 * 4 * 4, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop(self.pool(torch.relu(self.conv(x))))
        return self.fc2(torch.tanh(self.fc1(h.view(h.size(0), -1))))


class MixesNodes(PlainNet):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x - x.mean(0, keepdim=True))  # a batch statistic: mixes the nodes' samples


def _stacked(module: nn.Module, k: int) -> tuple[StackedModel, torch.Tensor]:
    torch.manual_seed(0)
    sm = StackedModel(module, nodes=k)
    params = sm.flat_parameters().unsqueeze(0).repeat(k, 1) * (1 + 0.5 * torch.randn(k, sm.dim))  # ranges differ per node
    return sm, params


def _step(sm: StackedModel, params, x, y, execution: str, chunk: int):
    state = sm.buffers_state()
    sm.use(strategy_for(execution, chunk))
    loss, grad = sm.loss_and_grad(params, x, y)
    after = sm.buffers_state()
    sm.load_buffers_state(state)
    return loss, grad, after


@pytest.mark.parametrize("name", ["cnn", "mlp", "plain"])
@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_layers_equal_the_per_node_loop(name, precision):
    k = 5
    if name == "plain":
        module = PlainNet()
        if precision == "int8":
            decent8.quant.to_low_precision(module, QuantSpec())
    else:
        kw = {"precision": "int8", "quant": QuantSpec()} if precision == "int8" else {}
        module = make_model(name, (1, 8, 8), 10, **kw)
        init_parameters(module, 0)
    set_stochastic(module, False)  # deterministic rounding: the two executions must agree
    assert unsupported(module) == ""
    sm, params = _stacked(module, k)
    x = torch.randn(k, 6, 1, 8, 8) * torch.arange(1, k + 1).view(k, 1, 1, 1, 1)
    y = torch.randint(0, 3, (k, 6))
    l1, g1, b1 = _step(sm, params, x, y, "vmap", 1)
    for chunk in (2, 5):  # 5 nodes in chunks of 2: a last chunk of one node
        l2, g2, b2 = _step(sm, params, x, y, "layers", chunk)
        assert torch.allclose(l1, l2, rtol=1e-5, atol=1e-6)
        assert torch.allclose(g1, g2, rtol=1e-3, atol=1e-4 * g1.abs().max().item())
        if b1 is not None:  # the 8-bit activation ranges are per node
            assert torch.allclose(b1, b2, rtol=1e-5, atol=1e-6) and not torch.allclose(b1[0], b1[-1])
    # eval on shared inputs: every node's own parameters and buffers
    xt = torch.randn(7, 1, 8, 8)
    sm.use(strategy_for("vmap", 1))
    ref = sm.logits(params, xt)
    sm.use(strategy_for("layers", 5))
    assert torch.allclose(sm.logits(params, xt), ref, rtol=1e-4, atol=1e-5)


def test_dropout_masks_differ_between_nodes():
    sm, params = _stacked(PlainNet(p_drop=0.5), 4)
    sm.use(strategy_for("layers", 4))
    same = params[:1].repeat(4, 1)
    x = torch.randn(1, 5, 1, 8, 8).expand(4, 5, 1, 8, 8).contiguous()
    out = sm.forward(same, x)
    assert not torch.allclose(out[0], out[1])


def test_models_without_a_node_batched_form_are_refused():
    assert "1 (BatchNorm2d)" in unsupported(nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)))
    assert "stem_norm" in unsupported(make_model("resnet20", (3, 32, 32), 10))
    assert "not a known per-sample layer" in unsupported(nn.Sequential(nn.Linear(2, 2), nn.Softmax(0)))
    sm, params = _stacked(MixesNodes(), 4)
    x, y = torch.randn(4, 6, 1, 8, 8), torch.randint(0, 3, (4, 6))
    assert unsupported(sm.module) == "" and "mixes samples" in layers_mismatch(sm, params, x)
    with pytest.raises(ConfigError, match="sim.chunk.*layers:4 cannot run this model"):
        choose_chunk(sm, params, x, y, "layers:4")
    choice = choose_chunk(sm, params, x, y, "auto", steps=1, use_cache=False)  # auto falls back to vmap / loop
    assert choice.execution == "vmap" and "mixes samples" in choice.layers_unsupported
    assert not any(key.startswith("layers") for key in choice.seconds_per_step)


def test_sim_chunk_grammar():
    assert parse_execution("auto") is None
    assert parse_execution("3") == ("vmap", 3) and parse_execution(4) == ("vmap", 4)
    assert parse_execution("layers:8") == ("layers", 8)
    for bad in ("layers:0", "layers:x", "layer:2", "layers:", "2:layers"):
        with pytest.raises(ConfigError, match="sim.chunk"):
            parse_execution(bad)


@pytest.mark.slow   # times every layer execution of a real run (> 3 min on 2 loaded cores)
def test_auto_times_the_layers_and_the_run_records_them(tmp_path):
    torch.manual_seed(0)
    x, y = torch.randn(256, 1, 8, 8), torch.randint(0, 3, (256,))
    runs = {}
    for spec in ("1", "layers:4"):
        r = decent8.train(lambda: PlainNet(), (x, y, x[:16], y[:16]), nodes=4, epochs=5, sim__chunk=spec,
                          algorithm="choco", compression="identity", data__batch_size=16, checkpoint=False,
                          algorithm__consensus_rounds=0, out_dir=str(tmp_path), name=f"c{spec}", seed=1)
        runs[spec] = r
    assert runs["1"].summary["steps"] == 20
    assert runs["layers:4"].summary["sim_execution"] == "layers" and runs["1"].summary["sim_execution"] == "vmap"
    assert torch.allclose(runs["1"].parameters, runs["layers:4"].parameters, atol=1e-5)
    sm, params = _stacked(PlainNet(), 4)
    choice = choose_chunk(sm, params, torch.randn(4, 6, 1, 8, 8), torch.randint(0, 3, (4, 6)), "auto", steps=1,
                          use_cache=False)
    assert {"layers:2", "layers:4"} <= set(choice.seconds_per_step) and choice.layers_unsupported == ""
    assert sm.execution == choice.execution and choice.spec == min(choice.seconds_per_step,
                                                                    key=choice.seconds_per_step.__getitem__)
