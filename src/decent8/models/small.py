"""Small models for the embedded default data (scikit-learn digits, 8×8 grey images).

Built from node-batched layers (:mod:`decent8.nn`): inputs are ``[k, b, C, H, W]``.
"""
from __future__ import annotations

import torch
from torch import nn

from .. import nn as dnn


class DigitsCNN(nn.Module):
    """conv3×3(c) → ReLU → conv3×3(2c) → ReLU → maxpool2 → linear. ≈ 10 k parameters at c = 16."""

    def __init__(self, in_channels: int = 1, num_classes: int = 10, width: int = 16, image_size: int = 8) -> None:
        super().__init__()
        self.conv1 = dnn.Conv2d(in_channels, width, 3, padding=1)
        self.conv2 = dnn.Conv2d(width, 2 * width, 3, padding=1)
        self.pool = dnn.MaxPool2d(2)
        self.flatten = dnn.Flatten()
        self.fc = dnn.Linear(2 * width * (image_size // 2) ** 2, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv1(x))
        x = self.pool(torch.relu(self.conv2(x)))
        return self.fc(self.flatten(x))


class MLP(nn.Module):
    """Flatten → [linear → ReLU] × depth → linear."""

    def __init__(self, in_features: int, num_classes: int = 10, width: int = 128, depth: int = 2) -> None:
        super().__init__()
        layers: list[nn.Module] = [dnn.Flatten()]
        f = in_features
        for _ in range(depth):
            layers += [dnn.Linear(f, width), nn.ReLU()]
            f = width
        layers.append(dnn.Linear(f, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
