"""MNIST (LeCun et al.): 60,000 train and 10,000 test 28x28 greyscale digits.

``data.root`` is a folder or a tarball holding either layout:

* the idx files, gzipped or not: ``train-images-idx3-ubyte[.gz]``,
  ``train-labels-idx1-ubyte[.gz]``, ``t10k-images-idx3-ubyte[.gz]``,
  ``t10k-labels-idx1-ubyte[.gz]`` (``train-images.idx3-ubyte`` spellings too);
* PNG image folders ``train/<digit>/*.png`` and ``test/<digit>/*.png``, with an optional
  CSV index ``train.csv`` / ``test.csv`` (columns ``filepath,label``, paths relative to
  the folder holding the CSV) that then gives the file list and the labels — e.g. the
  ``mnist-pngs`` copy in ``shared/data/mnist``.

Decoded once into uint8 ``[N, 1, 28, 28]`` and cached; normalized with the train
split's mean/std per batch (no augmentation: MNIST's usual recipe has none).
"""
from __future__ import annotations

import csv
import gzip
import io
import re
import struct
import zlib
from pathlib import Path

import numpy as np

from ..errors import ConfigError, first_line
from .cache import cached
from .dataset import ArrayDataset
from .image_folder import (
    MAX_FILE_BYTES,
    Files,
    check_classes,
    check_definition,
    decode_images,
    find_split_layout,
    folder_split,
    has_ext,
    image_arrays,
    layout_error,
    read_bounded,
    require_root,
    scan,
    to_dataset,
)

NAME = "MNIST"
EXPECTED = ("train-images-idx3-ubyte[.gz] + train-labels-idx1-ubyte[.gz] + t10k-images-idx3-ubyte[.gz] + "
            "t10k-labels-idx1-ubyte[.gz], or train/<digit>/*.png + test/<digit>/*.png")
_IDX = re.compile(r"(?:^|/)(train|t10k)-(images|labels)[.-]idx([13])-ubyte(\.gz)?$")
#: labels are class ids 0 … MAX_CLASSES − 1 (a label of 10^6 would make a million classes)
MAX_CLASSES = 1000
_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(data: bytes, name: str = "idx file") -> np.ndarray:
    """Parse an idx file (gzipped or not): magic 0x0000TTNN, NN dims of big-endian uint32, then the data."""
    if data[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
                data = read_bounded(gz, MAX_FILE_BYTES)   # a small file may inflate to any size
        except (OSError, EOFError, zlib.error) as e:
            raise ConfigError("data.root", f"{name} is not a valid gzip file ({e})") from None
        if len(data) > MAX_FILE_BYTES:
            raise ConfigError("data.root", f"{name} inflates to more than {MAX_FILE_BYTES} bytes, more than a data "
                                           f"file may have")
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _DTYPES:
        raise ConfigError("data.root", f"{name} is not an idx file (bad magic number)")
    ndim = data[3]
    if not 1 <= ndim <= 4 or len(data) < 4 + 4 * ndim:
        raise ConfigError("data.root", f"{name} has a malformed idx header ({ndim} dimensions, {len(data)} bytes)")
    dims = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    dtype = np.dtype(_DTYPES[data[2]])
    count = 1
    for d in dims:
        count *= int(d)
    body = data[4 + 4 * ndim:]
    if len(body) < count * dtype.itemsize:
        raise ConfigError("data.root", f"{name} is truncated: header says {dims}, {len(body)} bytes of data")
    return np.frombuffer(body, dtype=dtype, count=count).reshape(dims)


def _from_idx(root: Path, files: Files, found: dict[tuple[str, str], str], size: int | None) -> dict[str, np.ndarray]:
    def arr(split: str, kind: str) -> np.ndarray:
        name = found[(split, kind)]
        return read_idx(files.read(name), name)

    out = {}
    for split, key in (("train", "train"), ("t10k", "test")):
        x, y = arr(split, "images"), arr(split, "labels")
        if x.ndim != 3 or y.ndim != 1 or x.shape[0] != y.shape[0]:
            raise ConfigError("data.root", f"{str(root)!r}: {split} idx files hold images {x.shape} and labels "
                                           f"{y.shape}, expected [N, H, W] and [N]")
        _check_labels(root, f"{split} labels", y)
        if x.dtype != np.uint8:
            raise ConfigError("data.root", f"{str(root)!r}: {split} images are {x.dtype}, expected unsigned bytes")
        x = np.ascontiguousarray(x, dtype=np.uint8)[:, None]
        if size is not None and size != x.shape[-1]:
            x = _resize(x, size)
        out[key] = (x, y.astype(np.int64))
    n_classes = int(max(out["train"][1].max(), out["test"][1].max())) + 1
    return image_arrays(*out["train"], *out["test"], [str(i) for i in range(max(n_classes, 10))])


def _check_labels(root: Path, what: str, y: np.ndarray) -> None:
    if y.size and (not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= MAX_CLASSES):
        raise ConfigError("data.root", f"{str(root)!r}: {what} must be class ids 0..{MAX_CLASSES - 1}, "
                                       f"found {y.min()!r}..{y.max()!r}")


def _resize(x: np.ndarray, size: int) -> np.ndarray:
    from PIL import Image

    out = np.empty((x.shape[0], 1, size, size), dtype=np.uint8)
    for i in range(x.shape[0]):
        out[i, 0] = np.asarray(Image.fromarray(x[i, 0]).resize((size, size), Image.BILINEAR))
    return out


def _csv_split(root: Path, files: Files, csv_name: str, size: int | None) -> tuple[np.ndarray, np.ndarray]:
    base = csv_name.rsplit("/", 1)[0] + "/" if "/" in csv_name else ""
    try:
        rows = list(csv.reader(io.StringIO(files.read(csv_name).decode("utf-8-sig"))))
    except (UnicodeDecodeError, csv.Error) as e:
        raise ConfigError("data.root", f"{str(root)!r}: {csv_name} is not a CSV file ({first_line(e)})") from None
    if not rows or [c.strip().lower() for c in rows[0][:2]] != ["filepath", "label"]:
        raise ConfigError("data.root", f"{str(root)!r}: {csv_name} must have the header 'filepath,label'")
    paths, labels = [], []
    for i, r in enumerate(rows[1:], start=2):
        if not r:
            continue
        try:
            p, lab = base + r[0].strip().lstrip("./"), int(r[1])
        except (IndexError, ValueError):
            raise ConfigError("data.root", f"{str(root)!r}: {csv_name} line {i} is not 'filepath,label'") from None
        if p not in files:
            raise ConfigError("data.root", f"{str(root)!r}: {csv_name} line {i} names {r[0]!r}, which is not there")
        paths.append(p)
        labels.append(lab)
    if labels and not 0 <= min(labels) <= max(labels) < MAX_CLASSES:   # before any image is decoded
        raise ConfigError("data.root", f"{str(root)!r}: {csv_name} labels must be class ids 0..{MAX_CLASSES - 1}, "
                                       f"found {str(min(labels))[:24]}..{str(max(labels))[:24]}")
    y = np.asarray(labels, dtype=np.int64)
    x = decode_images(files, paths, "L", size)
    return x, y


def _decode(root: Path, size: int | None) -> dict[str, np.ndarray]:
    files = scan(root, lambda n: bool(_IDX.search(n)) or has_ext(n) or n.lower().endswith(("train.csv", "test.csv")))
    names = files.names()
    found: dict[tuple[str, str], str] = {}
    for n in names:
        m = _IDX.search(n)
        if m:
            found.setdefault((m.group(1), m.group(2)), n)
    if found:
        missing = [f"{s}-{k}" for s in ("train", "t10k") for k in ("images", "labels") if (s, k) not in found]
        if missing:
            raise ConfigError("data.root", f"{str(root)!r}: MNIST idx files incomplete, missing {', '.join(missing)} "
                                           f"(expected {EXPECTED})")
        return _from_idx(root, files, found, size)
    layout = find_split_layout(names, ("train", "test"))
    if layout is None:
        raise layout_error(root, NAME, EXPECTED, files)
    prefix, tree = layout
    check_definition(files, tree["train"], root, NAME, 28, colour=False)
    pre = prefix + "/" if prefix else ""
    if f"{pre}train.csv" in files and f"{pre}test.csv" in files:
        x_train, y_train = _csv_split(root, files, f"{pre}train.csv", size)
        x_test, y_test = _csv_split(root, files, f"{pre}test.csv", size)
        n_classes = int(max(y_train.max(), y_test.max())) + 1
        return image_arrays(x_train, y_train, x_test, y_test, [str(i) for i in range(max(n_classes, 2))])
    classes = check_classes(root, NAME, tree["train"], tree["test"])
    if all(c.isdigit() for c in classes):
        classes = sorted(classes, key=int)
    x_train, y_train = folder_split(files, tree["train"], classes, "L", size)
    x_test, y_test = folder_split(files, tree["test"], classes, "L", size)
    return image_arrays(x_train, y_train, x_test, y_test, classes)


def load_mnist(root: str | None, cache_dir: str | None = None, image_size: int | None = None) -> ArrayDataset:
    """MNIST from ``root`` (see the module docstring); uint8 pixels + train mean/std."""
    path = require_root(root, NAME, EXPECTED)
    arrays = cached("mnist", path, {"image_size": image_size}, cache_dir, lambda: _decode(path, image_size))
    return to_dataset(arrays, "mnist", augment="none")
