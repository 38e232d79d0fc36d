"""Small models for the embedded default data (scikit-learn digits, 8×8 grey images).

Plain ``torch.nn`` modules (inputs ``[b, C, H, W]``); ``precision=int8`` applies the
8-bit module transform (:func:`decent8.quant.to_low_precision`).
"""
from __future__ import annotations

import torch
from torch import nn

from .norms import make_norm


class DigitsCNN(nn.Module):
    """conv3×3(c) → norm-act → conv3×3(2c) → norm-act → maxpool2 → linear. ≈ 10 k parameters at c = 16.

    ``norm="none"`` (default) makes the norm-act layers plain ReLUs.
    """

    def __init__(self, in_channels: int = 1, num_classes: int = 10, width: int = 16, image_size: int = 8,
                 norm: str = "none") -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(2 * width * (image_size // 2) ** 2, num_classes)
        self.act1 = make_norm(norm, width, grad_quant=False)  # feeds conv2 (8-bit: already an 8-bit gradient)
        self.act2 = make_norm(norm, 2 * width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act1(self.conv1(x))
        x = self.pool(self.act2(self.conv2(x)))
        return self.fc(self.flatten(x))


class MLP(nn.Module):
    """Flatten → [linear → ReLU] × depth → linear."""

    def __init__(self, in_features: int, num_classes: int = 10, width: int = 128, depth: int = 2) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        f = in_features
        for _ in range(depth):
            layers += [nn.Linear(f, width), nn.ReLU()]
            f = width
        layers.append(nn.Linear(f, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class TextClassifier(nn.Module):
    """Bag of embeddings for token ids ``[b, T]`` (0 = padding): the mean of the
    non-padding tokens' embeddings → linear → ReLU → linear (fastText-style). The
    default model for text data sets (``agnews``); ``width`` is the embedding size."""

    def __init__(self, vocab_size: int, num_classes: int, width: int = 64, hidden: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, width, padding_idx=0)
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = (ids != 0).unsqueeze(-1).to(self.embed.weight.dtype)
        pooled = (self.embed(ids) * mask).sum(1) / mask.sum(1).clamp_min(1.0)
        return self.fc2(torch.relu(self.fc1(pooled)))


__all__ = ["DigitsCNN", "MLP", "TextClassifier"]
