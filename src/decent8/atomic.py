"""Atomic file writes: a temporary file beside the target, then ``os.replace``.

A killed process never leaves a half-written file behind: readers see the old
content or the new one.
"""
from __future__ import annotations

import errno
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from .errors import first_line


@contextmanager
def atomic_path(path: str | os.PathLike, mode: int = 0o644) -> Iterator[str]:
    """Yield a temporary path to write; it replaces ``path`` when the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, mode)  # mkstemp makes files private
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)


def atomic_torch_save(obj: Any, path: str | os.PathLike) -> None:
    """``torch.save`` atomically. A failed write (a full disk: torch's zip writer raises a
    RuntimeError such as "unexpected pos …") becomes an ``OSError`` naming the file and the
    space left on its disk; the temporary file is removed."""
    import torch

    try:
        with atomic_path(path) as tmp:
            torch.save(obj, tmp)
    except RuntimeError as e:
        raise OSError(errno.EIO, f"could not write the file ({_room(Path(path).parent)}; "
                                 f"torch.save: {first_line(e, 120)})", str(path)) from None


def _room(folder: Path) -> str:
    """Why a write may have failed: the file-size limit (``ulimit -f``) when one is set,
    else the space left on the disk."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
        if soft != resource.RLIM_INFINITY:
            return f"files are limited to {soft / 2**20:.1f} MiB (ulimit -f)"
    except (ImportError, OSError, ValueError):  # no resource module (Windows)
        pass
    return f"{shutil.disk_usage(folder).free / 2**30:.1f} GiB free on its disk"
