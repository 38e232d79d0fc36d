"""ImageNet-style ResNet-18 for 224 px inputs (SPEC §7; 11.2 M parameters at 10 classes).

7×7/2 stem + norm-act + 3×3/2 max pool, four stages of two basic blocks at widths
``w, 2w, 4w, 8w`` (w = 64), global average pooling, linear classifier. Norm layers are
the activations; ``spec`` gives the 8-bit form (see :mod:`.resnet_cifar`).
"""
from __future__ import annotations

import torch
from torch import nn

from .. import nn as dnn
from ..nn.norms import make_norm
from ..quant.quantizer import QuantSpec
from .blocks import BasicBlock, conv, linear


class ResNetImageNet(nn.Module):
    def __init__(self, layers: tuple[int, ...] = (2, 2, 2, 2), num_classes: int = 10, in_channels: int = 3,
                 width: int = 64, norm: str = "evonorm", spec: QuantSpec | None = None) -> None:
        super().__init__()
        self.stem = conv(in_channels, width, 7, 2, 3, spec=spec)
        self.stem_norm = make_norm(norm, width, spec)
        self.maxpool = dnn.MaxPool2d(3, 2, 1)
        stages: list[nn.Module] = []
        cin = width
        for i, n in enumerate(layers):
            cout = width * 2**i
            blocks = []
            for j in range(n):
                blocks.append(BasicBlock(cin, cout, 2 if (i > 0 and j == 0) else 1, norm, spec))
                cin = cout
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.pool = dnn.GlobalAvgPool()
        self.fc = linear(cin, num_classes, spec=spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.stem_norm(self.stem(x)))
        return self.fc(self.pool(self.stages(x)))


__all__ = ["ResNetImageNet"]
