"""scikit-learn's bundled 8x8 digits (1797 samples, 10 classes): a tiny offline dataset."""
from __future__ import annotations

import numpy as np
import torch

from ..errors import ConfigError
from .dataset import ArrayDataset


def load_digits_dataset(test_fraction: float = 0.2, seed: int = 0) -> ArrayDataset:
    """Load sklearn ``load_digits`` as images [N, 1, 8, 8].

    Pixels (0..16) are scaled to [0, 1], then standardized x' = (x − μ)/σ with the
    scalar mean μ and std σ of the train split. The train/test split is stratified by
    class and deterministic from ``seed``; the test split holds ceil(test_fraction·N)
    samples (sklearn's ``train_test_split`` rule).
    """
    f = float(test_fraction)
    if not 0.0 < f < 1.0:
        raise ConfigError("data.test_fraction", f"must be in (0, 1), got {test_fraction}")
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    x = (bunch.data.astype(np.float64) / 16.0).reshape(-1, 1, 8, 8)
    y = bunch.target.astype(np.int64)
    num_classes = int(y.max()) + 1
    if round(f * y.size) < num_classes or round((1 - f) * y.size) < num_classes:
        raise ConfigError("data.test_fraction",
                          f"must leave at least {num_classes} samples in each split, got {test_fraction}")
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=f, random_state=seed, stratify=y, shuffle=True)
    mean = float(x_tr.mean())
    std = float(x_tr.std())
    x_tr = (x_tr - mean) / std
    x_te = (x_te - mean) / std
    return ArrayDataset(
        x_train=torch.from_numpy(np.ascontiguousarray(x_tr, dtype=np.float32)),
        y_train=torch.from_numpy(np.ascontiguousarray(y_tr, dtype=np.int64)),
        x_test=torch.from_numpy(np.ascontiguousarray(x_te, dtype=np.float32)),
        y_test=torch.from_numpy(np.ascontiguousarray(y_te, dtype=np.int64)),
        num_classes=num_classes,
        class_names=[str(c) for c in range(num_classes)],
        name="digits",
    )
