"""The stacked simulator model: k models in one pass equal k separate models."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from decent8.models import StackedModel, init_parameters, make_model


@pytest.mark.parametrize("name", ["cnn", "mlp"])
def test_stacked_gradients_equal_per_node_gradients(name):
    torch.manual_seed(0)
    module = make_model(name, (1, 8, 8), 10, width=8)
    model = StackedModel(module)
    k, b = 3, 5
    params = model.flat_parameters().repeat(k, 1) + 0.05 * torch.randn(k, model.dim)
    x = torch.randn(k, b, 1, 8, 8)
    y = torch.randint(0, 10, (k, b))
    loss, grad = model.loss_and_grad(params, x, y)
    for i in range(k):
        li, gi = model.loss_and_grad(params[i : i + 1], x[i : i + 1], y[i : i + 1])
        assert torch.allclose(loss[i], li[0], atol=1e-6)
        assert torch.allclose(grad[i], gi[0], atol=1e-6)
    # and k = 1 equals the plain module with the same parameters
    with torch.no_grad():
        for p, v in zip(module.parameters(), model.layout.unflatten(params[0]).values()):
            p.copy_(v)
    module.zero_grad()
    F.cross_entropy(module(x[:1])[0], y[0]).backward()
    ref = torch.cat([p.grad.reshape(-1) for p in module.parameters()])
    assert torch.allclose(grad[0], ref, atol=1e-6)


def test_logits_shape_and_eval_consistency():
    module = make_model("cnn", (1, 8, 8), 10, width=4)
    model = StackedModel(module)
    params = model.flat_parameters().repeat(2, 1)
    x = torch.randn(7, 1, 8, 8)
    out = model.logits(params, x, chunk=3)
    assert out.shape == (2, 7, 10)
    assert torch.allclose(out[0], out[1])


def test_init_is_deterministic_and_independent_of_global_rng():
    a = make_model("cnn", (1, 8, 8), 10)
    b = make_model("cnn", (1, 8, 8), 10)
    init_parameters(a, 123)
    torch.manual_seed(999)
    init_parameters(b, 123)
    assert torch.equal(StackedModel(a).flat_parameters(), StackedModel(b).flat_parameters())
