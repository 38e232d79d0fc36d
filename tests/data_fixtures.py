"""Tiny data sets in the real on-disk formats, written by the tests themselves."""
from __future__ import annotations

import gzip
import pickle
import struct
import tarfile
from pathlib import Path

import numpy as np
from PIL import Image

CIFAR_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def tar_folder(folder: Path, out: Path, arcname: str | None = None) -> Path:
    with tarfile.open(out, "w:gz") as tf:
        tf.add(folder, arcname=arcname or folder.name)
    return out


def write_cifar_pickles(root: Path, per_batch: int = 10, test: int = 10, seed: int = 0, bytes_keys: bool = False):
    """The official python-version layout: data_batch_1..5, test_batch, batches.meta.
    Returns (x_train [N,3,32,32] uint8, y_train, x_test, y_test)."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    key = (lambda s: s.encode()) if bytes_keys else (lambda s: s)
    xs, ys = [], []
    for i in range(1, 7):
        n = per_batch if i <= 5 else test
        x = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        y = [int(v) for v in (np.arange(n) + i) % 10]
        d = {key("batch_label"): f"batch {i}", key("labels"): y, key("data"): x,
             key("filenames"): [f"img{j}.png" for j in range(n)]}
        name = f"data_batch_{i}" if i <= 5 else "test_batch"
        with open(root / name, "wb") as f:
            pickle.dump(d, f, protocol=2)
        xs.append(x.reshape(-1, 3, 32, 32))
        ys.append(np.asarray(y))
    with open(root / "batches.meta", "wb") as f:
        pickle.dump({key("label_names"): CIFAR_CLASSES, key("num_vis"): 3072}, f, protocol=2)
    return np.concatenate(xs[:5]), np.concatenate(ys[:5]), xs[5], ys[5]


def write_image_folders(root: Path, splits: dict[str, int], classes: list[str], size: int = 32, ext: str = ".png",
                        mode: str = "RGB", seed: int = 0, grey_every: int = 0) -> dict[str, list[tuple[np.ndarray, int]]]:
    """``root/<split>/<class>/<i><ext>``; returns {split: [(pixels HxWxC, label)]} in sorted path order."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[tuple[np.ndarray, int]]] = {}
    for split, per_class in splits.items():
        out[split] = []
        for label, cname in enumerate(sorted(classes)):
            d = root / split / cname
            d.mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                grey = grey_every and (i % grey_every == 0)
                m = "L" if (mode == "L" or grey) else "RGB"
                shape = (size, size) if m == "L" else (size, size, 3)
                px = rng.integers(0, 256, size=shape, dtype=np.uint8)
                Image.fromarray(px, mode=m).save(d / f"{i:04d}{ext}")
                out[split].append((px, label))
    return out


def write_idx(path: Path, arr: np.ndarray, gz: bool) -> None:
    code = 0x08
    header = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    data = header + arr.astype(np.uint8).tobytes()
    if gz:
        data = gzip.compress(data)
    path.write_bytes(data)


def write_mnist_idx(root: Path, n_train: int = 20, n_test: int = 10, gz: bool = True, seed: int = 0):
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    sfx = ".gz" if gz else ""
    x_tr = rng.integers(0, 256, size=(n_train, 28, 28), dtype=np.uint8)
    y_tr = (np.arange(n_train) % 10).astype(np.uint8)
    x_te = rng.integers(0, 256, size=(n_test, 28, 28), dtype=np.uint8)
    y_te = (np.arange(n_test) % 10).astype(np.uint8)
    write_idx(root / f"train-images-idx3-ubyte{sfx}", x_tr, gz)
    write_idx(root / f"train-labels-idx1-ubyte{sfx}", y_tr, gz)
    write_idx(root / f"t10k-images-idx3-ubyte{sfx}", x_te, gz)
    write_idx(root / f"t10k-labels-idx1-ubyte{sfx}", y_te, gz)
    return x_tr, y_tr, x_te, y_te


def write_mnist_pngs(root: Path, per_class: int = 2, seed: int = 0):
    """The rasbt/mnist-pngs layout: train/<d>/*.png, test/<d>/*.png, train.csv, test.csv (filepath,label)."""
    data = write_image_folders(root, {"train": per_class, "test": 1}, [str(d) for d in range(10)], size=28,
                               mode="L", seed=seed)
    for split in ("train", "test"):
        lines = ["filepath,label"]
        for label in range(10):
            for p in sorted((root / split / str(label)).iterdir()):
                lines.append(f"{split}/{label}/{p.name},{label}")
        (root / f"{split}.csv").write_text("\n".join(lines) + "\n")
    return data


AG_TRAIN = [
    ("3", "Wall St. Bears Claw Back", "Short-sellers, Wall Street's dwindling band of ultra-cynics, are seeing green."),
    ("3", "Oil and Economy Cloud Stocks", "Soaring crude prices plus worries about the economy."),
    ("4", "New Chip Ships", "A chip maker ships a new\\chip for phones."),
    ("2", "Team Wins Final", "The home team wins the final match."),
    ("1", "Talks Resume", "Leaders resume talks in the capital."),
    ("2", "Star Player Injured", "The star player is injured before the final."),
]
AG_TEST = [("1", "Talks Stall", "Leaders stall talks."), ("4", "Phones Get Chips", "New phones get a chip.")]


def write_agnews(root: Path, two_column_train: bool = False) -> None:
    import csv

    root.mkdir(parents=True, exist_ok=True)
    with open(root / "train.csv", "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL if not two_column_train else csv.QUOTE_MINIMAL)
        for c, t, d in AG_TRAIN:
            w.writerow([f"{t} {d}", int(c) - 1] if two_column_train else [c, t, d])
    with open(root / "test.csv", "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        for row in AG_TEST:
            w.writerow(row)
    (root / "classes.txt").write_text("World\nSports\nBusiness\nSci/Tech\n")
