"""ImageNet-style ResNet-18 for 224 px inputs (SPEC §7; 11.2 M parameters at 10 classes).

7×7/2 stem + norm-act + 3×3/2 max pool, four stages of two basic blocks at widths
``w, 2w, 4w, 8w`` (w = 64), global average pooling, linear classifier. Norm layers are
the activations; the 8-bit form comes from the module transform (see :mod:`.resnet_cifar`).
"""
from __future__ import annotations

import torch
from torch import nn

from .norms import make_norm
from .blocks import BasicBlock, GlobalAvgPool, conv


class ResNetImageNet(nn.Module):
    def __init__(self, layers: tuple[int, ...] = (2, 2, 2, 2), num_classes: int = 10, in_channels: int = 3,
                 width: int = 64, norm: str = "evonorm") -> None:
        super().__init__()
        self.stem = conv(in_channels, width, 7, 2, 3)
        self.stem_norm = make_norm(norm, width)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages: list[nn.Module] = []
        cin = width
        for i, n in enumerate(layers):
            cout = width * 2**i
            blocks = []
            for j in range(n):
                blocks.append(BasicBlock(cin, cout, 2 if (i > 0 and j == 0) else 1, norm))
                cin = cout
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.pool = GlobalAvgPool()
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.stem_norm(self.stem(x)))
        return self.fc(self.pool(self.stages(x)))


__all__ = ["ResNetImageNet"]
