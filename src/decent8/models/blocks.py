"""Building blocks shared by the ResNets and VGG: full-precision or 8-bit layers by ``spec``.

``spec=None`` gives the node-batched float layers of :mod:`decent8.nn`; a
:class:`~decent8.quant.QuantSpec` gives their 8-bit forms (:mod:`decent8.quant.layers`)
and quantized norm layers. Same parameter names and shapes either way, so an int8
model has exactly the parameter layout of its fp32 twin.
"""
from __future__ import annotations

import torch
from torch import nn

from .. import nn as dnn
from ..nn.norms import make_norm
from ..quant.layers import ActQuant, Add, QAdd, QConv2d, QLinear
from ..quant.quantizer import QuantSpec


def conv(cin: int, cout: int, kernel: int, stride: int = 1, padding: int = 0, bias: bool = False,
         spec: QuantSpec | None = None, quantize_input: bool = True) -> nn.Module:
    if spec is None:
        return dnn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, bias=bias)
    return QConv2d(cin, cout, kernel, stride=stride, padding=padding, bias=bias, spec=spec,
                   quantize_input=quantize_input)


def linear(fin: int, fout: int, bias: bool = True, spec: QuantSpec | None = None) -> nn.Module:
    if spec is None:
        return dnn.Linear(fin, fout, bias=bias)
    return QLinear(fin, fout, bias=bias, spec=spec)


def add(spec: QuantSpec | None = None) -> nn.Module:
    return Add() if spec is None else QAdd(spec)


class BasicBlock(nn.Module):
    """conv3×3 → norm-act → conv3×3 → norm-act, plus the shortcut (identity, or
    conv1×1 → norm-act when the shape changes); no activation after the add (the
    norm layer is the activation, SPEC §5). The second norm's γ starts at 0.

    8-bit form: the block input is quantized once (``in_quant``) and that 8-bit tensor
    is the input of conv1, of the shortcut conv and (identity shortcut) of the residual
    add — the same range each of them would measure, one dither draw. The norms feed
    only quantized convs / the quantized add, which already pass back 8-bit gradients,
    so their own gradient quantizers are off (idempotent there).
    """

    def __init__(self, cin: int, cout: int, stride: int, norm: str, spec: QuantSpec | None) -> None:
        super().__init__()
        q = spec is not None
        self.in_quant = ActQuant(spec) if q else None
        self.conv1 = conv(cin, cout, 3, stride, 1, spec=spec, quantize_input=not q)
        self.norm1 = make_norm(norm, cout, spec, grad_quant=False)
        self.conv2 = conv(cout, cout, 3, 1, 1, spec=spec)
        self.norm2 = make_norm(norm, cout, spec, zero_init=True, grad_quant=False)
        self.shortcut: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(conv(cin, cout, 1, stride, 0, spec=spec, quantize_input=not q),
                                          make_norm(norm, cout, spec, grad_quant=False))
        self.add = QAdd(spec, quantize_a=self.shortcut is not None) if q else Add()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.in_quant is not None:
            x = self.in_quant(x)
        out = self.norm2(self.conv2(self.norm1(self.conv1(x))))
        res = x if self.shortcut is None else self.shortcut(x)
        return self.add(res, out)


__all__ = ["conv", "linear", "add", "BasicBlock"]
