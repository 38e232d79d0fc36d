"""Low-precision training: the quantizer Q_b, gradient bifurcation, 8-bit messages (SPEC §5)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from decent8.errors import ConfigError
from decent8.quant import (
    QAdd,
    QConv2d,
    QLinear,
    QuantSpec,
    check_bits,
    fake_quantize,
    quantize_grad,
    quantize_per_node,
    quantize_ste,
    quantize_tensor,
    sample_mean_range,
    set_stochastic,
)
from decent8.quant.layers import ActQuant


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _scale(mn, mx, bits):
    return ((mx - mn) / (2**bits - 1)).clamp_min(1e-8)


# --- Q_b ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [2, 4, 8, 16])
def test_deterministic_levels_and_error(bits):
    g = torch.Generator().manual_seed(bits)
    x = torch.randn(3, 4000, generator=g, dtype=torch.float64) * torch.tensor([[1.0], [10.0], [0.01]], dtype=torch.float64)
    q = quantize_per_node(x, bits)
    mn, mx = x.amin(1, keepdim=True), x.amax(1, keepdim=True)
    scale = _scale(mn, mx, bits)
    for i in range(3):
        assert q[i].unique().numel() <= 2**bits
        assert (q[i] - x[i]).abs().max() <= scale[i, 0] / 2 * (1 + 1e-9)
    # the ends of the range are levels
    assert torch.allclose(q.amin(1, keepdim=True), mn) and torch.allclose(q.amax(1, keepdim=True), mx)
    # values are exactly on the grid min + j·scale
    j = (q - mn) / scale
    assert torch.allclose(j, j.round(), atol=1e-6)


def test_fixed_range_clamps_and_constant_tensor():
    x = torch.tensor([[-5.0, 0.0, 0.5, 1.0, 7.0]])
    q = fake_quantize(x, torch.tensor([[0.0]]), torch.tensor([[1.0]]), bits=8)
    assert q[0, 0] == 0.0 and q[0, -1] == 1.0  # clamped to the end levels
    c = torch.full((2, 10), 3.25)
    assert torch.equal(quantize_per_node(c, 8), c)  # scale = 1e-8: a constant is exact


def test_stochastic_rounding_unbiased():
    torch.manual_seed(0)
    x = torch.rand(1, 64) * 2 - 1
    mn, mx = torch.tensor([[-1.0]]), torch.tensor([[1.0]])
    scale = 2.0 / 255
    draws = torch.stack([fake_quantize(x, mn, mx, 8, stochastic=True) for _ in range(4000)])
    err = draws - x
    assert err.abs().max() <= scale * (1 + 1e-5)            # one step at most
    assert err.mean(0).abs().max() < 0.05 * scale            # unbiased per element
    assert abs(err.mean().item()) < 0.005 * scale
    assert draws.unique().numel() <= 256


def test_ste_passes_gradient_unchanged():
    x = torch.randn(2, 5, 7, requires_grad=True)
    mn, mx = sample_mean_range(x)
    y = quantize_ste(x, mn.view(2, 1, 1), mx.view(2, 1, 1), 8, stochastic=True)
    g = torch.randn_like(x)
    y.backward(g)
    assert torch.equal(x.grad, g)
    w = torch.randn(3, 4, 4, requires_grad=True)
    gw = torch.randn(3, 4, 4)
    quantize_tensor(w, 8).backward(gw)
    assert torch.equal(w.grad, gw)


def test_quantize_grad_is_identity_forward_and_8bit_backward():
    x = torch.randn(3, 6, 50, requires_grad=True)
    y = quantize_grad(x, 8, stochastic=True)
    assert torch.equal(y, x)
    g = torch.randn(3, 6, 50) * torch.tensor([1.0, 100.0, 1e-3]).view(3, 1, 1)
    y.backward(g)
    for i in range(3):
        assert x.grad[i].unique().numel() <= 256
        scale = (g[i].max() - g[i].min()) / 255
        assert (x.grad[i] - g[i]).abs().max() <= scale * (1 + 1e-4)


@pytest.mark.parametrize("bits", [1, 0, 17, 33, 8.0, "8", True])
def test_bad_bits(bits):
    with pytest.raises(ConfigError, match=r"^quant\.bits:"):
        check_bits(bits)
    with pytest.raises(ConfigError, match=r"^quant\.(bits|grad_bits):"):
        QuantSpec(bits=bits) if not isinstance(bits, float) else QuantSpec(grad_bits=bits)


# --- activation quantizer ---------------------------------------------------------------


def test_act_quant_range_running_stats_and_eval():
    torch.manual_seed(1)
    spec = QuantSpec(stochastic=True)
    aq = ActQuant(spec)
    x = torch.randn(1, 8, 3, 5, 5)
    y = aq(x)
    mn = x.flatten(2).amin(2).mean(1)
    mx = x.flatten(2).amax(2).mean(1)
    # running ← 0.1·old (0) + 0.9·batch
    assert torch.allclose(aq.running_min, 0.9 * mn[0]) and torch.allclose(aq.running_max, 0.9 * mx[0])
    inside = (x >= mn) & (x <= mx)
    assert (y - x)[inside].abs().max() <= (mx - mn).item() / 255 * (1 + 1e-5)
    assert y.unique().numel() <= 256
    aq(x)
    assert torch.allclose(aq.running_min, 0.1 * 0.9 * mn[0] + 0.9 * mn[0])
    aq.eval()
    e1, e2 = aq(x), aq(x)
    assert torch.equal(e1, e2)  # deterministic evaluation, running range
    ref = fake_quantize(x, aq.running_min.view(1, 1, 1, 1, 1), aq.running_max.view(1, 1, 1, 1, 1), 8)
    assert torch.equal(e1, ref)
    aq.spec = QuantSpec(eval_stochastic=True)
    torch.manual_seed(2)
    assert not torch.equal(aq(x), e1)  # the reference code's stochastic eval, as an option


# --- gradient bifurcation ----------------------------------------------------------------


def _det(m):
    set_stochastic(m, False)
    return m


def test_conv_bifurcation_weight_grad_and_8bit_layer_grad():
    torch.manual_seed(0)
    k, b = 3, 4
    conv = _det(QConv2d(3, 5, 3, padding=1, spec=QuantSpec()))
    w = conv.weight.detach().unsqueeze(0).repeat(k, 1, 1, 1, 1) + 0.05 * torch.randn(k, 5, 3, 3, 3)
    bias = conv.bias.detach().unsqueeze(0).repeat(k, 1) + 0.05 * torch.randn(k, 5)
    w.requires_grad_(True)
    bias.requires_grad_(True)
    x = torch.randn(k, b, 3, 6, 6, requires_grad=True)
    conv.weight, conv.bias = None, None  # substitute stacked parameters like functional_call
    del conv.weight, conv.bias
    conv.weight, conv.bias = w, bias
    out = conv(x)
    g = torch.randn_like(out)
    out.backward(g)
    # reference: FP conv of the 8-bit activations with the 8-bit weights, per node
    mn, mx = sample_mean_range(x)
    for i in range(k):
        xq = fake_quantize(x[i].detach(), mn[i], mx[i], 8)
        wq = quantize_per_node(w[i : i + 1].detach(), 8)[0]
        bq = quantize_per_node(bias[i : i + 1].detach(), 8)[0]
        wr = wq.clone().requires_grad_(True)
        br = bq.clone().requires_grad_(True)
        xr = xq.clone().requires_grad_(True)
        ref = F.conv2d(xr, wr, br, padding=1)
        assert torch.allclose(ref, out[i], atol=1e-5)
        ref.backward(g[i])
        # weight/bias gradient: unquantized output gradient with the 8-bit activations (STE to w)
        assert torch.allclose(w.grad[i], wr.grad, atol=1e-4, rtol=1e-5)
        assert torch.allclose(bias.grad[i], br.grad, atol=1e-4, rtol=1e-5)
        # layer gradient: ≤ 256 values per node, within one step of the FP layer gradient
        assert x.grad[i].unique().numel() <= 256
        step = (xr.grad.max() - xr.grad.min()) / 255
        assert (x.grad[i] - xr.grad).abs().max() <= step * (1 + 1e-4)
        assert not torch.equal(x.grad[i], xr.grad)


def test_linear_bifurcation():
    torch.manual_seed(3)
    k = 2
    lin = _det(QLinear(6, 4, spec=QuantSpec()))
    w = (torch.randn(k, 4, 6) * 0.3).requires_grad_(True)
    bias = torch.randn(k, 4).requires_grad_(True)
    del lin.weight, lin.bias
    lin.weight, lin.bias = w, bias
    x = torch.randn(k, 10, 6, requires_grad=True)
    out = lin(x)
    g = torch.randn_like(out)
    out.backward(g)
    mn, mx = sample_mean_range(x)
    for i in range(k):
        xq = fake_quantize(x[i].detach(), mn[i], mx[i], 8)
        wr = quantize_per_node(w[i : i + 1].detach(), 8)[0].requires_grad_(True)
        xr = xq.clone().requires_grad_(True)
        ref = F.linear(xr, wr, quantize_per_node(bias[i : i + 1].detach(), 8)[0])
        ref.backward(g[i])
        assert torch.allclose(w.grad[i], wr.grad, atol=1e-5)
        assert torch.allclose(bias.grad[i], g[i].sum(0), atol=1e-5)
        assert x.grad[i].unique().numel() <= 256
        step = (xr.grad.max() - xr.grad.min()) / 255
        assert (x.grad[i] - xr.grad).abs().max() <= step * (1 + 1e-4)


def test_qadd_quantizes_both_inputs_and_the_gradient():
    torch.manual_seed(4)
    add = _det(QAdd(QuantSpec()))
    a = torch.randn(2, 4, 3, 5, 5, requires_grad=True)
    b = torch.randn(2, 4, 3, 5, 5, requires_grad=True)
    out = add(a, b)
    ma, xa = sample_mean_range(a)
    mb, xb = sample_mean_range(b)
    for i in range(2):
        ref = fake_quantize(a[i].detach(), ma[i], xa[i]) + fake_quantize(b[i].detach(), mb[i], xb[i])
        assert torch.allclose(out[i], ref)
    out.backward(torch.randn_like(out))
    for i in range(2):
        assert a.grad[i].unique().numel() <= 256 and torch.equal(a.grad, b.grad)


def test_master_weights_stay_fp32():
    from decent8.models import StackedModel, make_model

    sm = StackedModel(make_model("cnn", (1, 8, 8), 10, precision="int8"), nodes=2)
    p = sm.flat_parameters().unsqueeze(0).repeat(2, 1)
    loss, grad = sm.loss_and_grad(p, torch.randn(2, 4, 1, 8, 8), torch.randint(0, 10, (2, 4)))
    assert p.dtype == grad.dtype == loss.dtype == torch.float32
    assert grad.unique().numel() > 1000  # weight gradients are not quantized


@pytest.mark.parametrize("n,i,o", [(40, 24, 16), (5, 13, 7)])
def test_int8_matmul_equals_fake_quantized_product(n, i, o):
    from decent8.quant import int8_codes, int8_linear

    torch.manual_seed(5)
    x, w = torch.randn(n, i), torch.randn(o, i) * 0.2
    qx, sx, zx = int8_codes(x, x.min(), x.max())
    qw, sw, zw = int8_codes(w, w.min(), w.max())
    assert qx.dtype == torch.int8
    assert torch.allclose(sx * qx.float() + zx, fake_quantize(x, x.min(), x.max(), 8), atol=1e-5)
    ref = fake_quantize(x, x.min(), x.max(), 8) @ fake_quantize(w, w.min(), w.max(), 8).t()
    assert torch.allclose(int8_linear(qx, sx, zx, qw, sw, zw), ref, atol=1e-4, rtol=1e-5)
