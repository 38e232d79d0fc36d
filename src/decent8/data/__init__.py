"""Datasets and their partition across nodes (SPEC §2)."""
from __future__ import annotations

from .class_table import format_class_table, plot_class_heatmap
from .dataset import ArrayDataset
from .digits import load_digits_dataset
from .partition import (
    PARTITIONS,
    class_counts,
    dirichlet_partition,
    make_partition,
    shard_partition,
    skew_partition,
)

__all__ = [
    "ArrayDataset",
    "PARTITIONS",
    "class_counts",
    "dirichlet_partition",
    "format_class_table",
    "load_digits_dataset",
    "make_partition",
    "plot_class_heatmap",
    "shard_partition",
    "skew_partition",
]
