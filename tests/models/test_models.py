"""The paper's models (SPEC §7) at fp32 and int8, stacked over nodes; config and CLI wiring."""
from __future__ import annotations

import pytest
import torch

from decent8.cli.main import main
from decent8.config import load_config
from decent8.errors import ConfigError
from decent8.models import StackedModel, init_parameters, make_model
from decent8.models.norms import NORMS
from decent8.quant import set_stochastic


pytestmark = pytest.mark.usefixtures("one_thread")  # (conftest.py)


#: tiny inputs / widths for the equivalence checks
TINY = {"cnn": ((1, 8, 8), 8), "resnet20": ((3, 8, 8), 8), "resnet54": ((3, 8, 8), 8), "vgg11": ((3, 8, 8), 8),
        "resnet18": ((3, 16, 16), 8)}
COMBOS = [(m, n, p) for m in TINY for n in NORMS for p in ("fp32", "int8")]


@pytest.mark.parametrize("name,norm,precision", COMBOS)
def test_stacked_equals_separate_nodes(name, norm, precision):
    """k = 3 nodes in one stacked forward/backward == each node alone (k = 1): loss, gradient,
    the per-node buffers it updates, and per-node eval logits (float64, deterministic rounding)."""
    shape, width = TINY[name]
    torch.manual_seed(0)
    module = make_model(name, shape, 10, width, norm=norm, precision=precision).double()
    init_parameters(module, 1)
    if hasattr(module, "drop"):
        module.drop.p = 0.0
    set_stochastic(module, False)
    k, b = 3, 2
    sm = StackedModel(module, nodes=k)
    params = sm.flat_parameters().unsqueeze(0).repeat(k, 1)
    params += 0.01 * torch.randn_like(params)
    x = torch.randn(k, b, *shape, dtype=torch.float64)
    y = torch.randint(0, 10, (k, b))
    loss, grad = sm.loss_and_grad(params, x, y)
    xt = torch.randn(3, *shape, dtype=torch.float64)
    logits = sm.logits(params, xt)
    for i in range(k):
        one = StackedModel(module, nodes=1)
        l1, g1 = one.loss_and_grad(params[i : i + 1], x[i : i + 1], y[i : i + 1])
        assert torch.allclose(l1[0], loss[i], rtol=1e-10, atol=1e-12)
        assert torch.allclose(g1[0], grad[i], rtol=1e-8, atol=1e-10 * grad[i].abs().max().item())
        if one.buffers is not None:
            assert torch.allclose(one.buffers[0], sm.buffers[i])
        assert torch.allclose(one.logits(params[i : i + 1], xt)[0], logits[i], atol=1e-9)
    if sm.buffers is not None:  # the averaged model uses the node-averaged buffers
        avg = StackedModel(module, nodes=1)
        avg.load_buffers_state(sm.buffers.mean(0, keepdim=True))
        xbar = params.mean(0, keepdim=True)
        assert torch.allclose(sm.logits(xbar, xt), avg.logits(xbar, xt), atol=1e-12)


TABLE2 = {"resnet20": ((3, 32, 32), 0.27e6), "resnet54": ((3, 32, 32), 0.76e6), "vgg11": ((3, 32, 32), 9.49e6),
          "resnet18": ((3, 224, 224), 11.2e6)}


@pytest.mark.parametrize("name", list(TABLE2))
def test_parameter_counts_match_table_2(name):
    shape, target = TABLE2[name]
    counts = {}
    for precision in ("fp32", "int8"):
        module = make_model(name, shape, 10, precision=precision)
        counts[precision] = sum(p.numel() for p in module.parameters())
        assert abs(counts[precision] - target) / target < 0.02, (name, precision, counts[precision])
    assert counts["fp32"] == counts["int8"]


def test_int8_model_has_the_fp32_layout_and_defaults():
    a = StackedModel(make_model("resnet20", (3, 32, 32), 10))
    b = StackedModel(make_model("resnet20", (3, 32, 32), 10, precision="int8"))
    assert a.layout == b.layout and a.buffer_layout is None and b.buffer_layout is not None
    assert type(make_model("resnet20", (3, 8, 8), 10).stem_norm).__name__ == "EvoNormS0"
    assert type(make_model("resnet20", (3, 8, 8), 10, precision="int8").stem_norm).__name__ == "RangeEvoNorm"
    from decent8.models import DigitsCNN
    assert type(make_model("cnn", (1, 8, 8), 10)) is DigitsCNN  # the fp32 digits CNN is unchanged
    c, q = StackedModel(make_model("cnn", (1, 8, 8), 10)), StackedModel(make_model("cnn", (1, 8, 8), 10, precision="int8"))
    assert c.layout == q.layout


def test_mlp_has_an_int8_form():
    from decent8.quant import QLinear

    fp, q = make_model("mlp", (1, 8, 8), 10, width=16), make_model("mlp", (1, 8, 8), 10, width=16, precision="int8")
    assert not any(isinstance(m, QLinear) for m in fp.modules())
    assert sum(isinstance(m, QLinear) for m in q.modules()) == 3
    assert StackedModel(fp).layout == StackedModel(q).layout


def test_model_without_buffers_keeps_the_plain_path():
    sm = StackedModel(make_model("cnn", (1, 8, 8), 10), nodes=4)
    assert sm.buffers is None and sm.buffers_state() is None
    p = sm.flat_parameters().unsqueeze(0).repeat(4, 1)
    assert sm.logits(p, torch.randn(5, 1, 8, 8)).shape == (4, 5, 10)


@pytest.mark.parametrize("kwargs,option", [
    (dict(name="mlp", precision="fp16"), "precision"),  # (mlp has an int8 form: the transform applies to any model)
    (dict(name="cnn", precision="int16"), "precision"),
    (dict(name="resnet20", norm="layernorm"), "model.norm"),
    (dict(name="mlp", norm="evonorm"), "model.norm"),
    (dict(name="resnet99"), "model"),
])
def test_make_model_errors(kwargs, option):
    name = kwargs.pop("name")
    with pytest.raises(ConfigError) as e:
        make_model(name, (1, 8, 8), 10, **kwargs)
    assert e.value.option == option


BAD = [
    (["precision=bf16", "model=mlp"], "precision:"),  # (mlp has an int8 form now)
    (["precision=int4"], "precision:"),
    (["model.norm=layernorm"], "model.norm:"),
    (["precision=int8", "quant.bits=1"], "quant.bits:"),
    (["precision=int8", "quant.bits=33"], "quant.bits:"),
    (["quant.grad_bits=1"], "quant.grad_bits:"),
]


@pytest.mark.parametrize("args,option", BAD)
def test_cli_bad_input_one_line_exit_2(args, option, tmp_path, capsys):
    code = main(["train", *args, f"out_dir={tmp_path / 'runs'}", "progress=false"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("decent8: error: ") and option in err, err
    assert not (tmp_path / "runs").exists()


def _bytes_per_node(*overrides, steps=2):
    """Bytes each node reports after ``steps`` training iterations (build + engine, no run folder)."""
    from decent8.train.build import build
    from decent8.train.engine import Engine

    c = build(load_config(None, ["progress=false", *overrides]))
    engine = Engine(c.model, c.algorithm, c.optimizer, c.comm, c.x0)
    idx = c.sampler.epoch_indices(0)
    x, y = c.dataset.x_train, c.dataset.y_train
    for s in range(steps):
        engine.train_step(x[idx[:, s]], y[idx[:, s]], 0.05)
    return c.comm.bytes_sent.mean().item(), c.compressor.nbytes()


@pytest.mark.parametrize("model", ["cnn", pytest.param("resnet20", marks=pytest.mark.slow)])
def test_int8_sends_4x_fewer_bytes_dense(model):
    """precision=int8 sends 8-bit messages: dense fp32 (identity) → quantize (uint8 + 8 B per tensor)."""
    fp, fp_msg = _bytes_per_node("compression=identity", f"model={model}")
    q, q_msg = _bytes_per_node("compression=identity", f"model={model}", "precision=int8")
    assert fp > 0 and 4 * 0.99 <= fp / q <= 4 * 1.01, fp / q
    assert 4 * 0.99 <= fp_msg / q_msg <= 4 * 1.01
    # top-k (the default) sends 8-bit values too
    fpk, _ = _bytes_per_node(f"model={model}", steps=1)
    qk, _ = _bytes_per_node(f"model={model}", "precision=int8", steps=1)
    assert qk < fpk


def test_int8_wire_format_resnet20():
    from decent8.compression import make_compressor
    from decent8.train.build import wire_compression

    layout = StackedModel(make_model("resnet20", (3, 32, 32), 10)).layout
    assert wire_compression("identity", "int8") == "quantize" and wire_compression("topk", "int8") == "topk_int8"
    assert wire_compression("identity", "fp32") == "identity"
    fp = make_compressor(wire_compression("identity", "fp32"), layout).nbytes()
    q = make_compressor(wire_compression("identity", "int8"), layout).nbytes()
    assert fp == 4 * layout.dim and 4 * 0.99 <= fp / q <= 4 * 1.01
    fpk = make_compressor(wire_compression("topk", "fp32"), layout).nbytes()
    qk = make_compressor(wire_compression("topk", "int8"), layout).nbytes()
    assert qk < fpk


@pytest.mark.slow   # > 6 s: kept out of the fast subset
def test_int8_resume_equals_uninterrupted(tmp_path):
    """Checkpoints carry the per-node buffers and the RNG of the stochastic rounding."""
    import yaml

    from decent8.config import to_dict
    from decent8.train.loop import train

    common = ["progress=false", "algorithm.consensus_rounds=2", "precision=int8", "model.norm=range_bn",
              "model.width=4", "nodes=4", f"out_dir={tmp_path}"]
    full, _ = train(load_config(None, [*common, "epochs=2", "name=full"]), quiet=True)
    # the same run cut after epoch 1, then resumed for epoch 2
    _, run = train(load_config(None, [*common, "epochs=1", "name=part"]), quiet=True)
    (run / "config.yaml").write_text(yaml.safe_dump(to_dict(load_config(None, [*common, "epochs=2", "name=part"]))))
    resumed, _ = train(None, resume=run, quiet=True)
    for key in ("mean_node_accuracy", "averaged_model_accuracy", "consensus_distance", "averaged_model_loss"):
        assert resumed[key] == full[key], key


def test_a_registered_model_is_built_by_name_and_names_are_unique():
    from torch import nn as tnn

    from decent8.models import ModelArgs, make_model, register_model, registry

    @register_model("tiny_test_linear", norms=("none",))
    def tiny(a: ModelArgs) -> tnn.Module:
        return tnn.Sequential(tnn.Flatten(), tnn.Linear(a.channels * a.size, a.num_classes))

    try:
        m = make_model("tiny_test_linear", (1, 4), 3)
        assert m(torch.zeros(2, 1, 4)).shape == (2, 3)
        with pytest.raises(ValueError, match="registered twice"):
            register_model("tiny_test_linear")(tiny)
        with pytest.raises(ConfigError):
            make_model("tiny_test_linear", (1, 4), 3, norm="evonorm")
    finally:
        del registry.MODELS["tiny_test_linear"]
