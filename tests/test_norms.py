"""Normalization-activation layers (SPEC §5, paper Eq. 2–5), node-batched."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from decent8.errors import ConfigError
from decent8.nn.norms import (
    BatchNormReLU,
    EvoNormS0,
    GroupNormReLU,
    RangeBatchNorm,
    RangeEvoNorm,
    chunk_count,
    make_norm,
    range_constant,
)
from decent8.quant import QuantSpec, fake_quantize, quantize_per_node, set_stochastic


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


K, B, C, H = 2, 3, 16, 4


def _stack(layer, k=K, seed=0):
    """Random stacked parameters [k, C] substituted on the layer (as functional_call does)."""
    g = torch.Generator().manual_seed(seed)
    params = {}
    for name, p in list(layer.named_parameters()):
        v = p.detach().unsqueeze(0).repeat(k, 1) + 0.5 * torch.randn(k, p.numel(), generator=g, dtype=p.dtype)
        params[name] = v
    for name, v in params.items():
        delattr(layer, name)
        setattr(layer, name, v)
    return params


def _x(seed=1, shape=(K, B, C, H, H)):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 2 + 0.3


def _b(p):  # [C] → [C, 1, 1]
    return p.view(-1, 1, 1)


def test_range_constant_and_chunks():
    assert range_constant(8) == pytest.approx(0.5 * 0.35 * (1 + math.sqrt(math.pi * math.log(4))) / math.sqrt(2 * math.log(8)))
    assert chunk_count(64) == 16 and chunk_count(2048) == 16 and chunk_count(24) == 12 and chunk_count(8) == 4
    assert chunk_count(3) == 1


def test_evonorm_s0_matches_formula():
    layer = EvoNormS0(C).double()
    p = _stack(layer)
    x = _x()
    y = layer(x)
    G = 8
    for i in range(K):
        for s in range(B):
            xs = x[i, s]
            var = xs.reshape(G, -1).var(-1, unbiased=False).repeat_interleave(C // G).view(C, 1, 1)
            ref = xs * torch.sigmoid(_b(p["v"][i]) * xs) / torch.sqrt(var + 1e-5) * _b(p["weight"][i]) + _b(p["bias"][i])
            assert torch.allclose(y[i, s], ref, atol=1e-10)
    assert len(list(layer.buffers())) == 0


def _range_evonorm_ref(xs, v, w, bias, q=None):
    """Eq. 5 / SPEC §5 for one sample xs [C, H, W], 8 groups, 16 chunks."""
    G = 8
    qf = q or (lambda t: t)
    num = xs * torch.clamp(qf(v).view(C, 1, 1) * xs / 6 + 0.5, 0, 1)
    grp = xs.reshape(G, 16, -1)
    L = grp.shape[-1]
    R = (grp.amax(-1) - grp.amin(-1)).mean(-1)                               # [G]
    Cl = 0.5 * 0.35 * (1 + math.sqrt(math.pi * math.log(4))) / math.sqrt(2 * math.log(L))
    s = 1.0 / (Cl * R + 1e-5)
    return s, num, lambda s_: (num.reshape(G, -1) * s_.view(G, 1)).view_as(xs) * qf(w).view(C, 1, 1) + qf(bias).view(C, 1, 1)


def test_range_evonorm_matches_formula_fp32():
    layer = RangeEvoNorm(C).double()
    p = _stack(layer)
    x = _x()
    y = layer(x)
    for i in range(K):
        for s_ in range(B):
            s, num, finish = _range_evonorm_ref(x[i, s_], p["v"][i], p["weight"][i], p["bias"][i])
            assert torch.allclose(y[i, s_], finish(s), atol=1e-10)
    assert len(list(layer.buffers())) == 0  # no running statistics


def test_range_evonorm_int8_matches_formula():
    layer = RangeEvoNorm(C, spec=QuantSpec()).double()
    set_stochastic(layer, False)
    p = _stack(layer)
    x = _x()
    y = layer(x)
    for i in range(K):
        xi = x[i]
        mn = xi.flatten(1).amin(1).mean()
        mx = xi.flatten(1).amax(1).mean()
        xq = fake_quantize(xi, mn, mx, 8)                                       # x̂ = Q(x), batch-mean range

        def q(t):
            return quantize_per_node(t.unsqueeze(0), 8)[0]                     # per-tensor, deterministic
        scales, finishes = [], []
        for s_ in range(B):
            s, num, finish = _range_evonorm_ref(xq[s_], p["v"][i], p["weight"][i], p["bias"][i], q)
            scales.append(s)
            finishes.append(finish)
        sq = quantize_per_node(torch.stack(scales).unsqueeze(0), 8)[0]        # Q(s): the node's whole tensor
        for s_ in range(B):
            assert torch.allclose(y[i, s_], finishes[s_](sq[s_]), atol=1e-9)
    # the layer's only buffers are its input quantizer's running range
    assert sorted(n for n, _ in layer.named_buffers()) == ["act_quant.running_max", "act_quant.running_min"]


def test_range_evonorm_int8_gradient_is_8bit_and_eval_deterministic():
    torch.manual_seed(0)
    layer = RangeEvoNorm(C, spec=QuantSpec())
    x = torch.randn(K, B, C, H, H, requires_grad=True)
    y = layer(x)
    y.backward(torch.randn_like(y))
    assert x.grad is not None
    layer.eval()
    with torch.no_grad():
        assert torch.equal(layer(x), layer(x))


def test_range_batchnorm_formula_running_stats_and_eval():
    layer = RangeBatchNorm(C).double()
    p = _stack(layer)
    layer.running_mean = torch.zeros(K, C, dtype=torch.float64)
    layer.running_scale = torch.ones(K, C, dtype=torch.float64)
    x = _x(shape=(K, 4, C, H, H))
    y = layer(x)
    for i in range(K):
        per_c = x[i].transpose(0, 1).reshape(C, -1)                           # [C, b·H·W] in (b, h, w) order
        mu = per_c.mean(1)
        ch = per_c.reshape(C, 16, -1)
        L = ch.shape[-1]
        R = (ch.amax(-1) - ch.amin(-1)).mean(-1)
        s = 1 / (range_constant(L) * R + 1e-5)
        ref = (x[i] - _b(mu)) * _b(s) * _b(p["weight"][i]) + _b(p["bias"][i])
        assert torch.allclose(y[i], ref, atol=1e-10)
        assert torch.allclose(layer.running_mean[i], 0.9 * mu)                 # 0.1 on the old value (0)
        assert torch.allclose(layer.running_scale[i], 0.1 + 0.9 * s)
    layer.eval()
    ye = layer(x)
    ref = (x - layer.running_mean.view(K, 1, C, 1, 1)) * layer.running_scale.view(K, 1, C, 1, 1)
    ref = ref * p["weight"].view(K, 1, C, 1, 1) + p["bias"].view(K, 1, C, 1, 1)
    assert torch.allclose(ye, ref) and torch.equal(ye, layer(x))


def test_bn_relu_and_gn_relu_match_torch():
    x = _x()
    bn = BatchNormReLU(C).double()
    pb = _stack(bn)
    bn.running_mean = torch.zeros(K, C, dtype=torch.float64)
    bn.running_var = torch.ones(K, C, dtype=torch.float64)
    gn = GroupNormReLU(C).double()
    pg = _stack(gn, seed=3)
    yb, yg = bn(x), gn(x)
    for i in range(K):
        rm, rv = torch.zeros(C, dtype=torch.float64), torch.ones(C, dtype=torch.float64)
        ref = F.relu(F.batch_norm(x[i], rm, rv, pb["weight"][i], pb["bias"][i], True, 0.1, 1e-5))
        assert torch.allclose(yb[i], ref, atol=1e-10)
        assert torch.allclose(bn.running_mean[i], rm) and torch.allclose(bn.running_var[i], rv)
        ref = F.relu(F.group_norm(x[i], 8, pg["weight"][i], pg["bias"][i], 1e-5))
        assert torch.allclose(yg[i], ref, atol=1e-10)
    bn.eval()
    for i in range(K):
        ref = F.relu(F.batch_norm(x[i], bn.running_mean[i], bn.running_var[i], pb["weight"][i], pb["bias"][i], False))
        assert torch.allclose(bn(x)[i], ref, atol=1e-10)


@pytest.mark.parametrize("name", ["evonorm", "range_evonorm", "range_bn", "bn", "gn"])
@pytest.mark.parametrize("spec", [None, QuantSpec()])
def test_node_batched_equals_per_node(name, spec):
    torch.manual_seed(0)
    layer = make_norm(name, C, spec).double()
    if spec is not None:
        set_stochastic(layer, False)
    params = _stack(layer, k=3)
    bufs = {n: b.unsqueeze(0).repeat(3, *([1] * b.dim())) for n, b in layer.named_buffers()}
    x = _x(shape=(3, B, C, H, H))
    from torch.func import functional_call
    y = functional_call(layer, {**params, **bufs}, (x,))
    for i in range(3):
        one = {n: v[i : i + 1] for n, v in params.items()}
        ob = {n: b.unsqueeze(0) for n, b in make_norm(name, C, spec).double().named_buffers()}
        y1 = functional_call(layer, {**one, **ob}, (x[i : i + 1],))
        assert torch.allclose(y1[0], y[i], atol=1e-12)
        for n in bufs:
            assert torch.allclose(ob[n][0], bufs[n][i])


def test_unknown_norm():
    with pytest.raises(ConfigError, match=r"^model\.norm: unknown value 'layernorm'"):
        make_norm("layernorm", 8)
