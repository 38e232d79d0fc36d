"""In-memory train/test tensors shared by every dataset loader."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch

#: quantile bins that stand in for classes when the targets are real numbers (regression)
REGRESSION_BINS = 10



def take(x: Any, index: Any) -> Any:
    """``x[index]`` for a tensor or a dict of tensors (rows of every field)."""
    if isinstance(x, dict):
        return {k: v[index] for k, v in x.items()}
    return x[index]

@dataclass
class ArrayDataset:
    """Train/test tensors and what a batch needs before it reaches a model.

    ``x`` is one of
      * float32 ``[N, C, H, W]`` or ``[N, F]``, ready to use (``mean is None``; digits);
      * uint8 ``[N, C, H, W]`` raw pixels (``mean``/``std`` set: the per-channel statistics
        of the train split on the [0, 1] scale). The batch transform of
        :mod:`decent8.data.augment` augments and normalizes whole batches on the device,
        and normalizes the test split once;
      * int64 ``[N, T]`` token ids (text; ``vocab`` set);
      * a dict of such tensors (keyword inputs of a user's model, e.g. ``input_ids``,
        ``attention_mask``).

    ``y`` is int64 ``[N]`` (classes) or float ``[N]`` / ``[N, m]`` (regression targets;
    then ``num_classes`` is the number of outputs m and the skew partition and class
    tables use ``REGRESSION_BINS`` quantile bins of the first target). ``augment`` names the data set's standard augmentation
    (``none``, ``crop_flip``, ``resized_crop_flip``).
    """

    x_train: Any
    y_train: torch.Tensor
    x_test: Any
    y_test: torch.Tensor
    num_classes: int
    class_names: list[str]
    name: str
    mean: Optional[tuple[float, ...]] = None
    std: Optional[tuple[float, ...]] = None
    augment: str = "none"
    vocab: Optional[list[str]] = None
    users_train: Optional[np.ndarray] = None   # LEAF: the user of every training sample (partition=natural)

    @property
    def input_shape(self) -> Any:
        """Shape of one sample, e.g. (1, 8, 8) (a dict of shapes for dict inputs)."""
        if isinstance(self.x_train, dict):
            return {k: tuple(v.shape[1:]) for k, v in self.x_train.items()}
        return tuple(self.x_train.shape[1:])

    @property
    def is_regression(self) -> bool:
        return self.y_train.is_floating_point()

    @property
    def vocab_size(self) -> Optional[int]:
        """Token-id data: the vocabulary size (largest id + 1 without a vocabulary); None otherwise."""
        if self.vocab is not None:
            return len(self.vocab)
        x = self.x_train.get("input_ids") if isinstance(self.x_train, dict) else self.x_train
        if isinstance(x, torch.Tensor) and not x.is_floating_point() and x.dtype != torch.uint8 and x.numel():
            return int(max(x.max().item(), self.x_test["input_ids"].max().item() if isinstance(self.x_test, dict)
                           else self.x_test.max().item())) + 1
        return None

    def _bin_edges(self) -> np.ndarray:
        first = self.y_train.reshape(self.y_train.shape[0], -1)[:, 0].double().numpy()
        return np.quantile(first, np.linspace(0, 1, REGRESSION_BINS + 1)[1:-1])

    @property
    def partition_labels(self) -> np.ndarray:
        """Integer labels the skew partition and the class tables use (bins for regression)."""
        if not self.is_regression:
            return self.y_train.numpy()
        first = self.y_train.reshape(self.y_train.shape[0], -1)[:, 0].double().numpy()
        return np.searchsorted(self._bin_edges(), first, side="right").astype(np.int64)

    @property
    def partition_classes(self) -> int:
        return REGRESSION_BINS if self.is_regression else self.num_classes

    @property
    def partition_class_names(self) -> list[str]:
        return [f"bin{i}" for i in range(REGRESSION_BINS)] if self.is_regression else list(self.class_names)

    @property
    def is_pixels(self) -> bool:
        """True when ``x`` holds raw uint8 pixels that a batch transform normalizes."""
        return self.mean is not None
