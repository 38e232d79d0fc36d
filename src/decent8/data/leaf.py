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
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch

from ..errors import ConfigError, first_line
from .dataset import ArrayDataset

NAME = "leaf"


def _read_split(root: Path, split: str) -> tuple[list, list, list]:
    folder = root / split
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise ConfigError("data.root", f"data.name=leaf needs {split}/*.json under {root} (LEAF's format: "
                                       "{\"users\": [...], \"user_data\": {user: {\"x\": [...], \"y\": [...]}}})")
    xs, ys, users = [], [], []
    for f in files:
        try:
            d = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ConfigError("data.root", f"{f} is not a LEAF JSON file: {first_line(e)}") from None
        if not isinstance(d, dict) or not isinstance(d.get("user_data"), dict):
            raise ConfigError("data.root", f"{f} has no \"user_data\" mapping (LEAF's format)")
        order = d.get("users") or list(d["user_data"])
        for u in order:
            ud = d["user_data"].get(u)
            if not isinstance(ud, dict) or len(ud.get("x", [])) != len(ud.get("y", [])):
                raise ConfigError("data.root", f"{f}: user {u!r} needs lists \"x\" and \"y\" of the same length")
            xs.extend(ud["x"])
            ys.extend(ud["y"])
            users.extend([str(u)] * len(ud["y"]))
    if not ys:
        raise ConfigError("data.root", f"{root / split} holds no samples")
    return xs, ys, users


def _kind(x: object) -> str:
    if isinstance(x, str):
        return "chars"
    if isinstance(x, (list, tuple)) and x and isinstance(x[-1], str):
        return "words"
    if isinstance(x, (list, tuple)) or isinstance(x, (int, float)):
        return "numbers"
    raise ConfigError("data.root", f"LEAF x must be numbers, a string or a list ending in a string, got {type(x).__name__}")


def _numbers(xs: list, where: str) -> np.ndarray:
    try:
        a = np.asarray(xs, dtype=np.float32)
    except (ValueError, TypeError):
        raise ConfigError("data.root", f"{where}: every x must be a list of numbers of the same length") from None
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
        from .agnews import encode_words
        e = encode_words([str(x[-1]) for x in x_tr], [str(x[-1]) for x in x_te], seq_len, vocab_size)
        x_train, x_test = torch.from_numpy(e["x_train"]), torch.from_numpy(e["x_test"])
        vocab = [str(w) for w in e["vocab"].tolist()]
    if all(isinstance(y, (int, np.integer)) or (isinstance(y, float) and y == int(y)) for y in y_tr + y_te):
        yt, ye = np.asarray(y_tr, dtype=np.int64), np.asarray(y_te, dtype=np.int64)
        if min(yt.min(), ye.min()) < 0:
            raise ConfigError("data.root", "LEAF labels must be class ids ≥ 0")
        names = [str(i) for i in range(int(max(yt.max(), ye.max())) + 1)]
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
