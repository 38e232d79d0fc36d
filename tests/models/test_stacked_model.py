"""The stacked simulator model: k nodes (a loop or vmap over chunks) equal k separate plain models."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from decent8.models import StackedModel, init_parameters, make_model
from decent8.quant import set_stochastic


@pytest.mark.parametrize("chunk", [1, 2, 3])
@pytest.mark.parametrize("precision,dtype", [("fp32", torch.float32), ("int8", torch.float32), ("int8", torch.float64)])
@pytest.mark.parametrize("name", ["cnn", "mlp"])
def test_stacked_gradients_equal_per_node_gradients(name, precision, dtype, chunk):
    """k = 3 nodes through StackedModel (chunk 1: a plain loop; 2: vmap over a chunk of 2 and a
    single node; 3: one vmap call) == each node's parameters in the plain module alone: loss,
    gradient, the per-node buffers (running statistics, 8-bit activation ranges) and eval logits."""
    torch.manual_seed(0)
    module = make_model(name, (1, 8, 8), 10, width=8, norm="range_bn" if name == "cnn" else None,
                        precision=precision).to(dtype)
    set_stochastic(module, False)  # deterministic rounding in the 8-bit form, for an exact comparison
    template = copy.deepcopy(module)
    k, b = 3, 5
    model = StackedModel(module, nodes=k, chunk=chunk)
    params = model.flat_parameters().repeat(k, 1) + 0.05 * torch.randn(k, model.dim, dtype=dtype)
    x = torch.randn(k, b, 1, 8, 8, dtype=dtype) * torch.tensor([1.0, 10.0, 0.1], dtype=dtype).view(k, 1, 1, 1, 1)
    y = torch.randint(0, 10, (k, b))
    loss, grad = model.loss_and_grad(params, x, y)
    xt = torch.randn(4, 1, 8, 8, dtype=dtype)
    logits = model.logits(params, xt)
    if dtype == torch.float64:
        tol = 1e-9
    elif precision == "fp32":
        tol = 1e-5
    else:
        # 8-bit in float32: vmap (batched matmuls/convs) and the loop may round differently in the
        # last bit, and that can move a value sitting exactly on a level boundary by one
        # quantization step (seen here: one activation level of act1 → act2's running mean moves
        # by ~4e-4 relative); allow a few 8-bit steps (3/255 of the magnitude). The float64 case
        # above checks the same thing tightly.
        tol = 3 / 255
    for i in range(k):
        one = copy.deepcopy(template)                     # the plain module, node i alone
        with torch.no_grad():
            for p, v in zip(one.parameters(), model.layout.unflatten(params[i]).values()):
                p.copy_(v)
        one.train()
        li = F.cross_entropy(one(x[i]), y[i])
        li.backward()
        gi = torch.cat([p.grad.reshape(-1) for p in one.parameters()])
        assert torch.allclose(loss[i], li, rtol=tol, atol=tol)
        assert torch.allclose(grad[i], gi, rtol=tol, atol=tol * gi.abs().max().item()), (grad[i] - gi).abs().max()
        if model.buffers is not None:
            own = torch.cat([v.reshape(-1) for v in one.buffers() if v.is_floating_point()])
            assert torch.allclose(model.buffers[i], own, rtol=tol, atol=tol * own.abs().max().item())
        one.eval()
        with torch.no_grad():
            assert torch.allclose(logits[i], one(xt), rtol=tol, atol=tol * logits[i].abs().max().item())
    assert (model.buffers is not None) == (precision == "int8" or name == "cnn")


def test_logits_of_each_node_are_its_plain_modules_outputs():
    """Two nodes with different parameters: each node's logits (evaluated in chunks of 3 samples)
    are the plain module's outputs with that node's parameters, and the two differ."""
    torch.manual_seed(0)
    module = make_model("cnn", (1, 8, 8), 10, width=4)
    template = copy.deepcopy(module)
    model = StackedModel(module)
    params = model.flat_parameters().repeat(2, 1) + 0.1 * torch.randn(2, model.dim)
    x = torch.randn(7, 1, 8, 8)
    out = model.logits(params, x, chunk=3)
    assert out.shape == (2, 7, 10)
    for i in range(2):
        one = copy.deepcopy(template)
        with torch.no_grad():
            for p, v in zip(one.parameters(), model.layout.unflatten(params[i]).values()):
                p.copy_(v)
        one.eval()
        with torch.no_grad():
            assert torch.allclose(out[i], one(x), rtol=1e-5, atol=1e-5)
    assert not torch.allclose(out[0], out[1])


def test_init_is_deterministic_and_independent_of_global_rng():
    a = make_model("cnn", (1, 8, 8), 10)
    b = make_model("cnn", (1, 8, 8), 10)
    init_parameters(a, 123)
    torch.manual_seed(999)
    init_parameters(b, 123)
    assert torch.equal(StackedModel(a).flat_parameters(), StackedModel(b).flat_parameters())
