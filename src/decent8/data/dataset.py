"""In-memory train/test tensors shared by every dataset loader."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class ArrayDataset:
    """Train/test tensors and what a batch needs before it reaches a model.

    ``x`` is one of
      * float32 ``[N, C, H, W]`` or ``[N, F]``, ready to use (``mean is None``; digits);
      * uint8 ``[N, C, H, W]`` raw pixels (``mean``/``std`` set: the per-channel statistics
        of the train split on the [0, 1] scale). The batch transform of
        :mod:`decent8.data.augment` augments and normalizes whole batches on the device,
        and normalizes the test split once;
      * int64 ``[N, T]`` token ids (text; ``vocab`` set).

    ``y`` is int64 ``[N]``. ``augment`` names the data set's standard augmentation
    (``none``, ``crop_flip``, ``resized_crop_flip``).
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    class_names: list[str]
    name: str
    mean: Optional[tuple[float, ...]] = None
    std: Optional[tuple[float, ...]] = None
    augment: str = "none"
    vocab: Optional[list[str]] = None

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one sample, e.g. (1, 8, 8)."""
        return tuple(self.x_train.shape[1:])

    @property
    def is_pixels(self) -> bool:
        """True when ``x`` holds raw uint8 pixels that a batch transform normalizes."""
        return self.mean is not None
