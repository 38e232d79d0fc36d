"""Building blocks shared by the ResNets and VGG (plain ``torch.nn``; 8-bit by the module transform)."""
from __future__ import annotations

import torch
from torch import nn

from .norms import make_norm
from ..quant.layers import ActQuant, Add, QAdd
from ..quant.quantizer import QuantSpec


class GlobalAvgPool(nn.Module):
    """``[b, C, H, W]`` → ``[b, C]``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(-2, -1))


def conv(cin: int, cout: int, kernel: int, stride: int = 1, padding: int = 0, bias: bool = False) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, bias=bias)


class BasicBlock(nn.Module):
    """conv3×3 → norm-act → conv3×3 → norm-act, plus the shortcut (identity, or
    conv1×1 → norm-act when the shape changes); no activation after the add (the
    norm layer is the activation, SPEC §5). The second norm's γ starts at 0.

    8-bit form (:meth:`low_precision_`, called by the module transform): the block
    input is quantized once (``in_quant``) and that 8-bit tensor is the input of conv1,
    of the shortcut conv and (identity shortcut) of the residual add — the same range
    each of them would measure, one dither draw. The norms feed only quantized convs /
    the quantized add, which already pass back 8-bit gradients, so their own gradient
    quantizers are off (idempotent there).
    """

    def __init__(self, cin: int, cout: int, stride: int, norm: str) -> None:
        super().__init__()
        self.in_quant: ActQuant | None = None
        self.conv1 = conv(cin, cout, 3, stride, 1)
        self.norm1 = make_norm(norm, cout, grad_quant=False)
        self.conv2 = conv(cout, cout, 3, 1, 1)
        self.norm2 = make_norm(norm, cout, zero_init=True, grad_quant=False)
        self.shortcut: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(conv(cin, cout, 1, stride, 0), make_norm(norm, cout, grad_quant=False))
        self.add: nn.Module = Add()

    def low_precision_(self, spec: QuantSpec) -> None:
        self.in_quant = ActQuant(spec)
        self.conv1.act_quant = None
        if self.shortcut is not None:
            self.shortcut[0].act_quant = None
        self.add = QAdd(spec, quantize_a=self.shortcut is not None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.in_quant is not None:
            x = self.in_quant(x)
        out = self.norm2(self.conv2(self.norm1(self.conv1(x))))
        res = x if self.shortcut is None else self.shortcut(x)
        return self.add(res, out)


__all__ = ["GlobalAvgPool", "conv", "BasicBlock"]
