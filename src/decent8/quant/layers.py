"""8-bit (fake-quantized) layers with gradient bifurcation (SPEC §5), as plain per-model modules.

Each layer sees one node's tensors (``[b, ...]``); the simulator runs them per node, for
a chunk of nodes under ``torch.func.vmap`` (the quantizers' batching rules keep one range
per node, see :mod:`.quantizer`), or with c nodes' samples merged into one batch
(node-batched execution, :mod:`decent8.node_axis`): one ``forward`` serves all three,
reading :func:`~decent8.node_axis.merged_nodes` to keep every range per node.

* :class:`ActQuant` — the activation quantizer: in training the range is the batch mean
  of per-sample min/max (stochastic rounding), and the running min/max buffers are
  updated as ``running ← m·running + (1 − m)·batch`` with ``m = 0.1`` (the weight on
  the old value); at evaluation the running range is used with deterministic rounding
  (``QuantSpec.eval_stochastic`` for the reference code's stochastic eval).
* :class:`QConv2d`, :class:`QLinear` — ``torch.nn`` conv / linear that quantize their
  input (ActQuant), weight and bias (the tensor's own min/max, deterministic) and
  *bifurcate* the backward pass: ``y = op(G(x̂), ŵ)`` where ``G`` is the identity
  forward and quantizes the gradient in backward. So the weight (and bias) gradient
  uses the unquantized output gradient with the 8-bit input, while the layer gradient
  passed to the previous layer is quantized to ``grad_bits`` (whole-tensor range,
  stochastic rounding).
* :class:`QAdd` — quantized residual add: both inputs quantized (each with its own
  ActQuant), and an 8-bit gradient quantizer on the sum.

Master weights stay float32: quantization makes new tensors in the forward pass and
the straight-through estimator hands the gradient to the float parameters. The
module transform that turns a float model into this form is :mod:`.transform`.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .. import node_axis
from .quantizer import QuantSpec, constant, mean, quantize_grad, quantize_ste, quantize_tensor, sample_mean_range


def update_running(buf: torch.Tensor, value: torch.Tensor, momentum: float) -> None:
    """``buf ← momentum·buf + (1 − momentum)·value`` in place (``momentum`` = weight of the old value)."""
    with torch.no_grad():
        value = value.detach()
        if value.dtype != buf.dtype:
            value = value.to(buf.dtype)
        buf.mul_(constant(momentum, buf)).add_(value.reshape(buf.shape), alpha=1.0 - momentum)


class ActQuant(nn.Module):
    """Activation quantizer with running min/max (scalar buffers, one pair per node)."""

    def __init__(self, spec: QuantSpec) -> None:
        super().__init__()
        self.spec = spec
        self.register_buffer("running_min", torch.zeros(()))
        self.register_buffer("running_max", torch.zeros(()))

    def quant_range(self, batch_range: Callable[[], tuple[torch.Tensor, torch.Tensor]]
                    ) -> tuple[torch.Tensor, torch.Tensor, bool]:
        """``(min, max, stochastic)`` to quantize with: in training the batch range
        (``batch_range()``; the running buffers are updated with it), at evaluation the
        running range."""
        s = self.spec
        if self.training:
            mn, mx = batch_range()
            update_running(self.running_min, mn, s.momentum)
            update_running(self.running_max, mx, s.momentum)
            return mn, mx, s.stochastic
        return self.running_min, self.running_max, s.eval_stochastic

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = node_axis.merged_nodes()
        if c == 1:
            mn, mx, stochastic = self.quant_range(lambda: sample_mean_range(x))
            return quantize_ste(x, mn, mx, self.spec.bits, stochastic)
        xs = node_axis.per_node(x, c)  # [b, c, features]: each node's range from its own samples

        def per_node_range() -> tuple[torch.Tensor, torch.Tensor]:
            # each node's mean over its b samples summed as the loop sums it: one contiguous
            # row per node (mean over dim 0 of [b, c] sums in another order, and a 1-ulp
            # different range flips stochastic rounding decisions)
            d = xs.detach()
            if x.dim() == 1:  # one value per sample: the range is the batch mean (as sample_mean_range)
                v = mean(d[:, :, 0].t().contiguous(), 1)
                return v, v
            return mean(d.amin(2).t().contiguous(), 1), mean(d.amax(2).t().contiguous(), 1)

        mn, mx, stochastic = self.quant_range(per_node_range)
        return quantize_ste(xs, mn.reshape(1, c, 1), mx.reshape(1, c, 1), self.spec.bits, stochastic,
                            node_dim=1).view_as(x)

    def extra_repr(self) -> str:
        return f"bits={self.spec.bits}"


def quantize_grad_nodes(x: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """Identity forward; in backward the gradient quantized to ``spec.grad_bits`` with each
    node's whole-tensor range (per node of a merged batch, :mod:`decent8.node_axis`)."""
    c = node_axis.merged_nodes()
    if c == 1:
        return quantize_grad(x, spec.grad_bits, spec.stochastic)
    return quantize_grad(node_axis.per_node(x, c), spec.grad_bits, spec.stochastic, node_dim=1).view_as(x)


def quantized_weights(m: nn.Module, spec: QuantSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``m``'s weight and bias on ``spec.bits`` with each tensor's own range (per node when
    they are stacked ``[c, ...]`` for a merged batch)."""
    node_dim = 0 if node_axis.merged_nodes() > 1 else None
    w = quantize_tensor(m.weight, spec.bits, node_dim=node_dim)
    bias = None if m.bias is None else quantize_tensor(m.bias, spec.bits, node_dim=node_dim)
    return w, bias


class QConv2d(nn.Conv2d):
    """8-bit convolution (input, weight and bias quantized; bifurcated backward).

    ``quantize_input=False`` when the caller hands it an already quantized input (a
    block that quantizes its input once for the conv and the residual add).
    """

    def __init__(self, *args, spec: QuantSpec | None = None, quantize_input: bool = True, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.spec = spec or QuantSpec()
        self.act_quant = ActQuant(self.spec) if quantize_input else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xq = self.act_quant(x) if self.act_quant is not None else x
        w, bias = quantized_weights(self, self.spec)
        return node_axis.conv2d(self, quantize_grad_nodes(xq, self.spec), w, bias, node_axis.merged_nodes())


class QLinear(nn.Linear):
    """8-bit linear layer (input, weight and bias quantized; bifurcated backward)."""

    def __init__(self, *args, spec: QuantSpec | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.spec = spec or QuantSpec()
        self.act_quant = ActQuant(self.spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xq = self.act_quant(x)
        w, bias = quantized_weights(self, self.spec)
        return node_axis.linear(quantize_grad_nodes(xq, self.spec), w, bias, node_axis.merged_nodes())


class Add(nn.Module):
    """Residual add ``a + b`` (full precision); a module so that the 8-bit transform can replace it."""

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
        return quantize_grad_nodes(a + b, self.spec)


def set_stochastic(module: nn.Module, stochastic: bool) -> None:
    """Switch stochastic rounding (training activations and gradients) on or off in every
    quantized layer of ``module`` (e.g. off for exact comparisons in tests)."""
    for m in module.modules():
        spec = getattr(m, "spec", None)
        if isinstance(spec, QuantSpec):
            m.spec = QuantSpec(spec.bits, spec.grad_bits, stochastic, spec.eval_stochastic, spec.momentum)


__all__ = ["ActQuant", "QConv2d", "QLinear", "Add", "QAdd", "set_stochastic", "update_running", "quantize_grad_nodes",
           "quantized_weights"]
