"""``leaf``: naturally split federated data in the LEAF JSON format (Caldas et al., "LEAF: A
Benchmark for Federated Settings", 2018) — FEMNIST, Shakespeare, Sent140, ….

``data.root`` holds ``train/*.json`` and ``test/*.json``; each file is
``{"users": [...], "num_samples": [...], "user_data": {user: {"x": [...], "y": [...]}}}``.
Every sample keeps its writer/speaker/user (``ArrayDataset.users_train``), so
``partition=natural`` gives each node one or more whole users (:func:`natural_partition`).

What ``x`` becomes:
* numbers (FEMNIST: 784 floats per image): float32; a square length L = s² becomes a
  ``[1, s, s]`` image (the CNN takes it), any other length a ``[L]`` vector (the MLP);
* a string per sample (Shakespeare: 80 characters): character ids (vocabulary: the train
  split's characters, 0 = padding, 1 = unknown), ``data.seq_len`` long;
* a list ending in a string (Sent140: ``[id, date, query, user, text]``): the text's word
  ids (the train split's ``data.vocab_size`` most frequent words), ``data.seq_len`` long.
``y``: class ids; strings (Shakespeare's next character) are mapped to ids in sorted order.

Bounds, checked before anything is built from a file: each file at most ``MAX_FILE_BYTES``,
JSON nested at most as deep as Python's parser allows (LEAF's own files are 4 levels deep),
``x`` and ``y`` lists of one kind, numbers finite, integer labels in 0..``MAX_CLASSES`` − 1.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch

from ..errors import ConfigError, first_line
from .dataset import ArrayDataset
from .agnews import encode_words

NAME = "leaf"


#: one LEAF JSON file is at most this many bytes (FEMNIST's largest is about 0.3 GB)
MAX_FILE_BYTES = 4 << 30
#: integer labels are class ids 0 … MAX_CLASSES − 1 (a label of 10^12 would make 10^12 classes)
MAX_CLASSES = 100_000


def _label_ok(y: object) -> bool:
    """A class id (an int, or an integral finite float) or a class name (a string)."""
    if isinstance(y, bool):
        return False
    if isinstance(y, str) or isinstance(y, int):
        return True
    return isinstance(y, float) and math.isfinite(y) and y == int(y)


def _read_split(root: Path, split: str) -> tuple[list, list, list]:
    folder = root / split
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise ConfigError("data.root", f"data.name=leaf needs {split}/*.json under {root} (LEAF's format: "
                                       "{\"users\": [...], \"user_data\": {user: {\"x\": [...], \"y\": [...]}}})")
    xs, ys, users = [], [], []
    for f in files:
        try:
            size = f.stat().st_size
            if size > MAX_FILE_BYTES:
                raise ConfigError("data.root", f"{f} has {size} bytes; a LEAF JSON file may have at most "
                                               f"{MAX_FILE_BYTES} (split it into several files)")
            d = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ConfigError("data.root", f"{f} is not a LEAF JSON file: {first_line(e)}") from None
        except RecursionError:
            raise ConfigError("data.root", f"{f} is nested too deep for a LEAF JSON file (LEAF's files are 4 levels "
                                           f"deep: users, user_data, x, y)") from None
        except MemoryError:
            raise ConfigError("data.root", f"{f} does not fit in memory") from None
        if not isinstance(d, dict) or not isinstance(d.get("user_data"), dict):
            raise ConfigError("data.root", f"{f} has no \"user_data\" mapping (LEAF's format)")
        order = d.get("users") or list(d["user_data"])
        if not isinstance(order, list) or not all(isinstance(u, str) for u in order):
            raise ConfigError("data.root", f"{f}: \"users\" must be a list of user names (strings)")
        for u in order:
            ud = d["user_data"].get(u)
            if (not isinstance(ud, dict) or not isinstance(ud.get("x"), list) or not isinstance(ud.get("y"), list)
                    or len(ud["x"]) != len(ud["y"])):
                raise ConfigError("data.root", f"{f}: user {u[:80]!r} needs lists \"x\" and \"y\" of the same length")
            bad = [y for y in ud["y"] if not _label_ok(y)][:1]
            if bad:
                raise ConfigError("data.root", f"{f}: user {u[:80]!r} has the label {str(bad[0])[:40]!r}; labels are "
                                               f"class ids (integers) or class names (strings)")
            xs.extend(ud["x"])
            ys.extend(ud["y"])
            users.extend([u] * len(ud["y"]))
    if not ys:
        raise ConfigError("data.root", f"{root / split} holds no samples")
    return xs, ys, users


def _kind(x: object) -> str:
    if isinstance(x, str):
        return "chars"
    if isinstance(x, list) and x and isinstance(x[-1], str):
        return "words"
    if isinstance(x, list) or (isinstance(x, (int, float)) and not isinstance(x, bool)):
        return "numbers"
    raise ConfigError("data.root", f"LEAF x must be numbers, a string or a list ending in a string, got {type(x).__name__}")


def _same_kind(kind: str, xs: list, where: str) -> None:
    """Every x of a split is of the first train x's kind (numbers are checked by numpy)."""
    if kind == "numbers":
        return
    ok = (lambda x: isinstance(x, str)) if kind == "chars" else (lambda x: isinstance(x, list) and x and isinstance(x[-1], str))
    if not all(ok(x) for x in xs):
        what = "a string" if kind == "chars" else "a list ending in a string"
        raise ConfigError("data.root", f"LEAF {where} x: every x must be {what}, like the first train x")


def _numbers(xs: list, where: str) -> np.ndarray:
    try:
        a = np.asarray(xs, dtype=np.float32)
    except (ValueError, TypeError, OverflowError):
        raise ConfigError("data.root", f"{where}: every x must be a list of numbers of the same length") from None
    if not np.isfinite(a).all():
        raise ConfigError("data.root", f"{where}: x holds NaN or infinite numbers (or numbers beyond float32)")
    return a.reshape(len(xs), -1)


def _chars(train: list[str], test: list[str], seq_len: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    chars = sorted({ch for s in train for ch in s})
    ids = {ch: i + 2 for i, ch in enumerate(chars)}

    def enc(texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), seq_len), dtype=np.int64)
        for i, s in enumerate(texts):
            v = [ids.get(ch, 1) for ch in s[-seq_len:]]   # the last characters predict the next one
            out[i, :len(v)] = v
        return out
    return enc(train), enc(test), ["<pad>", "<unk>", *chars]


def load_leaf(root: str | None, seq_len: int = 64, vocab_size: int = 20000) -> ArrayDataset:
    """Load a LEAF data set from ``root`` (see the module docstring)."""
    if not root:
        raise ConfigError("data.root", "data.name=leaf needs data.root=FOLDER with train/*.json and test/*.json")
    base = Path(root).expanduser()
    if not base.is_dir():
        raise ConfigError("data.root", f"{root} is not a folder (LEAF: train/*.json and test/*.json)")
    x_tr, y_tr, u_tr = _read_split(base, "train")
    x_te, y_te, _ = _read_split(base, "test")
    kind = _kind(x_tr[0])
    _same_kind(kind, x_tr, "train")
    _same_kind(kind, x_te, "test")
    vocab = None
    if kind == "numbers":
        a_tr, a_te = _numbers(x_tr, "train"), _numbers(x_te, "test")
        if a_tr.shape[1] != a_te.shape[1]:
            raise ConfigError("data.root", f"train x has {a_tr.shape[1]} numbers, test x {a_te.shape[1]}")
        side = math.isqrt(a_tr.shape[1])
        if side * side == a_tr.shape[1] and side >= 4:
            a_tr, a_te = a_tr.reshape(-1, 1, side, side), a_te.reshape(-1, 1, side, side)
        x_train, x_test = torch.from_numpy(a_tr), torch.from_numpy(a_te)
    elif kind == "chars":
        a_tr, a_te, vocab = _chars([str(s) for s in x_tr], [str(s) for s in x_te], seq_len)
        x_train, x_test = torch.from_numpy(a_tr), torch.from_numpy(a_te)
    else:
        e = encode_words([str(x[-1]) for x in x_tr], [str(x[-1]) for x in x_te], seq_len, vocab_size)
        x_train, x_test = torch.from_numpy(e["x_train"]), torch.from_numpy(e["x_test"])
        vocab = [str(w) for w in e["vocab"].tolist()]
    if not any(isinstance(y, str) for y in y_tr + y_te):   # class ids: bounded before anything is built
        lo, hi = min(min(y_tr), min(y_te)), max(max(y_tr), max(y_te))
        if lo < 0 or hi >= MAX_CLASSES:
            raise ConfigError("data.root", f"LEAF labels must be class ids 0..{MAX_CLASSES - 1}, found "
                                           f"{str(lo)[:24]}..{str(hi)[:24]}")
        yt, ye = np.asarray(y_tr, dtype=np.int64), np.asarray(y_te, dtype=np.int64)
        names = [str(i) for i in range(int(hi) + 1)]
    else:
        names = sorted({str(y) for y in y_tr + y_te})
        index = {s: i for i, s in enumerate(names)}
        yt = np.array([index[str(y)] for y in y_tr], dtype=np.int64)
        ye = np.array([index[str(y)] for y in y_te], dtype=np.int64)
    if len(names) < 2:
        raise ConfigError("data.root", "LEAF labels: need at least 2 classes")
    return ArrayDataset(x_train=x_train, y_train=torch.from_numpy(yt), x_test=x_test, y_test=torch.from_numpy(ye),
                        num_classes=len(names), class_names=names, name=NAME, vocab=vocab, users_train=np.asarray(u_tr))


def natural_partition(users: np.ndarray | None, n: int) -> list[np.ndarray]:
    """``partition=natural``: whole users per node. Users (in file order) are dealt largest
    first to the node holding the fewest samples so far (ties: the lower node), so every node
    gets ≥ 1 user and the sample counts are balanced (LPT scheduling)."""
    if users is None:
        raise ConfigError("partition", "partition=natural needs a data set with users (data.name=leaf)")
    names, first, inverse = np.unique(users, return_index=True, return_inverse=True)
    order_users = np.argsort(first, kind="stable")                 # file order
    if len(names) < n:
        raise ConfigError("nodes", f"partition=natural gives whole users to nodes: {len(names)} users for {n} nodes; "
                                   f"use at most {len(names)} nodes")
    sizes = np.bincount(inverse, minlength=len(names))
    order = sorted(order_users.tolist(), key=lambda u: -sizes[u])   # stable: ties keep file order
    load = np.zeros(n, dtype=np.int64)
    owner = np.empty(len(names), dtype=np.int64)
    for u in order:
        i = int(np.argmin(load))
        owner[u] = i
        load[i] += sizes[u]
    node_of_sample = owner[inverse]
    return [np.flatnonzero(node_of_sample == i).astype(np.int64) for i in range(n)]
