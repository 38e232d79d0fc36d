"""Data sets by name (the embedded default is scikit-learn's digits)."""
from __future__ import annotations

from ..errors import choice_error
from .dataset import ArrayDataset
from .digits import load_digits_dataset

DATASETS = ("digits",)


def load_dataset(name: str, root: str | None = None, test_fraction: float = 0.2, seed: int = 0) -> ArrayDataset:
    if name == "digits":
        return load_digits_dataset(test_fraction=test_fraction, seed=seed)
    raise choice_error("data", name, DATASETS)
