"""Decode once, then load arrays: a small on-disk cache of decoded data sets.

A data set decoded from JPEG/PNG/pickle/idx/CSV is saved as one uncompressed ``.npz``
under the cache folder (``data.cache_dir``; default ``$XDG_CACHE_HOME/decent8`` or
``~/.cache/decent8``). The file name holds a hash of the loader version, the options
that change the arrays (e.g. the image size) and the *source's* identity: the absolute
path, size and modification time of the tarball, or of every file under a folder. A
changed source therefore decodes afresh; stale files are never read. Files are written
atomically (temporary file + ``os.replace``), so concurrent runs at worst decode twice.
An unwritable cache folder only costs the decode time: a warning, then the run goes on.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Callable

import numpy as np

from ..atomic import atomic_path

#: bump when a loader's output changes, so old cache files are not reused
LOADER_VERSION = 1


def tokenizer_fingerprint(model_dir: Path) -> str:
    """Identity of a model folder's tokenizer files (names, sizes, modification times)."""
    h = hashlib.sha256(str(model_dir).encode())
    for f in sorted(model_dir.iterdir()):
        if f.is_file() and f.suffix in (".json", ".txt", ".model"):
            st = f.stat()
            h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "decent8"


def source_fingerprint(root: str | os.PathLike) -> str:
    """Identity of a source: path + size + mtime of the file, or of every file under the folder."""
    p = Path(root).resolve()
    if p.is_file():
        st = p.stat()
        return f"file:{p}:{st.st_size}:{st.st_mtime_ns}"
    h = hashlib.sha256()
    h.update(f"dir:{p}".encode())
    for dirpath, dirnames, filenames in os.walk(p):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            h.update(f"{os.path.relpath(full, p)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return "dir:" + h.hexdigest()


def cache_path(dataset: str, root: str | os.PathLike, options: dict, cache_dir: str | os.PathLike | None) -> Path:
    key = json.dumps({"v": LOADER_VERSION, "dataset": dataset, "source": source_fingerprint(root),
                      "options": options}, sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    folder = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    return folder / f"{dataset}-{digest}.npz"


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> bool:
    """Write ``arrays`` atomically; False (and a warning) when the folder is not writable."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.savez(f, **arrays)
        return True
    except OSError as e:  # an unwritable or full cache folder: decode again next time
        sys.stderr.write(f"decent8: warning: cannot write the data cache in {path.parent} ({e.strerror}); "
                         f"set data.cache_dir to a writable folder to skip decoding next time\n")
        return False


def load_npz(path: Path) -> dict[str, np.ndarray] | None:
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError):  # a damaged file: decode again
        return None


def cached(dataset: str, root: str | os.PathLike, options: dict, cache_dir: str | os.PathLike | None,
           decode: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays of ``decode()``, from the cache when a file for this exact source exists."""
    path = cache_path(dataset, root, options, cache_dir)
    arrays = load_npz(path)
    if arrays is None:
        arrays = decode()
        save_npz(path, arrays)
    return arrays
