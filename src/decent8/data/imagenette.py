"""Imagenette (fastai): a 10-class subset of ImageNet, 9,469 train and 3,925 val images.

``data.root`` is a folder or a tarball with ``train/<wnid>/*.JPEG`` and
``val/<wnid>/*.JPEG`` (``test/`` also accepted for the second split); greyscale images
are converted to RGB. Images are resized to ``data.image_size`` pixels a side (default
224; e.g. 64 for CPU-scale runs): train images whole, val images after a center crop of
87.5 % (the reference code's Resize(256) + CenterCrop(224)). Training batches get a
random resized crop + horizontal flip (:mod:`.augment`); both splits are normalized
with the train split's per-channel mean/std.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ConfigError
from .cache import cached
from .dataset import ArrayDataset
from .image_folder import (
    check_classes,
    find_split_layout,
    folder_split,
    has_ext,
    image_arrays,
    layout_error,
    require_root,
    scan,
    to_dataset,
)

NAME = "Imagenette"
EXPECTED = "train/<wnid>/*.JPEG + val/<wnid>/*.JPEG"
DEFAULT_SIZE = 224
EVAL_CROP = 0.875
WNIDS = {
    "n01440764": "tench", "n02102040": "English springer", "n02979186": "cassette player",
    "n03000684": "chain saw", "n03028079": "church", "n03394916": "French horn",
    "n03417042": "garbage truck", "n03425413": "gas pump", "n03445777": "golf ball", "n03888257": "parachute",
}


def _decode(root: Path, size: int) -> dict[str, np.ndarray]:
    files = scan(root, has_ext)
    names = files.names()
    layout = find_split_layout(names, ("train", "val")) or find_split_layout(names, ("train", "test"))
    if layout is None:
        raise layout_error(root, NAME, EXPECTED, files)
    _, tree = layout
    test_split = "val" if "val" in tree else "test"
    folders = check_classes(root, NAME, tree["train"], tree[test_split], test_split)
    x_train, y_train = folder_split(files, tree["train"], folders, "RGB", size)
    x_test, y_test = folder_split(files, tree[test_split], folders, "RGB", size, center_crop=EVAL_CROP)
    return image_arrays(x_train, y_train, x_test, y_test, [WNIDS.get(f, f) for f in folders])


def load_imagenette(root: str | None, cache_dir: str | None = None, image_size: int | None = None) -> ArrayDataset:
    """Imagenette from ``root`` at ``image_size`` px (default 224); uint8 pixels + train mean/std."""
    path = require_root(root, NAME, EXPECTED)
    size = int(image_size or DEFAULT_SIZE)
    if size < 8:
        raise ConfigError("data.image_size", f"must be >= 8 pixels, got {size}")
    arrays = cached("imagenette", path, {"image_size": size, "eval_crop": EVAL_CROP}, cache_dir,
                    lambda: _decode(path, size))
    return to_dataset(arrays, "imagenette", augment="resized_crop_flip")
