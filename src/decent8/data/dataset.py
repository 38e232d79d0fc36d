"""In-memory train/test tensors shared by every dataset loader."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class ArrayDataset:
    """Train/test tensors: ``x`` float32 [N, C, H, W] (images) or [N, F]; ``y`` int64 [N]."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    class_names: list[str]
    name: str

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one sample, e.g. (1, 8, 8)."""
        return tuple(self.x_train.shape[1:])
