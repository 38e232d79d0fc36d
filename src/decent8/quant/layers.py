"""Node-batched 8-bit (fake-quantized) layers with gradient bifurcation (SPEC §5).

Activations carry the node axis ``[k, b, ...]``; parameters are per-model or stacked
``[k, *shape]`` exactly as in :mod:`decent8.nn.layers`, and every range is per node.

* :class:`ActQuant` — the activation quantizer: in training the range is the batch mean
  of per-sample min/max (stochastic rounding), and the running min/max buffers are
  updated as ``running ← m·running + (1 − m)·batch`` with ``m = 0.1`` (the weight on
  the old value); at evaluation the running range is used with deterministic rounding
  (``QuantSpec.eval_stochastic`` for the reference code's stochastic eval).
* :class:`QConv2d`, :class:`QLinear` — quantize their input (ActQuant), weight and
  bias (per-tensor, per-node min/max, deterministic), then compute with a custom
  autograd function that *bifurcates* the backward pass: the weight (and bias)
  gradient uses the unquantized output gradient with the 8-bit input, while the layer
  gradient passed to the previous layer is quantized to ``grad_bits`` (whole-tensor
  range per node, stochastic rounding).
* :class:`QAdd` — quantized residual add: both inputs quantized (each with its own
  ActQuant), and an 8-bit gradient quantizer on the sum.

Master weights stay float32: quantization makes new tensors in the forward pass and
the straight-through estimator hands the gradient to the float parameters.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..nn.layers import Conv2d, Linear, _stacked
from .quantizer import (
    QuantSpec,
    _bcast,
    quantize_grad,
    quantize_per_node,
    quantize_ste,
    quantize_tensor,
    sample_mean_range,
)


def _node_buffer(buf: torch.Tensor, k: int) -> torch.Tensor:
    """A scalar-per-model buffer as ``[k]`` (stacked buffers already are)."""
    return buf if buf.dim() == 1 else buf.reshape(1).expand(k)


def update_running(buf: torch.Tensor, value: torch.Tensor, momentum: float) -> None:
    """``buf ← momentum·buf + (1 − momentum)·value`` in place, for a stacked ``[k, ...]``
    buffer or a per-model one (then the node mean of ``value`` is used)."""
    with torch.no_grad():
        v = value.detach().to(buf.dtype)
        if v.dim() > buf.dim():  # per-model buffer, node-batched value
            v = v.mean(0)
        buf.mul_(momentum).add_(v.reshape(buf.shape), alpha=1.0 - momentum)


class ActQuant(nn.Module):
    """Activation quantizer with per-node running min/max (buffers of per-model shape ``()``)."""

    def __init__(self, spec: QuantSpec) -> None:
        super().__init__()
        self.spec = spec
        self.register_buffer("running_min", torch.zeros(()))
        self.register_buffer("running_max", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = x.shape[0]
        s = self.spec
        if self.training:
            mn, mx = sample_mean_range(x)
            update_running(self.running_min, mn, s.momentum)
            update_running(self.running_max, mx, s.momentum)
            stochastic = s.stochastic
        else:
            mn, mx = _node_buffer(self.running_min, k), _node_buffer(self.running_max, k)
            stochastic = s.eval_stochastic
        return quantize_ste(x, _bcast(mn, x), _bcast(mx, x), s.bits, stochastic)

    def extra_repr(self) -> str:
        return f"bits={self.spec.bits}"


def _quantize_grad_input(g: torch.Tensor, spec: QuantSpec, node_dim: int) -> torch.Tensor:
    return quantize_per_node(g, spec.grad_bits, spec.stochastic, node_dim)


class _BifurcatedConv(torch.autograd.Function):
    """Grouped (one group per node) conv with a bifurcated backward.

    Works on the grouped layout: input ``[b, k·C, H, W]``, weight ``[k·O, C/g, kh, kw]``.
    """

    @staticmethod
    def forward(ctx, h, w, bias, stride, padding, dilation, groups, k, spec):  # type: ignore[override]
        ctx.save_for_backward(h, w)
        ctx.conf = (stride, padding, dilation, groups, k, spec, None if bias is None else bias.shape)
        return F.conv2d(h, w, bias, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, g):  # type: ignore[override]
        h, w = ctx.saved_tensors
        stride, padding, dilation, groups, k, spec, bias_shape = ctx.conf
        need_in, need_w, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1], bias_shape is not None and ctx.needs_input_grad[2]
        g_in, g_w, g_b = torch.ops.aten.convolution_backward(
            g.contiguous(), h, w, list(bias_shape) if bias_shape is not None else None,
            list(stride), list(padding), list(dilation), False, [0, 0], groups, [need_in, need_w, need_b],
        )
        if need_in:
            b = g_in.shape[0]
            g_in = _quantize_grad_input(g_in.view(b, k, -1), spec, 1).view_as(g_in)
        return g_in, g_w, g_b if need_b else None, None, None, None, None, None, None


class _BifurcatedLinear(torch.autograd.Function):
    """``y[k, N, O] = x[k, N, I]·W[k]ᵀ + b[k]`` with a bifurcated backward."""

    @staticmethod
    def forward(ctx, x3, w, bias, spec):  # type: ignore[override]
        ctx.save_for_backward(x3, w)
        ctx.spec, ctx.has_bias = spec, bias is not None
        if bias is not None:
            return torch.baddbmm(bias.unsqueeze(1), x3, w.transpose(1, 2))
        return torch.bmm(x3, w.transpose(1, 2))

    @staticmethod
    def backward(ctx, g):  # type: ignore[override]
        x3, w = ctx.saved_tensors
        g_in = g_w = g_b = None
        if ctx.needs_input_grad[0]:
            g_in = _quantize_grad_input(torch.bmm(g, w), ctx.spec, 0)
        if ctx.needs_input_grad[1]:
            g_w = torch.bmm(g.transpose(1, 2), x3)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            g_b = g.sum(1)
        return g_in, g_w, g_b, None


class QConv2d(Conv2d):
    """Node-batched 8-bit convolution (input, weight and bias quantized; bifurcated backward).

    ``quantize_input=False`` when the caller hands it an already quantized input (a
    block that quantizes its input once for the conv and the residual add).
    """

    def __init__(self, *args, spec: QuantSpec | None = None, quantize_input: bool = True, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.spec = spec or QuantSpec()
        self.act_quant = ActQuant(self.spec) if quantize_input else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, b = x.shape[:2]
        s = self.spec
        xq = self.act_quant(x) if self.act_quant is not None else x
        w = quantize_tensor(_stacked(self.weight, 4, k), s.bits)
        bias = None if self.bias is None else quantize_tensor(_stacked(self.bias, 1, k), s.bits).reshape(-1)
        h = xq.transpose(0, 1).reshape(b, k * x.shape[2], *x.shape[3:])
        out = _BifurcatedConv.apply(
            h, w.reshape(-1, *w.shape[2:]), bias, self.stride, self.padding, self.dilation, self.groups * k, k, s
        )
        return out.view(b, k, -1, *out.shape[2:]).transpose(0, 1)


class QLinear(Linear):
    """Node-batched 8-bit linear layer (input, weight and bias quantized; bifurcated backward)."""

    def __init__(self, *args, spec: QuantSpec | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.spec = spec or QuantSpec()
        self.act_quant = ActQuant(self.spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = x.shape[0]
        s = self.spec
        xq = self.act_quant(x)
        w = quantize_tensor(_stacked(self.weight, 2, k), s.bits)
        bias = None if self.bias is None else quantize_tensor(_stacked(self.bias, 1, k), s.bits)
        lead = x.shape[1:-1]
        out = _BifurcatedLinear.apply(xq.reshape(k, -1, x.shape[-1]), w, bias, s)
        return out.reshape(k, *lead, w.shape[1])


class Add(nn.Module):
    """Residual add ``a + b`` (full precision)."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


class QAdd(nn.Module):
    """Quantized residual add: ``Q(a) + Q(b)`` with its own activation quantizers and an
    8-bit gradient quantizer on the sum. ``quantize_a=False`` when ``a`` arrives quantized."""

    def __init__(self, spec: QuantSpec | None = None, quantize_a: bool = True, quantize_b: bool = True) -> None:
        super().__init__()
        self.spec = spec or QuantSpec()
        self.quant_a = ActQuant(self.spec) if quantize_a else None
        self.quant_b = ActQuant(self.spec) if quantize_b else None

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if self.quant_a is not None:
            a = self.quant_a(a)
        if self.quant_b is not None:
            b = self.quant_b(b)
        out = a + b
        return quantize_grad(out, self.spec.grad_bits, self.spec.stochastic)


def set_stochastic(module: nn.Module, stochastic: bool) -> None:
    """Switch stochastic rounding (training activations and gradients) on or off in every
    quantized layer of ``module`` (e.g. off for exact comparisons in tests)."""
    for m in module.modules():
        spec = getattr(m, "spec", None)
        if isinstance(spec, QuantSpec):
            m.spec = QuantSpec(spec.bits, spec.grad_bits, stochastic, spec.eval_stochastic, spec.momentum)


__all__ = ["ActQuant", "QConv2d", "QLinear", "Add", "QAdd", "set_stochastic", "update_running"]
