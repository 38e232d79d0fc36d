"""Sentence length probing: SentEval's SentLen file, or a "Sentlen-style" task built from AG News.

The task (Conneau & Kiela 2018; the paper's Table 6): predict a sentence's length in
words, 6 classes by the bins 5–8, 9–12, 13–16, 17–20, 21–25, 26–28.

``data.root`` is either

* SentEval's probing file ``sentence_length.txt`` (a folder holding it, or the file):
  one ``split<TAB>label<TAB>sentence`` per line, split ``tr`` (train) / ``va``
  (validation, not used) / ``te`` (test), label 0..5 — read as is; or
* an AG News source (``train.csv`` + ``test.csv``, :mod:`.agnews`): the **Sentlen-style**
  task. Each description is cleaned (``\\`` and HTML entities such as ``#39;``
  decoded, tags dropped) and split into sentences at ``.``/``!``/``?`` followed by
  white space and an upper-case letter, digit or quote; a sentence's length is its
  number of white-space separated tokens with a letter or digit (punctuation alone
  does not count). The sentences of both files (in ``text,label`` rows, where the
  title is glued to the first sentence, that sentence is dropped) with 5–28 words are
  binned, duplicates dropped, and every class cut to the size of the smallest (a
  seeded, fixed choice): balanced classes. A fixed stratified split puts
  ``data.test_fraction`` (0.2) of each class in the test split.

Inputs are word-level ids (the vocabulary of :mod:`.agnews`) or, with
``model.pretrained``, that model's tokenizer (:mod:`.tokenize`); cached like AG News.
"""
from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from .agnews import EXPECTED as AGNEWS_EXPECTED
from .agnews import _find, arrays_to_dataset, csv_rows, encode_words
from .cache import cached, tokenizer_fingerprint
from .dataset import ArrayDataset
from .image_folder import layout_error, require_root, scan
from .tokenize import flatten, hf_tokenize

NAME = "Sentlen-style"
SENTEVAL_FILE = "sentence_length.txt"
EXPECTED = f"SentEval's {SENTEVAL_FILE}, or AG News ({AGNEWS_EXPECTED}) to build the Sentlen-style task from"
#: the 6 length bins (words, inclusive)
BINS = ((5, 8), (9, 12), (13, 16), (17, 20), (21, 25), (26, 28))
CLASS_NAMES = tuple(f"{a}-{b} words" for a, b in BINS)
_ENTITY = re.compile(r"&?#(\d+);")
_NAMED = re.compile(r"&?(quot|amp|lt|gt|nbsp);")
_TAG = re.compile(r"<[^>]*>")
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'A-Z0-9])")
_WORDLIKE = re.compile(r"[A-Za-z0-9]")


def clean(text: str) -> str:
    """AG News escapes decoded: ``\\`` → space, ``#39;`` → ``'``, ``quot;`` → ``"``, tags dropped."""
    s = text.replace("\\", " ")
    s = _ENTITY.sub(lambda m: chr(int(m.group(1))) if int(m.group(1)) < 0x110000 else " ", s)
    s = _NAMED.sub(lambda m: html.unescape(f"&{m.group(1)};"), s)
    s = _TAG.sub(" ", s)
    return " ".join(s.split())


def sentences(text: str) -> list[str]:
    """The complete sentences of a cleaned text (ending in ``.``, ``!`` or ``?``)."""
    return [p.strip() for p in _SPLIT.split(clean(text)) if p.strip().endswith((".", "!", "?"))]


def word_count(sentence: str) -> int:
    """White-space separated tokens holding a letter or digit."""
    return sum(1 for t in sentence.split() if _WORDLIKE.search(t))


def length_bin(n_words: int) -> int:
    """The class of a sentence of ``n_words`` words (0..5), or -1 outside 5–28."""
    for i, (a, b) in enumerate(BINS):
        if a <= n_words <= b:
            return i
    return -1


def balanced(texts: list[str], seed: int) -> tuple[list[str], np.ndarray]:
    """Distinct sentences binned by length, each class cut to the smallest class's size
    (a seeded choice, in the order of the input)."""
    seen: set[str] = set()
    by_class: list[list[str]] = [[] for _ in BINS]
    for s in texts:
        c = length_bin(word_count(s))
        if c >= 0 and s not in seen:
            seen.add(s)
            by_class[c].append(s)
    n = min(len(b) for b in by_class)
    if n == 0:
        raise ConfigError("data.root", f"too few sentences to build the {NAME} task (a length bin is empty)")
    out_t, out_y = [], []
    rng = np.random.default_rng(seed)
    for c, b in enumerate(by_class):
        for i in np.sort(rng.permutation(len(b))[:n]):
            out_t.append(b[i])
            out_y.append(c)
    return out_t, np.asarray(out_y, dtype=np.int64)


def _sentences_of(data: bytes, root: Path = Path("."), name: str = "the CSV file") -> list[str]:
    """The sentences of a CSV's descriptions: column 3 of ``class,title,description`` rows;
    in ``text,label`` rows the title is glued to the first sentence, which is dropped."""
    rows = csv_rows(root, name, data)
    out: list[str] = []
    for r in rows:
        out += sentences(r[-1]) if len(r) >= 3 else sentences(",".join(r[:-1]))[1:]
    return out


def split_stratified(texts: list[str], y: np.ndarray, test_fraction: float, seed: int = 0):
    """A fixed seeded split keeping the classes balanced: (train texts, y, test texts, y)."""
    rng = np.random.default_rng(seed)
    train_i, test_i = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        n_test = max(1, int(round(test_fraction * idx.size)))
        test_i += idx[:n_test].tolist()
        train_i += idx[n_test:].tolist()
    train_i, test_i = sorted(train_i), sorted(test_i)
    return [texts[i] for i in train_i], y[train_i], [texts[i] for i in test_i], y[test_i]


def _read_senteval(data: bytes, root: Path) -> dict[str, object]:
    split: dict[str, tuple[list[str], list[int]]] = {"tr": ([], []), "te": ([], [])}
    for i, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("\t", 2)
        try:
            name, label, text = parts[0].strip(), int(parts[1]), parts[2].strip()
        except (IndexError, ValueError):
            raise ConfigError("data.root", f"{str(root)!r}: {SENTEVAL_FILE} line {i} is not "
                                           f"'split<TAB>label<TAB>sentence'") from None
        if not 0 <= label < len(BINS):
            raise ConfigError("data.root", f"{str(root)!r}: {SENTEVAL_FILE} line {i} has label {label}, not 0..5")
        if name in split:
            split[name][0].append(text)
            split[name][1].append(label)
    if not split["tr"][0] or not split["te"][0]:
        raise ConfigError("data.root", f"{str(root)!r}: {SENTEVAL_FILE} needs 'tr' and 'te' lines")
    return {"train_texts": split["tr"][0], "y_train": np.asarray(split["tr"][1], dtype=np.int64),
            "test_texts": split["te"][0], "y_test": np.asarray(split["te"][1], dtype=np.int64)}


def read_texts(root: Path, test_fraction: float = 0.2) -> dict[str, object]:
    """Train/test sentences and labels from SentEval's file or built from AG News."""
    files = scan(root, lambda n: n.lower().endswith((".csv", ".txt")))
    senteval = [n for n in files.names() if n.rsplit("/", 1)[-1] == SENTEVAL_FILE]
    if senteval:
        return _read_senteval(files.read(sorted(senteval)[0]), root)
    if not any(n.lower().endswith(".csv") for n in files.names()):
        raise layout_error(root, NAME, EXPECTED, files)
    train_name, test_name = _find(files, "train.csv", root), _find(files, "test.csv", root)
    texts, y = balanced(_sentences_of(files.read(train_name), root, train_name)
                        + _sentences_of(files.read(test_name), root, test_name), 0)
    a, ya, b, yb = split_stratified(texts, y, test_fraction)
    return {"train_texts": a, "y_train": ya, "test_texts": b, "y_test": yb}


def _decode(root: Path, seq_len: int, vocab_size: int, tokenizer: Path | None,
            test_fraction: float) -> dict[str, np.ndarray]:
    t = read_texts(root, test_fraction)
    out: dict[str, np.ndarray] = {"y_train": t["y_train"], "y_test": t["y_test"], "class_names": np.array(CLASS_NAMES)}
    if tokenizer is None:
        out.update(encode_words(t["train_texts"], t["test_texts"], seq_len, vocab_size))
    else:
        out.update(flatten("x_train", hf_tokenize(t["train_texts"], tokenizer, seq_len)))
        out.update(flatten("x_test", hf_tokenize(t["test_texts"], tokenizer, seq_len)))
    return out


def load_sentlen(root: str | None, cache_dir: str | None = None, seq_len: int = 64, vocab_size: int = 20000,
                 tokenizer: Path | None = None, test_fraction: float = 0.2) -> ArrayDataset:
    """The sentence-length task from ``root`` (see the module docstring)."""
    if seq_len < 1:
        raise ConfigError("data.seq_len", f"must be >= 1, got {seq_len}")
    if vocab_size < 1:
        raise ConfigError("data.vocab_size", f"must be >= 1, got {vocab_size}")
    path = require_root(root, NAME, EXPECTED)
    options: dict[str, object] = {"seq_len": seq_len, "vocab_size": vocab_size, "test_fraction": test_fraction}
    if tokenizer is not None:
        options = {"seq_len": seq_len, "tokenizer": tokenizer_fingerprint(tokenizer), "test_fraction": test_fraction}
    a = cached("sentlen", path, options, cache_dir,
               lambda: _decode(path, seq_len, vocab_size, tokenizer, test_fraction))
    return arrays_to_dataset(a, "sentlen")


__all__ = ["BINS", "CLASS_NAMES", "NAME", "clean", "sentences", "word_count", "length_bin", "balanced", "read_texts",
           "load_sentlen"]
