"""Shared helpers of the file-based loaders: folders or tarballs, split/class layouts, decoding.

A *source* is what ``data.root`` points at: a folder, or a tarball (``.tar``,
``.tar.gz``, ``.tgz``, ``.tar.bz2``, ``.tar.xz``) holding the same tree. Paths inside are
compared as POSIX paths relative to the root; one leading folder (``CIFAR-10-images/``,
``mnist-pngs/``) is found automatically. A tarball is read in one sequential pass
(random access into a gzip stream would re-decompress it over and over).
"""
from __future__ import annotations

import io
import os
import tarfile
from collections import defaultdict
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from ..errors import ConfigError
from .dataset import ArrayDataset

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm", ".gif", ".webp", ".tif", ".tiff")
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


def is_tarball(path: str | os.PathLike) -> bool:
    return str(path).lower().endswith(TAR_SUFFIXES)


def require_root(root: str | None, dataset: str, expected: str) -> Path:
    """``data.root`` as a path that exists, or a one-line ConfigError saying what is expected."""
    if root is None or str(root).strip() == "":
        raise ConfigError("data.root", f"{dataset} needs data.root=<folder or tarball> (expected {expected})")
    p = Path(os.path.expanduser(str(root)))
    if not p.exists():
        raise ConfigError("data.root", f"{str(root)!r} does not exist; {dataset} expects a folder or tarball with {expected}")
    if p.is_file() and not is_tarball(p):
        raise ConfigError("data.root", f"{str(root)!r} is a file but not a tarball (.tar, .tar.gz, .tgz, ...); "
                                       f"{dataset} expects a folder or tarball with {expected}")
    return p


def layout_error(root: str | os.PathLike, dataset: str, expected: str, files: "Files") -> ConfigError:
    """'root does not hold X: expected ...; found ...' with a few top-level entries as a hint."""
    tops = [t for t in files.tops if t and t != "/"]
    found = ", ".join(tops[:6]) + (", ..." if len(tops) > 6 else "") if tops else "nothing"
    return ConfigError("data.root", f"{str(root)!r} does not hold {dataset}: expected {expected}; found {found}")


#: one file of a source is at most this many bytes (read whole: CSV, idx, batches, images)
MAX_FILE_BYTES = 2 << 30
#: the wanted members of a tarball, read into memory, are at most this many bytes together
MAX_TAR_BYTES = 8 << 30
#: a decoded split (uint8 pixels) is at most this many bytes; data.image_size makes it smaller
MAX_DECODED_BYTES = 32 << 30


def _too_big(root: Path, name: str, size: int) -> ConfigError:
    return ConfigError("data.root", f"{str(root)!r}: {name} has {size} bytes, more than a data file may have "
                                    f"({MAX_FILE_BYTES})")


def read_bounded(f, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the stream ``f`` (read in 16 MiB chunks, so nothing of
    ``limit``'s size is allocated up front)."""
    parts, n = [], 0
    while n <= limit:
        chunk = f.read(min(1 << 24, limit + 1 - n))
        if not chunk:
            break
        parts.append(chunk)
        n += len(chunk)
    return b"".join(parts)


class Files:
    """The files of a source that a loader asked for: relative POSIX path -> bytes (read lazily from a folder)."""

    def __init__(self, root: Path, entries: dict[str, object], in_memory: bool, tops: Iterable[str] = ()) -> None:
        self.root = root
        self._entries = entries
        self._in_memory = in_memory
        self.tops = sorted(set(tops))   # top-level entries of the source, wanted or not (for error hints)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def read(self, name: str) -> bytes:
        e = self._entries[name]
        if self._in_memory:
            return e  # type: ignore[return-value]
        with open(e, "rb") as f:  # type: ignore[arg-type]
            size = os.fstat(f.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise _too_big(self.root, name, size)
            return f.read()


def scan(root: Path, want: Callable[[str], bool]) -> Files:
    """Every file under ``root`` (folder or tarball) whose relative path passes ``want``."""
    if root.is_dir():
        entries: dict[str, object] = {}
        tops = [e + ("/" if (root / e).is_dir() else "") for e in os.listdir(root)]
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, root)
            for name in filenames:
                rel = name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")
                if want(rel):
                    entries[rel] = os.path.join(dirpath, name)
        return Files(root, entries, in_memory=False, tops=tops)
    try:
        data: dict[str, object] = {}
        tar_tops: set[str] = set()
        total = 0
        with tarfile.open(root, "r:*") as tf:
            for m in tf:
                rel = m.name[2:] if m.name.startswith("./") else m.name
                tar_tops.add(rel.split("/", 1)[0] + ("/" if "/" in rel or m.isdir() else ""))
                if not m.isfile():
                    continue
                if want(rel):
                    if m.size > MAX_FILE_BYTES:
                        raise _too_big(root, rel, m.size)
                    total += m.size
                    if total > MAX_TAR_BYTES:
                        raise ConfigError("data.root", f"{str(root)!r}: its data files hold more than {MAX_TAR_BYTES} "
                                                       f"bytes; extract the tarball and give the folder as data.root")
                    f = tf.extractfile(m)
                    if f is not None:
                        data[rel] = f.read()
        return Files(root, data, in_memory=True, tops=tar_tops)
    except (tarfile.TarError, OSError, EOFError) as e:
        raise ConfigError("data.root", f"{str(root)!r} is not a readable tarball ({e})") from None


def has_ext(name: str, exts: Sequence[str] = IMAGE_EXTS) -> bool:
    return name.lower().endswith(tuple(exts))


def find_split_layout(names: Iterable[str], splits: Sequence[str],
                      exts: Sequence[str] = IMAGE_EXTS) -> tuple[str, dict[str, dict[str, list[str]]]] | None:
    """Find ``<prefix>/<split>/<class>/<file>`` for every split in ``splits``.

    Returns ``(prefix, {split: {class: [paths, sorted]}})`` for the prefix that holds the
    most images, or None when no prefix has all the splits.
    """
    by_prefix: dict[str, dict[str, dict[str, list[str]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for n in names:
        if not has_ext(n, exts):
            continue
        parts = n.split("/")
        if len(parts) < 3 or parts[-3] not in splits:
            continue
        prefix = "/".join(parts[:-3])
        by_prefix[prefix][parts[-3]][parts[-2]].append(n)
    best = None
    for prefix, tree in by_prefix.items():
        if not all(s in tree for s in splits):
            continue
        count = sum(len(v) for t in tree.values() for v in t.values())
        if best is None or count > best[0] or (count == best[0] and prefix < best[1]):
            best = (count, prefix)
    if best is None:
        return None
    tree = by_prefix[best[1]]
    return best[1], {s: {c: sorted(v) for c, v in sorted(tree[s].items())} for s in splits}


def decode_image(data: bytes, mode: str, size: int | None, center_crop: float | None = None):
    """Decode one image with Pillow to ``mode`` (RGB/L), optionally center-crop a fraction and resize to size²."""
    import warnings

    from PIL import Image

    with warnings.catch_warnings():   # beyond Pillow's MAX_IMAGE_PIXELS: refused, not decoded
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        img = Image.open(io.BytesIO(data))
    if size is not None and img.format == "JPEG":
        need = size if center_crop is None else int(round(size / center_crop))
        if min(img.size) >= 2 * need:
            img.draft(mode, (need, need))  # JPEG DCT scaling: a much faster decode for big shrinks
    img = img.convert(mode)
    if center_crop is not None and center_crop < 1.0:
        w, h = img.size
        cw, ch = int(round(w * center_crop)), int(round(h * center_crop))
        left, top = (w - cw) // 2, (h - ch) // 2
        img = img.crop((left, top, left + cw, top + ch))
    if size is not None and img.size != (size, size):
        img = img.resize((size, size), Image.BILINEAR)
    return img


def decode_images(files: Files, paths: Sequence[str], mode: str = "RGB", size: int | None = None,
                  center_crop: float | None = None, what: str = "images") -> np.ndarray:
    """Decode ``paths`` into one uint8 array ``[N, C, H, W]``.

    ``size=None`` keeps the first image's size and resizes any other image to it.
    """
    channels = 3 if mode == "RGB" else 1
    out: np.ndarray | None = None
    for i, p in enumerate(paths):
        try:
            img = decode_image(files.read(p), mode, size, center_crop)
        except ConfigError:
            raise
        except Exception as e:  # PIL raises many types for a bad file
            raise ConfigError("data.root", f"cannot decode {p!r} in {str(files.root)!r} ({type(e).__name__}: {e})") from None
        if out is None:
            w, h = img.size
            size = size or w
            need = len(paths) * h * w * channels
            if need > MAX_DECODED_BYTES:
                raise ConfigError("data.root", f"{len(paths)} {what} of {w}x{h} pixels in {str(files.root)!r} would "
                                               f"take {need} bytes (at most {MAX_DECODED_BYTES}); set data.image_size "
                                               f"to decode them smaller")
            out = np.empty((len(paths), h, w, channels), dtype=np.uint8)
        if img.size != (out.shape[2], out.shape[1]):
            from PIL import Image
            img = img.resize((out.shape[2], out.shape[1]), Image.BILINEAR)
        a = np.asarray(img, dtype=np.uint8)
        out[i] = a if a.ndim == 3 else a[:, :, None]
    if out is None:
        raise ConfigError("data.root", f"no {what} found in {str(files.root)!r}")
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2))


def channel_stats(x: np.ndarray, chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and std of uint8 images ``[N, C, H, W]`` on the [0, 1] scale (float64 sums)."""
    c = x.shape[1]
    s = np.zeros(c)
    s2 = np.zeros(c)
    for i in range(0, x.shape[0], chunk):
        b = x[i:i + chunk].astype(np.float64)
        s += b.sum(axis=(0, 2, 3))
        s2 += np.square(b).sum(axis=(0, 2, 3))
    n = x.shape[0] * x.shape[2] * x.shape[3]
    mean = s / n
    var = np.maximum(s2 / n - mean ** 2, 0.0)
    return mean / 255.0, np.sqrt(var) / 255.0


def image_arrays(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray,
                 class_names: Sequence[str]) -> dict[str, np.ndarray]:
    """The arrays a cached image data set stores (with the train split's channel statistics)."""
    mean, std = channel_stats(x_train)
    return {"x_train": x_train, "y_train": y_train.astype(np.int64), "x_test": x_test,
            "y_test": y_test.astype(np.int64), "class_names": np.array(list(class_names)),
            "mean": mean, "std": std}


def folder_split(files: Files, tree: dict[str, list[str]], classes: Sequence[str], mode: str, size: int | None,
                 center_crop: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Decode one split of a class-folder tree; labels follow ``classes``."""
    index = {c: i for i, c in enumerate(classes)}
    paths: list[str] = []
    labels: list[int] = []
    for c, ps in tree.items():
        paths += ps
        labels += [index[c]] * len(ps)
    x = decode_images(files, paths, mode, size, center_crop)
    return x, np.asarray(labels, dtype=np.int64)


def check_classes(root: Path, dataset: str, train: dict[str, list[str]], test: dict[str, list[str]],
                  test_name: str = "test") -> list[str]:
    """The sorted class folders; the test split may not have a class the train split lacks."""
    classes = sorted(train)
    extra = sorted(set(test) - set(train))
    if extra:
        raise ConfigError("data.root", f"{str(root)!r}: {dataset} {test_name}/ has class folders missing from train/: "
                                       f"{', '.join(extra[:5])}")
    if len(classes) < 2:
        raise ConfigError("data.root", f"{str(root)!r}: {dataset} needs at least 2 class folders under train/, "
                                       f"found {len(classes)}")
    return classes


def check_definition(files: Files, tree: dict[str, list[str]], root: Path, dataset: str, side: int, colour: bool,
                     samples: int = 8) -> None:
    """Refuse a source whose images do not fit the data set's definition (``side``×``side``
    pixels; colour or grey), checked on a few train images before anything is decoded —
    e.g. an MNIST tarball given as ``data.name=cifar10``."""
    from PIL import Image

    paths = [ps[i] for i in range(max(len(ps) for ps in tree.values())) for ps in tree.values() if i < len(ps)]
    sizes, modes = set(), set()
    for p in paths[:samples]:
        try:
            with Image.open(io.BytesIO(files.read(p))) as img:
                sizes.add(img.size)
                modes.add(img.mode)
        except Exception:            # undecodable files are reported by the full decode
            continue
    if not sizes:
        return
    wrong_size = sizes != {(side, side)}
    grey_only = modes <= {"L", "1", "I", "I;16", "F", "LA"}
    if wrong_size or (colour and grey_only):
        found = ", ".join(f"{w}x{h}" for w, h in sorted(sizes)) + (" grey" if grey_only else " colour")
        classes = sorted(tree)
        raise ConfigError("data.root", f"{str(root)!r} does not hold {dataset}: its images are {found} with classes "
                                       f"{', '.join(classes[:4])}{', ...' if len(classes) > 4 else ''}, {dataset} has "
                                       f"{side}x{side} {'colour' if colour else 'grey'} images; for your own image "
                                       f"folders use data.name=image_folder")


def to_dataset(arrays: dict[str, np.ndarray], name: str, augment: str):
    """An :class:`ArrayDataset` of uint8 pixels (tensors share the arrays' memory)."""
    import torch


    names = [str(s) for s in arrays["class_names"].tolist()]
    arrays = {k: (v if v.flags.writeable else v.copy()) for k, v in arrays.items()}
    return ArrayDataset(
        x_train=torch.from_numpy(np.ascontiguousarray(arrays["x_train"])),
        y_train=torch.from_numpy(np.ascontiguousarray(arrays["y_train"], dtype=np.int64)),
        x_test=torch.from_numpy(np.ascontiguousarray(arrays["x_test"])),
        y_test=torch.from_numpy(np.ascontiguousarray(arrays["y_test"], dtype=np.int64)),
        num_classes=len(names),
        class_names=names,
        name=name,
        mean=tuple(float(v) for v in arrays["mean"]),
        std=tuple(float(v) for v in arrays["std"]),
        augment=augment,
    )
