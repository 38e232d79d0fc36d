"""VGG-11 (configuration A) with norm-activation layers (SPEC §7; 9.49 M parameters).

Eight 3×3 convs ``w, M, 2w, M, 4w, 4w, M, 8w, 8w, M, 8w, 8w, M`` (w = 64; M = 2×2 max
pool, skipped once the feature map is 1×1, so small inputs work), each followed by a
norm-act layer; global average pooling (a no-op at 32 px, 7×7 → 1 at 224 px); then
the paper's classifier: linear 8w → 512 → ReLU → dropout 0.5 → linear 512 → classes.
The 8-bit form (module transform) quantizes every conv and linear.
"""
from __future__ import annotations

import torch
from torch import nn

from .norms import make_norm
from .blocks import GlobalAvgPool, conv

CONFIG_A = (1, "M", 2, "M", 4, 4, "M", 8, 8, "M", 8, 8, "M")


class VGG11(nn.Module):
    def __init__(self, num_classes: int = 10, in_channels: int = 3, image_size: int = 32, width: int = 64,
                 hidden: int | None = None, dropout: float = 0.5, norm: str = "evonorm") -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin, size = in_channels, image_size
        for i, item in enumerate(CONFIG_A):
            if item == "M":
                if size >= 2:
                    layers.append(nn.MaxPool2d(2))
                    size //= 2
                continue
            cout = width * int(item)
            # a norm feeding a quantized conv directly needs no gradient quantizer of its own
            feeds_conv = i + 1 < len(CONFIG_A) and CONFIG_A[i + 1] != "M"
            layers += [conv(cin, cout, 3, 1, 1), make_norm(norm, cout, grad_quant=not feeds_conv)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.pool = GlobalAvgPool()
        hidden = hidden or 8 * width
        self.fc1 = nn.Linear(cin, hidden)
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.features(x))
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


__all__ = ["CONFIG_A", "VGG11"]
