"""Users' own tensors: ``data.name=tensors data.path=FILE`` (a ``.pt`` or ``.npz`` file).

The file holds named arrays, read without unpickling code (``torch.load(...,
weights_only=True)``; ``numpy.load(..., allow_pickle=False)``):

* ``x_train``, ``y_train``, ``x_test``, ``y_test``; or
* ``x``, ``y`` — then a seeded ``data.test_fraction`` of the rows is the test split.

``x`` is float features/images ``[N, ...]`` or int64 token ids ``[N, T]``; in a ``.pt``
file it may also be a dict of tensors (keyword inputs, e.g. ``input_ids`` and
``attention_mask``; a ``.npz`` spells them ``x_train.input_ids`` …). ``y`` is int64 class
labels ``[N]`` (classification: ``num_classes`` = largest label + 1) or float targets
``[N]`` / ``[N, m]`` (regression, use ``loss=mse``).
"""
from __future__ import annotations

import os
import pickle
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError, first_line
from .dataset import ArrayDataset, take

OPTION = "data.path"


def _read(path: str) -> dict[str, Any]:
    if not path:
        raise ConfigError(OPTION, "data.name=tensors needs data.path=FILE (.pt or .npz)")
    if not os.path.isfile(path):
        raise ConfigError(OPTION, f"file {path!r} does not exist")
    try:
        if path.endswith(".npz"):
            with np.load(path, allow_pickle=False) as z:
                flat = {k: torch.from_numpy(np.array(z[k])) for k in z.files}
            out: dict[str, Any] = {}
            for k, v in flat.items():
                if "." in k:
                    head, sub = k.split(".", 1)
                    out.setdefault(head, {})[sub] = v
                else:
                    out[k] = v
            return out
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except ConfigError:
        raise
    except pickle.UnpicklingError as e:
        if "weights only" not in str(e).lower():
            raise ConfigError(OPTION, f"cannot read {path!r} as tensors (a damaged or non-torch file): "
                                      f"{first_line(e)}") from None
        # torch's message advises weights_only=False, which would run the file's code: not here
        raise ConfigError(OPTION, f"{path!r} holds something other than tensors (pickled Python "
                                  f"objects, or a damaged file); decent8 reads only tensors and never runs a file's "
                                  f"code: save a dict of tensors "
                                  f"(torch.save({{'x': x, 'y': y}}, path)) or an .npz file") from None
    except Exception as e:
        raise ConfigError(OPTION, f"cannot read {path!r} as tensors (.pt saved with torch.save of a dict of "
                                  f"tensors, or .npz): {type(e).__name__}: {str(e).splitlines()[0][:200]}") from None
    if not isinstance(obj, dict):
        raise ConfigError(OPTION, f"{path!r} must hold a dict of tensors, got {type(obj).__name__}")
    return obj


def _rows(x: Any) -> int:
    if isinstance(x, dict):
        sizes = {int(v.shape[0]) for v in x.values()}
        if len(sizes) != 1:
            raise ConfigError(OPTION, f"the tensors of a dict input must have the same number of rows, got {sorted(sizes)}")
        return sizes.pop()
    return int(x.shape[0])


def _check(name: str, x: Any) -> Any:
    items = x.items() if isinstance(x, dict) else [(name, x)]
    for key, v in items:
        if not isinstance(v, torch.Tensor):
            raise ConfigError(OPTION, f"{key!r} must be a tensor, got {type(v).__name__}")
        if v.dim() == 0:
            raise ConfigError(OPTION, f"{key!r} must have a row axis, got a scalar")
        if v.is_floating_point() and not torch.isfinite(v).all():
            raise ConfigError(OPTION, f"{key!r} holds NaN or infinite values")
    if isinstance(x, dict):
        return {k: (v.float() if v.is_floating_point() else v) for k, v in x.items()}
    return x.float() if x.is_floating_point() else x


def load_tensors(path: str, test_fraction: float = 0.2, seed: int = 0) -> ArrayDataset:
    """The data set of a ``.pt`` / ``.npz`` file (see the module docstring)."""
    return from_arrays(_read(path), test_fraction, seed, source=repr(path))


def from_arrays(d: dict[str, Any], test_fraction: float = 0.2, seed: int = 0, source: str = "the data") -> ArrayDataset:
    """The data set of named arrays ``x, y`` or ``x_train, y_train, x_test, y_test`` (checked,
    split with a seeded ``test_fraction`` when only ``x, y`` are given)."""
    if {"x_train", "y_train", "x_test", "y_test"} <= d.keys():
        xs = [_check(k, d[k]) for k in ("x_train", "x_test")]
        ys = [_check(k, d[k]) for k in ("y_train", "y_test")]
    elif {"x", "y"} <= d.keys():
        x, y = _check("x", d["x"]), _check("y", d["y"])
        n = _rows(x)
        if y.shape[0] != n:
            raise ConfigError(OPTION, f"'x' has {n} rows but 'y' has {y.shape[0]}")
        if not 0.0 < test_fraction < 1.0:
            raise ConfigError("data.test_fraction", f"must be in (0, 1) to split 'x', 'y', got {test_fraction}")
        perm = torch.from_numpy(np.random.default_rng(seed).permutation(n))
        n_test = max(1, int(round(test_fraction * n)))
        xs = [take(x, perm[n_test:]), take(x, perm[:n_test])]
        ys = [y[perm[n_test:]], y[perm[:n_test]]]
    else:
        raise ConfigError(OPTION, f"{source} must hold x_train, y_train, x_test, y_test (or x, y); found: "
                                  f"{', '.join(sorted(d)) or 'nothing'}")
    for x, y, split in ((xs[0], ys[0], "train"), (xs[1], ys[1], "test")):
        if _rows(x) != y.shape[0]:
            raise ConfigError(OPTION, f"x_{split} has {_rows(x)} rows but y_{split} has {y.shape[0]}")
        if _rows(x) == 0:
            raise ConfigError(OPTION, f"the {split} split is empty")
    if ys[0].is_floating_point():
        num_classes = 1 if ys[0].dim() == 1 else int(np.prod(ys[0].shape[1:]))
        names: list[str] = []
    else:
        ys = [y.long() for y in ys]
        if ys[0].dim() != 1 or ys[1].dim() != 1:
            raise ConfigError(OPTION, "integer labels must be a vector [N]; float targets mean regression")
        lo = min(int(ys[0].min()), int(ys[1].min()))
        if lo < 0:
            raise ConfigError(OPTION, f"class labels must be >= 0, found {lo}")
        num_classes = max(int(ys[0].max()), int(ys[1].max())) + 1
        if num_classes > 100_000:
            raise ConfigError(OPTION, f"labels go up to {num_classes - 1}; class labels must be 0..C-1")
        names = [str(i) for i in range(num_classes)]
    return ArrayDataset(xs[0], ys[0], xs[1], ys[1], num_classes, names, name="tensors")


__all__ = ["load_tensors", "from_arrays"]
