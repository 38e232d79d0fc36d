"""Node-batched layers: a chunk of c nodes through one grouped convolution / batched
matmul per layer (``sim.chunk=layers:N``; ARCHITECTURE "Models", docs/execution.md).

An execution strategy, not a second copy of any model: the user's own module runs its
own ``forward`` on the chunk's samples merged sample-major into one batch
``[b·c, ...]`` (row ``s·c + i`` is node i's sample s), with the chunk's
stacked parameters ``[c, ...]`` substituted by ``functional_call``. Per-sample layers
(activations, pooling, flatten, dropout) need nothing; the few layers that hold
parameters or per-node statistics get a node-aware ``forward`` for the duration of the
call (:func:`node_batched`):

=====================  ==================================================================
``nn.Conv2d``          ``x[b·c, C, H, W]`` is ``[b, c·C, H, W]`` in memory: one ``conv2d``
                       with ``groups·c`` on the weights ``[c·O, C/g, kh, kw]``, whose output
                       ``[b, c·O, H', W']`` is ``[b·c, O, H', W']`` again (no copies)
``nn.Linear``          ``x[c, b·…, F] · W[c]ᵀ + bias[c]`` (one ``baddbmm``)
8-bit forms (SPEC §5)  the same, with the ranges of :mod:`decent8.quant` taken per node:
                       ``ActQuant`` (batch mean of per-sample min/max, running buffers
                       ``[c]``), weights and biases (each node's own min/max), and the
                       8-bit gradient of the bifurcated backward (each node's whole gradient)
``QAdd``               both inputs through their node-aware ``ActQuant``, 8-bit gradient per node
=====================  ==================================================================

:func:`unsupported` says why a module cannot run this way (a layer with parameters or
buffers of another kind, e.g. BatchNorm or decent8's norm layers; an unknown
parameter-free leaf that might mix samples). The simulator also compares the output of
this path with the per-node loop before it uses it, which catches a ``forward`` that
mixes samples between nodes (``x.mean(0)``, …).
"""
from __future__ import annotations

import contextlib
import functools
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from ..nn import norms
from ..quant.layers import ActQuant, Add, QAdd, QConv2d, QLinear
from ..quant.quantizer import quantize_grad, quantize_ste, quantize_tensor


def _per_node_grad(x: torch.Tensor, c: int, bits: int, stochastic: bool) -> torch.Tensor:
    """Identity forward; the backward gradient quantized with each node's whole range."""
    return quantize_grad(x.reshape(-1, c, x[0].numel()), bits, stochastic, node_dim=1).view_as(x)


def _act_quant(m: ActQuant, c: int, x: torch.Tensor) -> torch.Tensor:
    xs = x.reshape(-1, c, x[0].numel())  # [b, c, features]

    def per_node_range() -> tuple[torch.Tensor, torch.Tensor]:
        d = xs.detach()
        if x.dim() == 1:  # one value per sample: the range is the batch mean (as sample_mean_range)
            return d.mean(dim=(0, 2)), d.mean(dim=(0, 2))
        return d.amin(2).mean(0), d.amax(2).mean(0)

    mn, mx, stochastic = m.quant_range(per_node_range)
    return quantize_ste(xs, mn.reshape(1, c, 1), mx.reshape(1, c, 1), m.spec.bits, stochastic).view_as(x)


def _quantized_params(m: nn.Module, x: torch.Tensor, c: int) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Weight, bias and input of a layer: as they are, or (8-bit) quantized per node."""
    w, bias = m.weight, m.bias
    spec = getattr(m, "spec", None)
    if spec is None:
        return w, bias, x
    if getattr(m, "act_quant", None) is not None:
        x = m.act_quant(x)
    w = quantize_tensor(w, spec.bits, node_dim=0)
    bias = None if bias is None else quantize_tensor(bias, spec.bits, node_dim=0)
    return w, bias, _per_node_grad(x, c, spec.grad_bits, spec.stochastic)


def _conv2d(m: nn.Conv2d, c: int, x: torch.Tensor) -> torch.Tensor:
    w, bias, x = _quantized_params(m, x, c)
    h = x.reshape(x.shape[0] // c, c * x.shape[1], *x.shape[2:])
    out = F.conv2d(h, w.reshape(-1, *w.shape[2:]), None if bias is None else bias.reshape(-1),
                   m.stride, m.padding, m.dilation, m.groups * c)
    return out.view(x.shape[0], -1, *out.shape[2:])


def _linear(m: nn.Linear, c: int, x: torch.Tensor) -> torch.Tensor:
    w, bias, x = _quantized_params(m, x, c)
    b = x.shape[0] // c
    x3 = x.reshape(b, c, -1, x.shape[-1]).transpose(0, 1).reshape(c, -1, x.shape[-1])  # [c, b·…, F]
    wt = w.transpose(1, 2)
    out = torch.bmm(x3, wt) if bias is None else torch.baddbmm(bias.unsqueeze(1), x3, wt)
    return out.view(c, b, -1, w.shape[1]).transpose(0, 1).reshape(*x.shape[:-1], w.shape[1])


def _qadd(m: QAdd, c: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if m.quant_a is not None:
        a = m.quant_a(a)
    if m.quant_b is not None:
        b = m.quant_b(b)
    return _per_node_grad(a + b, c, m.spec.grad_bits, m.spec.stochastic)


#: layer type (exact) → its node-aware forward ``f(module, c, *inputs)``
NODE_AWARE: dict[type, Callable[..., torch.Tensor]] = {
    nn.Conv2d: _conv2d, QConv2d: _conv2d, nn.Linear: _linear, QLinear: _linear, ActQuant: _act_quant, QAdd: _qadd,
}

#: parameter-free layers that act on each sample alone (exact types)
PER_SAMPLE: tuple[type, ...] = (
    nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.GELU, nn.SiLU, nn.ELU, nn.Tanh, nn.Sigmoid, nn.Softplus, nn.Identity,
    nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.Flatten,
    norms.ReLU, Add,
)


def unsupported(module: nn.Module) -> str:
    """Why ``module`` cannot run on node-batched layers ("" when it can)."""
    for name, m in module.named_modules():
        kind = type(m)
        where = f"{name or 'the model'} ({kind.__name__})"
        if kind in NODE_AWARE:
            if isinstance(m, nn.Conv2d) and m.padding_mode != "zeros":
                return f"{where}: padding_mode {m.padding_mode!r}"
            continue
        if kind in PER_SAMPLE:
            if isinstance(m, nn.Flatten) and m.start_dim == 0:
                return f"{where}: flattens the batch axis"
            continue
        if any(True for _ in m.parameters(recurse=False)) or any(True for _ in m.buffers(recurse=False)):
            return f"{where} has parameters or buffers of a layer without a node-batched form"
        if not any(True for _ in m.children()):
            return f"{where} is not a known per-sample layer"
    return ""


def node_aware_layers(module: nn.Module) -> list[tuple[nn.Module, Callable[..., torch.Tensor]]]:
    """The layers of ``module`` that need a node-aware ``forward``, with that forward
    (found once per model; :func:`node_batched` takes the list)."""
    return [(m, NODE_AWARE[type(m)]) for m in module.modules() if type(m) in NODE_AWARE]


@contextlib.contextmanager
def node_batched(layers: list[tuple[nn.Module, Callable[..., torch.Tensor]]], c: int) -> Iterator[None]:
    """Within the block, the model whose :func:`node_aware_layers` are ``layers`` takes c
    nodes' samples merged sample-major ``[b·c, ...]`` with stacked parameters ``[c, ...]``
    (substituted by ``functional_call``)."""
    try:
        for m, fn in layers:
            m.__dict__["forward"] = functools.partial(fn, m, c)  # shadows the class's forward
        yield
    finally:
        for m, _ in layers:
            m.__dict__.pop("forward", None)


__all__ = ["NODE_AWARE", "PER_SAMPLE", "unsupported", "node_aware_layers", "node_batched"]
