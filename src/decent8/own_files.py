"""Files decent8 wrote, told from files the user had: an output path that already holds a
file decent8 did not write is refused in one line, and nothing is changed.

decent8 marks what it writes: a figure's PNG carries ``Software: decent8`` (a tEXt
chunk), its PDF ``/Creator (decent8)``, a markdown report ends with :data:`MD_MARK`. A
file with the mark may be rewritten; any other existing file (or a folder) is the user's.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Iterable

from .errors import ConfigError

MARK = "decent8"
MD_MARK = "<!-- written by decent8 -->"
#: the mark read back: at most this many bytes of a file are looked at
_READ_LIMIT = 1 << 22


def figure_metadata(fmt: str) -> dict[str, str]:
    """``savefig(metadata=…)`` that marks a figure as decent8's."""
    # no creation date in a PDF: the same figure is the same bytes (a resumed run's equal an uninterrupted one's)
    return {"Software": MARK} if fmt == "png" else {"Creator": MARK, "CreationDate": None} if fmt == "pdf" else {}


def mark_markdown(text: str) -> str:
    return text if text.rstrip().endswith(MD_MARK) else text.rstrip("\n") + "\n\n" + MD_MARK + "\n"


def _png_software(data: bytes) -> str | None:
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return None
    i = 8
    while i + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[i:i + 8])
        body = data[i + 8:i + 8 + length]
        if kind == b"tEXt" and b"\0" in body:
            key, value = body.split(b"\0", 1)
            if key == b"Software":
                return value.decode("latin-1")
        if kind == b"IEND":
            break
        i += 12 + length
    return None


def is_own(path: str | os.PathLike) -> bool:
    """True if ``path`` is a file decent8 wrote (it carries decent8's mark)."""
    p = Path(path)
    try:
        if not p.is_file() or p.is_symlink():
            return False
        with open(p, "rb") as f:
            data = f.read(_READ_LIMIT)
    except OSError:
        return False
    suffix = p.suffix.lower()
    if suffix == ".png":
        return _png_software(data) == MARK
    if suffix == ".pdf":
        return b"/Creator (" + MARK.encode() + b")" in data
    if suffix == ".md":
        return data.rstrip().endswith(MD_MARK.encode())
    return False


def refuse_foreign(paths: Iterable[str | os.PathLike], option: str) -> None:
    """One line (exit 2) naming the first of ``paths`` that exists and is not decent8's."""
    for p in paths:
        p = Path(p)
        if (p.exists() or p.is_symlink()) and not is_own(p):
            raise ConfigError(option, f"{os.fspath(p)} exists and was not written by decent8; it is left as it is "
                                      f"(nothing was written): choose another path or move it away")


__all__ = ["MARK", "MD_MARK", "figure_metadata", "mark_markdown", "is_own", "refuse_foreign"]
