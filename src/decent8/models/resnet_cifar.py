"""CIFAR-style ResNets (He et al. 2016) with norm-activation layers (SPEC §7).

Three stages of ``n`` basic blocks at widths ``w, 2w, 4w`` (w = 16), a 3×3 stem,
global average pooling and a linear classifier. ``resnet20``: n = 3 (0.27 M
parameters); ``resnet54``: n = 8 (0.76 M, the paper's "ResNet-54"). Downsampling
shortcuts are conv1×1 + norm (as the reference code). The 8-bit form (the module
transform) quantizes every conv, norm, residual add and the classifier, first conv
and last linear included.
"""
from __future__ import annotations

import torch
from torch import nn

from .norms import make_norm
from .blocks import BasicBlock, GlobalAvgPool, conv

#: blocks per stage of the named CIFAR ResNets
DEPTHS = {"resnet20": 3, "resnet54": 8}


class ResNetCifar(nn.Module):
    def __init__(self, blocks_per_stage: int = 3, num_classes: int = 10, in_channels: int = 3, width: int = 16,
                 norm: str = "evonorm") -> None:
        super().__init__()
        self.stem = conv(in_channels, width, 3, 1, 1)
        self.stem_norm = make_norm(norm, width)
        stages: list[nn.Module] = []
        cin = width
        for i, cout in enumerate((width, 2 * width, 4 * width)):
            blocks = []
            for j in range(blocks_per_stage):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(BasicBlock(cin, cout, stride, norm))
                cin = cout
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.pool = GlobalAvgPool()
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem_norm(self.stem(x)))
        return self.fc(self.pool(x))


__all__ = ["DEPTHS", "ResNetCifar"]
