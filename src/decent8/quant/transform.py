"""8-bit training as a module transform (SPEC §5), as the paper's code does it.

:func:`to_low_precision` walks any ``nn.Module`` and swaps, in place:

==========================  =============================================================
``nn.Conv2d``               :class:`~.layers.QConv2d` (8-bit input, weight, bias; bifurcated backward)
``nn.Linear``               :class:`~.layers.QLinear`
``Add`` (residual add)      :class:`~.layers.QAdd`
layers with ``set_spec``     the same layer with its 8-bit form switched on (decent8's norms)
==========================  =============================================================

The swapped layers keep the original ``Parameter`` objects, so the parameter names,
shapes and order (the flat ``[k, d]`` layout) do not change. What is not swapped
stays float32: ``torch.nn`` BatchNorm/LayerNorm/GroupNorm, embeddings, softmax,
pooling and residual adds written as ``a + b`` in ``forward`` (use
:class:`~.layers.Add` to make them quantizable). A module may define
``low_precision_(spec)`` to refine its own 8-bit form after its children were
swapped (the ResNet block quantizes its input once for both branches).
"""
from __future__ import annotations

from torch import nn

from .layers import Add, QAdd, QConv2d, QLinear
from .quantizer import QuantSpec


def _swap(child: nn.Module, spec: QuantSpec) -> nn.Module:
    if isinstance(child, nn.Conv2d) and not isinstance(child, QConv2d):
        if child.padding_mode != "zeros":
            return child  # keep it float: the 8-bit conv supports zero padding only
        q = QConv2d(child.in_channels, child.out_channels, child.kernel_size, stride=child.stride,
                    padding=child.padding, dilation=child.dilation, groups=child.groups, bias=child.bias is not None,
                    spec=spec, device="meta")
        q.weight, q.bias = child.weight, child.bias
        return q.train(child.training)
    if isinstance(child, nn.Linear) and not isinstance(child, QLinear):
        q = QLinear(child.in_features, child.out_features, bias=child.bias is not None, spec=spec, device="meta")
        q.weight, q.bias = child.weight, child.bias
        return q.train(child.training)
    if type(child) is Add:
        return QAdd(spec).train(child.training)
    return child


def to_low_precision(module: nn.Module, spec: QuantSpec) -> nn.Module:
    """Make ``module`` (any ``nn.Module``) train in 8 bits; modifies it in place and returns it."""
    for name, child in list(module.named_children()):
        to_low_precision(child, spec)
        new = _swap(child, spec)
        if new is not child:
            setattr(module, name, new)
    set_spec = getattr(module, "set_spec", None)  # decent8's norm layers (models/norms.py)
    if callable(set_spec):
        set_spec(spec)
    refine = getattr(module, "low_precision_", None)
    if callable(refine):
        refine(spec)
    return module


__all__ = ["to_low_precision"]
