"""A small CNN with BatchNorm for 8×8 digits: the user model of docs/results/batchnorm_stats.md.

    decent8 train model=examples.bn_cnn:make_net nodes=16 partition=dirichlet partition.alpha=0.3 \
        model.norm_stats=gossip

(``model=pkg.module:factory`` imports from the current folder, so run it from the
repository root.) Two 3×3 convolutions of 16 and 32 channels, each followed by
``nn.BatchNorm2d`` and ReLU, 2×2 max-pooling after the second, then a linear classifier.
"""
from __future__ import annotations

import math

from torch import nn


def make_net(input_shape=(1, 8, 8), num_classes: int = 10) -> nn.Module:
    c, h, w = input_shape
    return nn.Sequential(
        nn.Conv2d(c, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(32 * math.prod((h // 2, w // 2)), num_classes),
    )
