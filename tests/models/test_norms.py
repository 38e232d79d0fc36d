"""Normalization-activation layers (SPEC §5, paper Eq. 2–5): plain per-model modules, per node
through functional_call / StackedModel (a loop or vmap over chunks of nodes)."""
from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

from decent8.errors import ConfigError
from decent8.models import StackedModel
from decent8.models.norms import (
    BatchNormReLU,
    EvoNormS0,
    GroupNormReLU,
    RangeBatchNorm,
    RangeEvoNorm,
    chunk_count,
    make_norm,
    range_constant,
)
from decent8.quant import QuantSpec, fake_quantize, quantize_tensor, set_stochastic


pytestmark = pytest.mark.usefixtures("one_thread")  # (conftest.py)


K, B, C, H = 2, 3, 16, 4


def _stack(layer, k=K, seed=0):
    """Random per-node parameters ``{name: [k, C]}`` around the layer's own."""
    g = torch.Generator().manual_seed(seed)
    return {name: p.detach().unsqueeze(0).repeat(k, 1) + 0.5 * torch.randn(k, p.numel(), generator=g, dtype=p.dtype)
            for name, p in layer.named_parameters()}


def _node(layer, params, i, x, bufs=None):
    """Node i: the plain layer with row i of the parameters (and of the per-node buffers, which
    it updates in place in training) substituted, as StackedModel does, on one node's ``x[b, ...]``."""
    named = {n: v[i] for n, v in params.items()}
    if bufs is not None:
        named.update({n: v[i] for n, v in bufs.items()})
    return functional_call(layer, named, (x,))


def _x(seed=1, shape=(K, B, C, H, H)):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 2 + 0.3


def _b(p):  # [C] → [C, 1, 1]
    return p.view(-1, 1, 1)


def test_range_constant_and_chunks():
    assert range_constant(8) == pytest.approx(0.5 * 0.35 * (1 + math.sqrt(math.pi * math.log(4))) / math.sqrt(2 * math.log(8)))
    assert chunk_count(64) == 16 and chunk_count(2048) == 16 and chunk_count(24) == 12 and chunk_count(8) == 4
    assert chunk_count(3) == 1


def _nodes(layer, params, x, bufs=None):
    """All K nodes one by one (``x[k, b, ...]`` → ``[k, b, ...]``)."""
    return torch.stack([_node(layer, params, i, x[i], bufs) for i in range(x.shape[0])])


def test_evonorm_s0_matches_formula():
    layer = EvoNormS0(C).double()
    p = _stack(layer)
    x = _x()
    y = _nodes(layer, p, x)
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
    y = _nodes(layer, p, x)
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
    y = _nodes(layer, p, x)
    for i in range(K):
        xi = x[i]
        mn = xi.flatten(1).amin(1).mean()
        mx = xi.flatten(1).amax(1).mean()
        xq = fake_quantize(xi, mn, mx, 8)                                       # x̂ = Q(x), batch-mean range

        def q(t):
            return quantize_tensor(t, 8)                                        # per-tensor, deterministic
        scales, finishes = [], []
        for s_ in range(B):
            s, num, finish = _range_evonorm_ref(xq[s_], p["v"][i], p["weight"][i], p["bias"][i], q)
            scales.append(s)
            finishes.append(finish)
        sq = quantize_tensor(torch.stack(scales), 8)                           # Q(s): the node's whole tensor
        for s_ in range(B):
            assert torch.allclose(y[i, s_], finishes[s_](sq[s_]), atol=1e-9)
    # the layer's only buffers are its input quantizer's running range
    assert sorted(n for n, _ in layer.named_buffers()) == ["act_quant.running_max", "act_quant.running_min"]


@pytest.mark.parametrize("chunk", [1, K])
def test_range_evonorm_int8_gradient_is_8bit_and_eval_deterministic(chunk, monkeypatch):
    import decent8.models.norms as norms

    seen = []
    if chunk == 1:  # spy on the gradient the layer's output quantizer hands back (a plain tensor per node)
        orig = norms.quantize_grad

        def spy(t, bits, stochastic):
            if t.requires_grad:
                t.register_hook(lambda gr: seen.append(gr.detach().clone()))
            return orig(t, bits, stochastic)
        monkeypatch.setattr(norms, "quantize_grad", spy)
    torch.manual_seed(0)
    layer = RangeEvoNorm(C, spec=QuantSpec())
    sm = StackedModel(layer, nodes=K, chunk=chunk)
    params = sm.flat_parameters().unsqueeze(0).repeat(K, 1).requires_grad_(True)
    x = torch.randn(K, B, C, H, H, requires_grad=True)
    y = sm.forward(params, x)
    g = torch.randn_like(y) * torch.tensor([1.0, 50.0]).view(K, 1, 1, 1, 1)
    (y * g).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all() and torch.isfinite(params.grad).all()
    if chunk == 1:
        assert len(seen) == K
        ids = [min(range(K), key=lambda j: (gq - g[j]).abs().max().item()) for gq in seen]  # (backward order)
        assert sorted(ids) == list(range(K))
        for i, gq in zip(ids, seen):                                           # ≤ 256 values per node, one step
            assert gq.unique().numel() <= 256 < g[i].unique().numel()
            assert (gq - g[i]).abs().max() <= (g[i].max() - g[i].min()) / 255 * (1 + 1e-4)
    layer.eval()
    with torch.no_grad():
        assert torch.equal(sm.forward(params, x), sm.forward(params, x))


def test_range_batchnorm_formula_running_stats_and_eval():
    layer = RangeBatchNorm(C).double()
    p = _stack(layer)
    bufs = {"running_mean": torch.zeros(K, C, dtype=torch.float64), "running_scale": torch.ones(K, C, dtype=torch.float64)}
    x = _x(shape=(K, 4, C, H, H))
    y = _nodes(layer, p, x, bufs)
    for i in range(K):
        per_c = x[i].transpose(0, 1).reshape(C, -1)                           # [C, b·H·W] in (b, h, w) order
        mu = per_c.mean(1)
        ch = per_c.reshape(C, 16, -1)
        L = ch.shape[-1]
        R = (ch.amax(-1) - ch.amin(-1)).mean(-1)
        s = 1 / (range_constant(L) * R + 1e-5)
        ref = (x[i] - _b(mu)) * _b(s) * _b(p["weight"][i]) + _b(p["bias"][i])
        assert torch.allclose(y[i], ref, atol=1e-10)
        assert torch.allclose(bufs["running_mean"][i], 0.9 * mu)                 # 0.1 on the old value (0)
        assert torch.allclose(bufs["running_scale"][i], 0.1 + 0.9 * s)
    layer.eval()
    ye = _nodes(layer, p, x, bufs)
    ref = (x - bufs["running_mean"].view(K, 1, C, 1, 1)) * bufs["running_scale"].view(K, 1, C, 1, 1)
    ref = ref * p["weight"].view(K, 1, C, 1, 1) + p["bias"].view(K, 1, C, 1, 1)
    assert torch.allclose(ye, ref) and torch.equal(ye, _nodes(layer, p, x, bufs))


def test_bn_relu_and_gn_relu_match_torch():
    x = _x()
    bn = BatchNormReLU(C).double()
    pb = _stack(bn)
    bufs = {"running_mean": torch.zeros(K, C, dtype=torch.float64), "running_var": torch.ones(K, C, dtype=torch.float64)}
    gn = GroupNormReLU(C).double()
    pg = _stack(gn, seed=3)
    yb, yg = _nodes(bn, pb, x, bufs), _nodes(gn, pg, x)
    for i in range(K):
        rm, rv = torch.zeros(C, dtype=torch.float64), torch.ones(C, dtype=torch.float64)
        ref = F.relu(F.batch_norm(x[i], rm, rv, pb["weight"][i], pb["bias"][i], True, 0.1, 1e-5))
        assert torch.allclose(yb[i], ref, atol=1e-10)
        assert torch.allclose(bufs["running_mean"][i], rm) and torch.allclose(bufs["running_var"][i], rv)
        ref = F.relu(F.group_norm(x[i], 8, pg["weight"][i], pg["bias"][i], 1e-5))
        assert torch.allclose(yg[i], ref, atol=1e-10)
    bn.eval()
    ye = _nodes(bn, pb, x, bufs)
    for i in range(K):
        ref = F.relu(F.batch_norm(x[i], bufs["running_mean"][i], bufs["running_var"][i], pb["weight"][i], pb["bias"][i],
                                  False))
        assert torch.allclose(ye[i], ref, atol=1e-10)


@pytest.mark.parametrize("chunk", [1, 2, 3])
@pytest.mark.parametrize("name", ["evonorm", "range_evonorm", "range_bn", "bn", "gn"])
@pytest.mark.parametrize("spec", [None, QuantSpec()])
def test_stacked_equals_per_node(name, spec, chunk):
    """StackedModel over 3 nodes (chunk 1: a loop, 2: vmap + a remainder, 3: one vmap call) ==
    each node's parameters in the plain layer alone: outputs, parameter and input gradients,
    the per-node buffers it updates, and eval outputs (float64, deterministic rounding)."""
    torch.manual_seed(0)
    k = 3
    layer = make_norm(name, C, spec).double()
    if spec is not None:
        set_stochastic(layer, False)
    template = copy.deepcopy(layer)
    sm = StackedModel(layer, nodes=k, chunk=chunk)
    params = torch.cat([v.reshape(k, -1) for v in _stack(layer, k=k).values()], 1).requires_grad_(True)
    x = _x(shape=(k, B, C, H, H)) * torch.tensor([1.0, 30.0, 0.05], dtype=torch.float64).view(k, 1, 1, 1, 1)
    x.requires_grad_(True)
    y = sm.forward(params, x)
    g = torch.randn_like(y)
    (y * g).sum().backward()
    pgrads = sm.layout.unflatten(params.grad)
    sm.module.eval()
    with torch.no_grad():
        ye = sm.forward(params, x)
    for i in range(k):
        one = copy.deepcopy(template)                                           # the plain layer, node i alone
        with torch.no_grad():
            for p_, v in zip(one.parameters(), sm.layout.unflatten(params[i].detach()).values()):
                p_.copy_(v)
        xi = x[i].detach().clone().requires_grad_(True)
        y1 = one(xi)
        (y1 * g[i]).sum().backward()
        assert torch.allclose(y1, y[i], atol=1e-10)
        assert torch.allclose(xi.grad, x.grad[i], atol=1e-10 * xi.grad.abs().max().item())
        for (n, p_), gi in zip(one.named_parameters(), pgrads.values()):
            assert torch.allclose(p_.grad, gi[i], atol=1e-10 * p_.grad.abs().max().item()), n
        if sm.buffers is not None:
            own = torch.cat([b.reshape(-1) for b in one.buffers() if b.is_floating_point()])
            assert torch.allclose(own, sm.buffers[i])
        one.eval()
        with torch.no_grad():
            assert torch.allclose(one(x[i].detach()), ye[i], atol=1e-10)


def test_unknown_norm():
    with pytest.raises(ConfigError, match=r"^model\.norm: unknown value 'layernorm'"):
        make_norm("layernorm", 8)
