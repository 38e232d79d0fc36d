"""AG News (Zhang et al. 2015): 4-class news topic classification, as fixed-length token ids.

``data.root`` is a folder or a tarball with ``train.csv`` and ``test.csv`` (each found
anywhere below the root, e.g. ``ag_news_csv/train.csv``; exactly one of each). Two row
formats are read, per file:

* the canonical one: ``"class","title","description"`` with class 1..4;
* two columns ``"text",label`` (e.g. the Hugging Face export), label 0..3 (1..4 when no
  label is 0).

Class names come from a ``classes.txt`` beside the CSVs when there is one. Tokenization
is deliberately simple: lower case, ``\\`` as a space, words ``[a-z0-9]+('[a-z]+)?``.
The vocabulary is the ``data.vocab_size`` most frequent train words (ties by word);
id 0 is padding, 1 unknown. ``x`` is int64 ``[N, data.seq_len]``: truncated, then
right-padded with 0. With ``model=hf model.pretrained=…`` the text (title + description)
goes through the pretrained model's own tokenizer instead (:mod:`.tokenize`).
"""
from __future__ import annotations

import csv
import io
import re
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from ..errors import ConfigError, first_line
from .cache import cached, tokenizer_fingerprint
from .dataset import ArrayDataset
from .image_folder import layout_error, require_root, scan
from .tokenize import flatten, hf_tokenize
from .tokenize import unflatten

NAME = "AG News"
EXPECTED = "train.csv + test.csv (rows 'class,title,description' or 'text,label')"
DEFAULT_CLASSES = ("World", "Sports", "Business", "Sci/Tech")
PAD, UNK = 0, 1
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def tokenize(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("\\", " "))


#: class labels are 0 … MAX_CLASSES − 1 (1 … MAX_CLASSES in the 'class,title,description' rows)
MAX_CLASSES = 100_000


def csv_rows(root: Path, name: str, data: bytes) -> list[list[str]]:
    """The non-empty rows of a CSV file; one line naming the file if it is not CSV."""
    try:
        return [r for r in csv.reader(io.StringIO(data.decode("utf-8-sig", errors="replace"))) if r]
    except csv.Error as e:
        raise ConfigError("data.root", f"{str(root)!r}: {name} is not a CSV file ({first_line(e)})") from None


def _read_rows(root: Path, name: str, data: bytes) -> tuple[list[str], np.ndarray]:
    rows = csv_rows(root, name, data)
    texts, labels = [], []
    three = bool(rows) and len(rows[0]) >= 3
    for i, r in enumerate(rows, start=1):
        try:
            label = int(r[0] if three else r[-1])
            text = " ".join(r[1:]) if three else ",".join(r[:-1])
        except (ValueError, IndexError):
            if i == 1:  # a header line
                continue
            raise ConfigError("data.root", f"{str(root)!r}: {name} line {i} is neither 'class,title,description' "
                                           f"nor 'text,label'") from None
        if not -1 <= label <= MAX_CLASSES:
            raise ConfigError("data.root", f"{str(root)!r}: {name} line {i} has the label {str(label)[:24]}; class "
                              f"labels are 0..{MAX_CLASSES - 1} (1..{MAX_CLASSES} in 'class,title,description' rows)")
        labels.append(label)
        texts.append(text)
    if not labels:
        raise ConfigError("data.root", f"{str(root)!r}: {name} has no rows")
    y = np.asarray(labels, dtype=np.int64)
    if three or y.min() >= 1:
        y = y - 1
    if y.min() < 0 or y.max() >= MAX_CLASSES:
        raise ConfigError("data.root", f"{str(root)!r}: {name} has class labels {y.min()}..{y.max()}; class labels "
                                       f"are 0..{MAX_CLASSES - 1}")
    return texts, y


def _find(files, base: str, root: Path) -> str:
    names = files.names()
    hits = [n for n in names if n.rsplit("/", 1)[-1].lower() == base]
    if not hits:
        raise layout_error(root, NAME, EXPECTED, files)
    if len(hits) > 1:
        raise ConfigError("data.root", f"{str(root)!r} holds several {base} files ({', '.join(hits[:4])}); "
                                       f"point data.root at the folder of the one to use")
    return hits[0]


def _encode(texts: list[str], vocab: dict[str, int], seq_len: int) -> np.ndarray:
    x = np.zeros((len(texts), seq_len), dtype=np.int64)
    for i, t in enumerate(texts):
        ids = [vocab.get(w, UNK) for w in tokenize(t)[:seq_len]]
        x[i, :len(ids)] = ids
    return x


def read_texts(root: Path) -> dict[str, object]:
    """The raw texts and labels: ``train_texts``, ``y_train``, ``test_texts``, ``y_test``, ``classes``."""
    files = scan(root, lambda n: n.lower().endswith((".csv", "classes.txt")))
    names = files.names()
    train_name, test_name = _find(files, "train.csv", root), _find(files, "test.csv", root)
    train_texts, y_train = _read_rows(root, train_name, files.read(train_name))
    test_texts, y_test = _read_rows(root, test_name, files.read(test_name))
    n_classes = int(max(y_train.max(), y_test.max())) + 1
    classes = list(DEFAULT_CLASSES) if n_classes <= len(DEFAULT_CLASSES) else [str(i) for i in range(n_classes)]
    cls_files = [n for n in names if n.lower().endswith("classes.txt")]
    if cls_files:
        listed = [s.strip() for s in files.read(sorted(cls_files)[0]).decode("utf-8", "replace").splitlines() if s.strip()]
        if len(listed) >= n_classes:
            classes = listed
    return {"train_texts": train_texts, "y_train": y_train, "test_texts": test_texts, "y_test": y_test,
            "classes": classes}


def build_vocab(texts: list[str], vocab_size: int) -> list[str]:
    """The ``vocab_size`` most frequent words of ``texts`` (ties by word); ids start at 2."""
    counts = Counter(w for t in texts for w in tokenize(t))
    return sorted(counts, key=lambda w: (-counts[w], w))[:vocab_size]


def encode_words(train_texts: list[str], test_texts: list[str], seq_len: int, vocab_size: int) -> dict[str, np.ndarray]:
    """Word-level ids of both splits with the train split's vocabulary (+ ``vocab``)."""
    words = build_vocab(train_texts, vocab_size)
    vocab = {w: i + 2 for i, w in enumerate(words)}
    return {"x_train": _encode(train_texts, vocab, seq_len), "x_test": _encode(test_texts, vocab, seq_len),
            "vocab": np.array(["<pad>", "<unk>", *words])}


def _decode(root: Path, seq_len: int, vocab_size: int, tokenizer: Path | None = None) -> dict[str, np.ndarray]:
    t = read_texts(root)
    out: dict[str, np.ndarray] = {"y_train": t["y_train"], "y_test": t["y_test"], "class_names": np.array(t["classes"])}
    if tokenizer is None:
        out.update(encode_words(t["train_texts"], t["test_texts"], seq_len, vocab_size))
    else:
        out.update(flatten("x_train", hf_tokenize([s.replace("\\", " ") for s in t["train_texts"]], tokenizer, seq_len)))
        out.update(flatten("x_test", hf_tokenize([s.replace("\\", " ") for s in t["test_texts"]], tokenizer, seq_len)))
    return out


def arrays_to_dataset(a: dict[str, np.ndarray], name: str) -> ArrayDataset:
    """An :class:`ArrayDataset` from cached arrays (word ids, or tokenizer dicts)."""
    names = [str(s) for s in a["class_names"].tolist()]
    if "x_train" in a:
        x_train, x_test = torch.from_numpy(a["x_train"]), torch.from_numpy(a["x_test"])
        vocab = [str(w) for w in a["vocab"].tolist()]
    else:
        x_train, x_test, vocab = unflatten(a, "x_train"), unflatten(a, "x_test"), None
    return ArrayDataset(x_train=x_train, y_train=torch.from_numpy(a["y_train"]), x_test=x_test,
                        y_test=torch.from_numpy(a["y_test"]), num_classes=len(names), class_names=names, name=name,
                        vocab=vocab)


def load_agnews(root: str | None, cache_dir: str | None = None, seq_len: int = 64,
                vocab_size: int = 20000, tokenizer: Path | None = None) -> ArrayDataset:
    """AG News from ``root`` as token ids ``[N, seq_len]`` (see the module docstring), or,
    with ``tokenizer`` (a pretrained model folder), as that tokenizer's
    ``{input_ids, attention_mask}`` (:mod:`.tokenize`)."""
    if seq_len < 1:
        raise ConfigError("data.seq_len", f"must be >= 1, got {seq_len}")
    if vocab_size < 1:
        raise ConfigError("data.vocab_size", f"must be >= 1, got {vocab_size}")
    path = require_root(root, NAME, EXPECTED)
    if tokenizer is None:
        a = cached("agnews", path, {"seq_len": seq_len, "vocab_size": vocab_size}, cache_dir,
                   lambda: _decode(path, seq_len, vocab_size))
    else:
        a = cached("agnews-tok", path, {"seq_len": seq_len, "tokenizer": tokenizer_fingerprint(tokenizer)}, cache_dir,
                   lambda: _decode(path, seq_len, vocab_size, tokenizer))
    return arrays_to_dataset(a, "agnews")
