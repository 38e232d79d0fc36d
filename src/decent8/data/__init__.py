"""Datasets and their partition across nodes (SPEC §2)."""
from __future__ import annotations

from .augment import AUGMENTS, BatchTransform, make_batch_transform
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
from .registry import DATASETS, dataset_from_config, load_dataset, stratified_subset

__all__ = [
    "AUGMENTS",
    "ArrayDataset",
    "BatchTransform",
    "DATASETS",
    "dataset_from_config",
    "load_dataset",
    "make_batch_transform",
    "stratified_subset",
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
