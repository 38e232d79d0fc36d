"""The embedded sklearn 8x8 digits dataset."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from decent8.data import ArrayDataset, load_digits_dataset
from decent8.errors import ConfigError


def test_digits_shapes_and_split():
    ds = load_digits_dataset(test_fraction=0.2, seed=0)
    assert isinstance(ds, ArrayDataset)
    assert ds.num_classes == 10 and len(ds.class_names) == 10 and ds.name == "digits"
    assert ds.x_train.shape[0] + ds.x_test.shape[0] == 1797
    assert ds.x_test.shape[0] == 360 and ds.x_train.shape[0] == 1437
    assert ds.input_shape == (1, 8, 8)
    assert ds.x_train.dtype == torch.float32 and ds.y_train.dtype == torch.int64
    assert ds.x_test.dtype == torch.float32 and ds.y_test.dtype == torch.int64
    # stratified: each class's test share is within one sample of 20 %
    full = torch.bincount(torch.cat([ds.y_train, ds.y_test]), minlength=10).numpy()
    test = torch.bincount(ds.y_test, minlength=10).numpy()
    assert np.all(np.abs(test - 0.2 * full) <= 1.0)
    # normalized with the train split's scalar mean/std
    assert abs(float(ds.x_train.mean())) < 1e-4
    assert abs(float(ds.x_train.std(unbiased=False)) - 1.0) < 1e-4


def test_digits_deterministic():
    a = load_digits_dataset(0.25, seed=3)
    b = load_digits_dataset(0.25, seed=3)
    c = load_digits_dataset(0.25, seed=4)
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)
    assert not torch.equal(a.y_train, c.y_train)


@pytest.mark.parametrize("frac", [0.0, 1.0, -0.2, 1.5])
def test_digits_bad_fraction(frac):
    with pytest.raises(ConfigError, match=r"^data\.test_fraction:"):
        load_digits_dataset(test_fraction=frac)
