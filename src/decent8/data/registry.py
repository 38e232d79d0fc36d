"""Data sets by name.

=============  ==================================================  ============================
name           what                                                data.root
=============  ==================================================  ============================
``digits``     scikit-learn's bundled 8x8 digits (the default)     not used
``cifar10``    CIFAR-10, 32x32 RGB, 10 classes (:mod:`.cifar10`)   python batches or image folders
``mnist``      MNIST, 28x28 grey, 10 classes (:mod:`.mnist`)       idx files or PNG folders
``imagenette`` 10 ImageNet classes, ``data.image_size`` px          ``train/``, ``val/`` folders
``agnews``     AG News, 4 classes, token ids (:mod:`.agnews`)       ``train.csv``, ``test.csv``
``sentlen``    sentence length, 6 classes (:mod:`.sentlen`):        ``sentence_length.txt``, or
               SentEval's file or "Sentlen-style" from AG News     AG News' ``train.csv``/``test.csv``
``tensors``    a user's own tensors (:mod:`.tensors`)               not used: ``data.path=FILE``
``image_folder`` your own images, one folder per class               ``train/<class>/``, ``test/<class>/``
               (:mod:`.user_folder`)
``leaf``       naturally split LEAF JSON (FEMNIST, Shakespeare,        ``train/*.json``, ``test/*.json``
               Sent140; :mod:`.leaf`), ``partition=natural``
=============  ==================================================  ============================

``data.root`` may be a folder or a tarball. Decoded arrays are cached (:mod:`.cache`).
Text data sets take ``tokenizer`` (a pretrained model folder, from ``model.pretrained``):
then ``x`` is that tokenizer's ``{input_ids, attention_mask}`` (:mod:`.tokenize`).
``data.subset`` / ``data.test_subset`` keep a class-stratified part of a split (a
fraction in (0, 1] or a count), the same part for every run and seed.
"""
from __future__ import annotations

import dataclasses
import math
import os
from collections import OrderedDict
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError
from ..registry import construct, datasets
from .dataset import ArrayDataset, take
from .digits import load_digits_dataset


# Working defaults per data set: decent8.config.DATASET_DEFAULTS (kept there so that
# reading a config does not import torch)
from ..config import DATASET_DEFAULTS  # noqa: E402,F401
from .cifar10 import load_cifar10
from .mnist import load_mnist
from .imagenette import load_imagenette
from .agnews import load_agnews
from .sentlen import load_sentlen
from .user_folder import load_image_folder
from .leaf import load_leaf
from .tensors import load_tensors

_MEMO: "OrderedDict[tuple, ArrayDataset]" = OrderedDict()
_MEMO_SIZE = 2


def check_amount(option: str, amount: float | None) -> float | None:
    """Validate a subset amount: None, a fraction in (0, 1], or a whole count > 1."""
    if amount is None:
        return None
    a = float(amount)
    if not math.isfinite(a) or a <= 0 or (a > 1 and a != int(a)):
        raise ConfigError(option, f"must be a fraction in (0, 1] or a whole number of samples > 1, got {amount}")
    return a


def stratified_subset(labels: np.ndarray, amount: float, seed: int = 0) -> np.ndarray:
    """Sorted indices of a class-stratified subset: a fraction of every class, or ``amount``
    samples in all (largest-remainder rounding across classes, at least one per class)."""
    y = np.asarray(labels)
    n = y.size
    frac = amount if amount <= 1 else min(1.0, amount / n)
    if frac >= 1.0:
        return np.arange(n)
    total = max(1, int(round(frac * n)))
    classes, counts = np.unique(y, return_counts=True)
    exact = counts * (total / n)
    take = np.minimum(np.floor(exact + 1e-9).astype(np.int64), counts)
    order = np.argsort(-(exact - take), kind="stable")      # largest remainders first
    for j in order:
        if take.sum() >= total:
            break
        if take[j] < counts[j]:
            take[j] += 1
    if total >= classes.size:                                # every class at least once
        for j in np.flatnonzero(take == 0):
            take[np.argmax(take)] -= 1
            take[j] = 1
    rng = np.random.default_rng(seed)
    keep = [rng.permutation(np.flatnonzero(y == c))[:t] for c, t in zip(classes, take)]
    return np.sort(np.concatenate(keep))


def _subset(ds: ArrayDataset, subset: float | None, test_subset: float | None) -> ArrayDataset:
    changes: dict[str, Any] = {}
    if subset is not None:
        idx = stratified_subset(ds.y_train.numpy(), subset)
        if idx.size < ds.y_train.shape[0]:
            t = torch.from_numpy(idx)
            changes.update(x_train=take(ds.x_train, t), y_train=ds.y_train[t])
            if ds.users_train is not None:
                changes["users_train"] = ds.users_train[idx]
    if test_subset is not None:
        idx = stratified_subset(ds.y_test.numpy(), test_subset, seed=1)
        if idx.size < ds.y_test.shape[0]:
            t = torch.from_numpy(idx)
            changes.update(x_test=take(ds.x_test, t), y_test=ds.y_test[t])
    return dataclasses.replace(ds, **changes) if changes else ds


@datasets.register("digits", order=0)
def _digits(test_fraction: float = 0.2, seed: int = 0) -> ArrayDataset:
    return load_digits_dataset(test_fraction=test_fraction, seed=seed)


@datasets.register("cifar10", order=1, image=True)
def _cifar10(root: str | None = None, cache_dir: str | None = None, image_size: int | None = None) -> ArrayDataset:
    return load_cifar10(root, cache_dir, image_size)


@datasets.register("mnist", order=2, image=True)
def _mnist(root: str | None = None, cache_dir: str | None = None, image_size: int | None = None) -> ArrayDataset:
    return load_mnist(root, cache_dir, image_size)


@datasets.register("imagenette", order=3, image=True)
def _imagenette(root: str | None = None, cache_dir: str | None = None, image_size: int | None = None) -> ArrayDataset:
    return load_imagenette(root, cache_dir, image_size)


@datasets.register("agnews", order=4, text=True)
def _agnews(root: str | None = None, cache_dir: str | None = None, seq_len: int = 64, vocab_size: int = 20000,
            tokenizer: Any = None) -> ArrayDataset:
    return load_agnews(root, cache_dir, seq_len, vocab_size, tokenizer)


@datasets.register("sentlen", order=5, text=True)
def _sentlen(root: str | None = None, cache_dir: str | None = None, seq_len: int = 64, vocab_size: int = 20000,
             tokenizer: Any = None, test_fraction: float = 0.2) -> ArrayDataset:
    return load_sentlen(root, cache_dir, seq_len, vocab_size, tokenizer, test_fraction)


@datasets.register("image_folder", order=6, image=True)
def _image_folder(root: str | None = None, cache_dir: str | None = None, image_size: int | None = None) -> ArrayDataset:
    return load_image_folder(root, cache_dir, image_size)


@datasets.register("tensors", order=7, fresh=True)
def _tensors(path: str | None = None, test_fraction: float = 0.2, seed: int = 0) -> ArrayDataset:
    """Read each time (the user may rewrite the file between runs); no subsets."""
    return load_tensors_dataset(path, test_fraction, seed)


@datasets.register("leaf", order=8, sequence=True)
def _leaf(root: str | None = None, seq_len: int = 64, vocab_size: int = 20000) -> ArrayDataset:
    return load_leaf(root, seq_len, vocab_size)


def __getattr__(name: str) -> Any:
    """Read from the data-set registry when asked: ``DATASETS`` (every name), ``TEXT_DATASETS``,
    ``IMAGE_DATASETS`` (those registered with ``text=True`` / ``image=True``)."""
    if name == "DATASETS":
        return datasets.names()
    if name == "TEXT_DATASETS":
        return tuple(n for n, e in datasets.items() if e.info.get("text"))
    if name == "IMAGE_DATASETS":
        return tuple(n for n, e in datasets.items() if e.info.get("image"))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_dataset(name: str, root: str | None = None, test_fraction: float = 0.2, seed: int = 0, *,
                 cache_dir: str | None = None, image_size: int | None = None, subset: float | None = None,
                 test_subset: float | None = None, seq_len: int = 64, vocab_size: int = 20000,
                 path: str | None = None, tokenizer: Any = None) -> ArrayDataset:
    """Load data set ``name`` (see the module table). Repeated calls with the same
    arguments in one process return the same object (a sweep validates every cell).
    ``tokenizer``: a pretrained model folder whose tokenizer encodes text data sets."""
    entry = datasets.entry(name)
    info = entry.info
    if tokenizer is not None and not info.get("text"):
        tokenizer = None  # only text is tokenized (a user's tensors file brings its own ids)
    subset = check_amount("data.subset", subset)
    test_subset = check_amount("data.test_subset", test_subset)
    if image_size is not None:
        if not info.get("image"):
            images = tuple(n for n, e in datasets.items() if e.info.get("image"))
            raise ConfigError("data.image_size", f"applies to the image data sets ({', '.join(images)}), "
                                                 f"not {name}")
        if int(image_size) < 8:
            raise ConfigError("data.image_size", f"must be >= 8 pixels, got {image_size}")
    options = dict(root=root, test_fraction=test_fraction, seed=seed, cache_dir=cache_dir, image_size=image_size,
                   seq_len=seq_len, vocab_size=vocab_size, tokenizer=tokenizer, path=path)
    if info.get("fresh"):  # read each time: the user may rewrite the file between runs
        if subset is not None or test_subset is not None:
            construct(entry.obj, config=options, group="data", what=f"data.name={name}")   # its own errors first
            raise ConfigError("data.subset", f"does not apply to data.name={name} (subset the file itself)")
        return construct(entry.obj, config=options, group="data", what=f"data.name={name}")
    abs_root = os.path.abspath(os.path.expanduser(root)) if root else root
    stamp = None
    if abs_root and os.path.exists(abs_root):
        st = os.stat(abs_root)
        stamp = (st.st_size, st.st_mtime_ns)
    sequence = info.get("text") or info.get("sequence")
    key = (name, abs_root, stamp, float(test_fraction), int(seed) if name == "digits" else 0, cache_dir,
           image_size, subset, test_subset, seq_len if sequence else 0,
           vocab_size if sequence else 0, str(tokenizer) if tokenizer is not None else None)
    if key in _MEMO:
        _MEMO.move_to_end(key)
        return _MEMO[key]
    ds = _subset(construct(entry.obj, config=options, group="data", what=f"data.name={name}"), subset, test_subset)
    _MEMO[key] = ds
    while len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)
    return ds


def load_tensors_dataset(path: str | None, test_fraction: float, seed: int) -> ArrayDataset:
    return load_tensors(path or "", test_fraction, seed)


def dataset_from_config(data: Any, seed: int = 0, tokenizer: Any = None) -> ArrayDataset:
    """The data set a ``DataConfig`` describes (text through ``tokenizer``'s folder if given)."""
    return load_dataset(data.name, data.root, data.test_fraction, seed, cache_dir=data.cache_dir,
                        image_size=data.image_size, subset=data.subset, test_subset=data.test_subset,
                        seq_len=data.seq_len, vocab_size=data.vocab_size, path=getattr(data, "path", None),
                        tokenizer=tokenizer)
