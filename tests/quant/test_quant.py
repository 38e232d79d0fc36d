"""Low-precision training: the quantizer Q_b, gradient bifurcation, 8-bit messages (SPEC §5)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call, vmap

from decent8.errors import ConfigError
from decent8.models import StackedModel
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
from decent8.quant.layers import ActQuant, update_running


pytestmark = pytest.mark.usefixtures("one_thread")  # (conftest.py)


def _scale(mn, mx, bits):
    return ((mx - mn) / (2**bits - 1)).clamp_min(1e-8)


# --- Q_b ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [2, 4, 8, 16])
def test_deterministic_levels_and_error(bits):
    g = torch.Generator().manual_seed(bits)
    x = torch.randn(3, 4000, generator=g, dtype=torch.float64) * torch.tensor([[1.0], [10.0], [0.01]], dtype=torch.float64)
    mn, mx = x.amin(1, keepdim=True), x.amax(1, keepdim=True)
    scale = _scale(mn, mx, bits)
    q = quantize_per_node(x, bits, node_dim=0)                      # one range per row (node)
    rows = torch.stack([quantize_tensor(x[i], bits) for i in range(3)])  # each node's tensor alone: its own range
    assert torch.equal(q, rows)
    for i in range(3):
        assert q[i].unique().numel() <= 2**bits
        assert (q[i] - x[i]).abs().max() <= scale[i, 0] / 2 * (1 + 1e-9)
    # the ends of the range are levels
    assert torch.allclose(q.amin(1, keepdim=True), mn) and torch.allclose(q.amax(1, keepdim=True), mx)
    # values are exactly on the grid min + j·scale
    j = (q - mn) / scale
    assert torch.allclose(j, j.round(), atol=1e-6)
    # without node_dim the range is the whole tensor's (≤ 2^b levels in all)
    w = quantize_per_node(x, bits)
    assert w.unique().numel() <= 2**bits and torch.equal(w, quantize_tensor(x, bits))
    assert (w - x).abs().max() <= _scale(x.min(), x.max(), bits) / 2 * (1 + 1e-9)


def test_fixed_range_clamps_and_constant_tensor():
    x = torch.tensor([[-5.0, 0.0, 0.5, 1.0, 7.0]])
    q = fake_quantize(x, torch.tensor([[0.0]]), torch.tensor([[1.0]]), bits=8)
    assert q[0, 0] == 0.0 and q[0, -1] == 1.0  # clamped to the end levels
    c = torch.full((2, 10), 3.25)
    assert torch.equal(quantize_per_node(c, 8), c)  # scale = 1e-8: a constant is exact
    assert torch.equal(quantize_per_node(c, 8, node_dim=0), c)


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


def _reference_quantize(x, mn, mx, bits, u=None):
    """SPEC §5 written out: round(clamp((x − min)/scale + u, 0, 2^b − 1))·scale + min."""
    scale = _scale(mn, mx, bits)
    y = (x - mn) / scale + (0 if u is None else u)
    return torch.round(torch.clamp(y, 0, 2**bits - 1)) * scale + mn


@pytest.mark.parametrize("layout", ["contiguous", "permuted"])
def test_fake_quantize_matches_the_written_out_formula(layout):
    """The in-place fast path equals the textbook formula: exactly when deterministic; with
    the same dither u = (h + ½)/2^16 (h: the int16 codes of the same generator draw) it
    picks the same level everywhere but at float-rounding ties, and never more than one step
    away. Repeated calls reuse the work buffers without changing the results."""
    from decent8.quant.quantizer import dither_like

    g = torch.Generator().manual_seed(7)
    x = torch.randn(6, 5, 40, generator=g) * 3 + 1
    if layout == "permuted":
        x = x.permute(2, 0, 1)                                   # a dense, non-contiguous view
    mn, mx = torch.tensor(-2.0), torch.tensor(4.5)
    scale = _scale(mn, mx, 8)
    assert torch.equal(fake_quantize(x, mn, mx, 8), _reference_quantize(x, mn, mx, 8))
    for seed in (0, 1):
        torch.manual_seed(seed)
        got = fake_quantize(x, mn, mx, 8, stochastic=True)
        torch.manual_seed(seed)
        h = dither_like(x)                                       # the same draws, fresh memory
        assert h.dtype == torch.int16 and int(h.min()) < -16000 and int(h.max()) > 16000
        ref = _reference_quantize(x, mn, mx, 8, (h.float() + 0.5) / 65536)
        assert got.stride() == x.stride()
        assert ((got - ref).abs() <= scale * 1.001).all()
        assert (got != ref).float().mean() < 1e-3


def test_ste_passes_gradient_unchanged():
    x = torch.randn(5, 7, 3, requires_grad=True)              # one node's activations [b, ...]
    mn, mx = sample_mean_range(x)
    assert mn.dim() == mx.dim() == 0
    assert torch.allclose(mn, x.detach().flatten(1).amin(1).mean()) and torch.allclose(mx, x.detach().flatten(1).amax(1).mean())
    y = quantize_ste(x, mn, mx, 8, stochastic=True)
    g = torch.randn_like(x)
    y.backward(g)
    assert torch.equal(x.grad, g)
    w = torch.randn(3, 4, 4, requires_grad=True)
    gw = torch.randn(3, 4, 4)
    quantize_tensor(w, 8).backward(gw)
    assert torch.equal(w.grad, gw)
    # and under vmap over nodes (a chunk of nodes in one call)
    xs = torch.randn(3, 5, 7, requires_grad=True)
    ys = vmap(lambda t: quantize_ste(t, *sample_mean_range(t), 8, True), randomness="different")(xs)
    gs = torch.randn_like(xs)
    ys.backward(gs)
    assert torch.equal(xs.grad, gs)


def test_quantize_grad_is_identity_forward_and_8bit_backward():
    # one node: the gradient is quantized with its whole-tensor range
    x1 = torch.randn(6, 50, requires_grad=True)
    y1 = quantize_grad(x1, 8, stochastic=True)
    assert torch.equal(y1, x1)
    g1 = torch.randn(6, 50) * 3
    y1.backward(g1)
    assert x1.grad.unique().numel() <= 256
    assert (x1.grad - g1).abs().max() <= (g1.max() - g1.min()) / 255 * (1 + 1e-4)
    # k nodes under vmap: one range per node (very different gradient scales)
    x = torch.randn(3, 6, 50, requires_grad=True)
    y = vmap(lambda t: quantize_grad(t, 8, stochastic=True), randomness="different")(x)
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
    x = torch.randn(8, 3, 5, 5)                                # one node's batch [b, C, H, W]
    y = aq(x)
    mn = x.flatten(1).amin(1).mean()
    mx = x.flatten(1).amax(1).mean()
    # running ← 0.1·old (0) + 0.9·batch
    assert torch.allclose(aq.running_min, 0.9 * mn) and torch.allclose(aq.running_max, 0.9 * mx)
    inside = (x >= mn) & (x <= mx)
    assert (y - x)[inside].abs().max() <= (mx - mn).item() / 255 * (1 + 1e-5)
    assert y.unique().numel() <= 256
    aq(x)
    assert torch.allclose(aq.running_min, 0.1 * 0.9 * mn + 0.9 * mn)
    buf = torch.tensor(2.0)
    update_running(buf, torch.tensor(4.0), 0.1)                # weight 0.1 on the old value
    assert buf.item() == pytest.approx(0.1 * 2.0 + 0.9 * 4.0)
    aq.eval()
    e1, e2 = aq(x), aq(x)
    assert torch.equal(e1, e2)  # deterministic evaluation, running range
    ref = fake_quantize(x, aq.running_min, aq.running_max, 8)
    assert torch.equal(e1, ref)
    aq.spec = QuantSpec(eval_stochastic=True)
    torch.manual_seed(2)
    assert not torch.equal(aq(x), e1)  # the reference code's stochastic eval, as an option


# --- gradient bifurcation ----------------------------------------------------------------


def _det(m):
    set_stochastic(m, False)
    return m


def _run_nodes(module, params, x, chunk, g=None):
    """Node i = ``module`` with ``params[name][i]`` (a dict of ``[k, ...]``) on ``x[i]``, through
    :class:`StackedModel` (chunk = 1: a plain loop; chunk > 1: vmap over chunks). Returns the
    outputs ``[k, ...]``, the parameter gradients (a dict of ``[k, ...]``) and ``x``'s gradient for
    the output gradient ``g``."""
    k = x.shape[0]
    sm = StackedModel(module, nodes=k, chunk=chunk)
    flat = torch.cat([params[s.name].detach().reshape(k, -1) for s in sm.layout], 1).requires_grad_(True)
    x = x.detach().clone().requires_grad_(True)
    out = sm.forward(flat, x)
    g = torch.randn_like(out) if g is None else g
    out.backward(g)
    return out.detach(), sm.layout.unflatten(flat.grad), x.grad, g


@pytest.mark.parametrize("chunk", [1, 2, 3])
def test_conv_bifurcation_weight_grad_and_8bit_layer_grad(chunk):
    torch.manual_seed(0)
    k, b = 3, 4
    conv = _det(QConv2d(3, 5, 3, padding=1, spec=QuantSpec()))
    w = conv.weight.detach().unsqueeze(0).repeat(k, 1, 1, 1, 1) + 0.05 * torch.randn(k, 5, 3, 3, 3)
    bias = conv.bias.detach().unsqueeze(0).repeat(k, 1) + 0.05 * torch.randn(k, 5)
    x = torch.randn(k, b, 3, 6, 6)
    out, grads, xgrad, g = _run_nodes(conv, {"weight": w, "bias": bias}, x, chunk)
    # reference: FP conv of the 8-bit activations with the 8-bit weights, per node
    for i in range(k):
        mn, mx = sample_mean_range(x[i])
        xq = fake_quantize(x[i], mn, mx, 8)
        wr = quantize_tensor(w[i], 8).clone().requires_grad_(True)
        br = quantize_tensor(bias[i], 8).clone().requires_grad_(True)
        xr = xq.clone().requires_grad_(True)
        ref = F.conv2d(xr, wr, br, padding=1)
        assert torch.allclose(ref, out[i], atol=1e-5)
        ref.backward(g[i])
        # weight/bias gradient: unquantized output gradient with the 8-bit activations (STE to w)
        assert torch.allclose(grads["weight"][i], wr.grad, atol=1e-4, rtol=1e-5)
        assert torch.allclose(grads["bias"][i], br.grad, atol=1e-4, rtol=1e-5)
        # layer gradient: ≤ 256 values per node, within one step of the FP layer gradient
        assert xgrad[i].unique().numel() <= 256
        step = (xr.grad.max() - xr.grad.min()) / 255
        assert (xgrad[i] - xr.grad).abs().max() <= step * (1 + 1e-4)
        assert not torch.equal(xgrad[i], xr.grad)


@pytest.mark.parametrize("chunk", [1, 2])
def test_linear_bifurcation(chunk):
    torch.manual_seed(3)
    k = 2
    lin = _det(QLinear(6, 4, spec=QuantSpec()))
    w = torch.randn(k, 4, 6) * 0.3
    bias = torch.randn(k, 4)
    x = torch.randn(k, 10, 6)
    out, grads, xgrad, g = _run_nodes(lin, {"weight": w, "bias": bias}, x, chunk)
    for i in range(k):
        mn, mx = sample_mean_range(x[i])
        xq = fake_quantize(x[i], mn, mx, 8)
        wr = quantize_tensor(w[i], 8).clone().requires_grad_(True)
        xr = xq.clone().requires_grad_(True)
        ref = F.linear(xr, wr, quantize_tensor(bias[i], 8))
        assert torch.allclose(ref, out[i], atol=1e-5)
        ref.backward(g[i])
        assert torch.allclose(grads["weight"][i], wr.grad, atol=1e-5)
        assert torch.allclose(grads["bias"][i], g[i].sum(0), atol=1e-5)
        assert xgrad[i].unique().numel() <= 256
        step = (xr.grad.max() - xr.grad.min()) / 255
        assert (xgrad[i] - xr.grad).abs().max() <= step * (1 + 1e-4)


def test_per_node_ranges_under_vmap():
    """QLinear on 3 nodes with very different input (and output-gradient) scales, one vmap call
    (chunk = k): every node keeps its own activation range and its own gradient range — ≤ 256
    gradient values per node, each within one step of *that node's* FP gradient — and the result
    equals the per-node loop (chunk = 1)."""
    torch.manual_seed(6)
    k, b = 3, 64                                               # 768 input values per node > 256 levels
    scales = torch.tensor([1.0, 100.0, 1e-3])
    lin = QLinear(12, 5, spec=QuantSpec())
    w = lin.weight.detach().unsqueeze(0).repeat(k, 1, 1) + 0.1 * torch.randn(k, 5, 12)
    bias = torch.randn(k, 5)
    x = torch.randn(k, b, 12) * scales.view(k, 1, 1)
    g = torch.randn(k, b, 5) * scales.flip(0).view(k, 1, 1)
    for stochastic in (True, False):
        set_stochastic(lin, stochastic)
        out, grads, xgrad, _ = _run_nodes(lin, {"weight": w, "bias": bias}, x, k, g)
        for i in range(k):
            mn, mx = sample_mean_range(x[i])                      # this node's own activation range
            xq = fake_quantize(x[i], mn, mx, 8, stochastic)
            if not stochastic:
                ref = F.linear(xq, quantize_tensor(w[i], 8), quantize_tensor(bias[i], 8))
                assert torch.allclose(out[i], ref, rtol=1e-5, atol=1e-6 * ref.abs().max().item())
            fp = g[i] @ quantize_tensor(w[i], 8)                 # the layer gradient before quantization
            step = (fp.max() - fp.min()) / 255
            assert 1 < xgrad[i].unique().numel() <= 256
            assert (xgrad[i] - fp).abs().max() <= step * (1 + 1e-3)
        if not stochastic:
            out1, grads1, xgrad1, _ = _run_nodes(lin, {"weight": w, "bias": bias}, x, 1, g)
            # the layer gradient is on each node's 8-bit grid; the vmapped matmul may round the FP
            # gradient differently in the last bit, which can flip a value sitting on a level
            # boundary by one step — so allow one step of that node's grid, no more
            for i in range(k):
                assert torch.allclose(out[i], out1[i], rtol=1e-5, atol=1e-6 * out1[i].abs().max().item())
                gw1 = grads1["weight"][i]
                assert torch.allclose(grads["weight"][i], gw1, rtol=1e-5, atol=1e-6 * gw1.abs().max().item())
                fp = g[i] @ quantize_tensor(w[i], 8)
                step = (fp.max() - fp.min()) / 255
                assert (xgrad[i] - xgrad1[i]).abs().max() <= step * (1 + 1e-3)
                assert (xgrad[i] != xgrad1[i]).float().mean() < 0.01  # such flips are rare


@pytest.mark.parametrize("chunk", [1, 2])
def test_qadd_quantizes_both_inputs_and_the_gradient(chunk):
    torch.manual_seed(4)
    add = _det(QAdd(QuantSpec()))
    k = 2
    a = torch.randn(k, 4, 3, 5, 5, requires_grad=True)
    b = torch.randn(k, 4, 3, 5, 5, requires_grad=True)
    # QAdd has no parameters (StackedModel needs some): run the nodes as StackedModel does, a
    # loop of functional_call with node i's buffers (chunk = 1) or one vmap call (chunk = k)
    bufs = {n: v.detach().unsqueeze(0).repeat(k, *([1] * v.dim())) for n, v in add.named_buffers()}
    f = lambda bb, x1, x2: functional_call(add, bb, (x1, x2))  # noqa: E731
    if chunk == 1:
        out = torch.stack([f({n: v[i] for n, v in bufs.items()}, a[i], b[i]) for i in range(k)])
    else:
        out = vmap(f, randomness="different")(bufs, a, b)
    for i in range(k):
        ma, xa = sample_mean_range(a[i])
        mb, xb = sample_mean_range(b[i])
        ref = fake_quantize(a[i].detach(), ma, xa) + fake_quantize(b[i].detach(), mb, xb)
        assert torch.allclose(out[i], ref)
        assert torch.allclose(bufs["quant_a.running_min"][i], 0.9 * ma)  # per-node running range
    out.backward(torch.randn_like(out))
    for i in range(k):
        assert a.grad[i].unique().numel() <= 256 and torch.equal(a.grad, b.grad)


def test_master_weights_stay_fp32():
    from decent8.models import make_model

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


@pytest.mark.parametrize("exact_int_mm", [True, False])
@pytest.mark.parametrize("n,i,o", [(40, 24, 16), (20, 2100, 9)])
def test_int8_linear_is_the_exact_integer_product_on_either_path(monkeypatch, exact_int_mm, n, i, o):
    # full-range codes (where a saturating int8 GEMM goes wrong) and, at I = 2100, more inner
    # terms than one exact float32 block; zero points 0 and scales 1 leave the integer product
    import decent8.quant.int8_matmul as m

    if exact_int_mm and not m.int_mm_is_exact("cpu"):
        pytest.skip("torch._int_mm saturates on this CPU's kernels (the fallback path is tested)")
    monkeypatch.setattr(m, "int_mm_is_exact", lambda device: exact_int_mm)
    g = torch.Generator().manual_seed(1)
    qx = torch.randint(-128, 128, (n, i), generator=g, dtype=torch.int8)
    qw = torch.randint(-128, 128, (o, i), generator=g, dtype=torch.int8)
    qx[0], qw[0] = 127, -128
    one, zero = torch.tensor(1.0), torch.tensor(0.0)
    got = m.int8_linear(qx, one, zero, qw, one, zero)
    exact = qx.long() @ qw.long().t()  # the int32 accumulator, rounded once to float32 (row 0 > 2^24)
    assert torch.equal(got, exact.to(torch.float32))


def test_the_int_mm_check_catches_a_saturating_gemm(monkeypatch):
    import decent8.quant.int8_matmul as m

    def saturating(a, b):  # int16 pair sums, as oneDNN's GEMM without VNNI
        p = (a.long().unsqueeze(2) + 128) * b.long().unsqueeze(0)  # u8·s8 products [N, K, O]
        k = p.shape[1] - p.shape[1] % 2
        pairs = (p[:, :k:2] + p[:, 1:k:2]).clamp(-2 ** 15, 2 ** 15 - 1)
        return (pairs.sum(1) - 128 * b.long().sum(0)).to(torch.int32)

    m.int_mm_is_exact.cache_clear()
    monkeypatch.setattr(torch, "_int_mm", saturating)
    try:
        assert m.int_mm_is_exact("cpu") is False
    finally:
        m.int_mm_is_exact.cache_clear()
