"""The protocol words of the distributed backend: the 32-byte payload-layout header sent
before a phase's first payload, the per-batch header of message sizes and dtypes, and the
bound on set-up data broadcast as JSON."""
from __future__ import annotations

import hashlib
import math
from typing import Sequence

import torch

#: First word of the header a node sends each peer before the first payload of a phase.
HEADER_MAGIC = 0x64656338  # "dec8"
#: Set-up data broadcast as JSON (run folder name, config) is at most this many bytes.
MAX_BROADCAST_BYTES = 1 << 20

#: dtype codes of the per-message size header (anything else is -1)
_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
           torch.int32, torch.int64, torch.bool)
#: first word of a size header
SIZES_MAGIC = 0x64387A73  # "d8zs"


def _size_header(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """int64 ``[1 + 2m]`` (CPU): magic, then (bytes, dtype code) of each of the m messages."""
    words = [SIZES_MAGIC]
    for t in tensors:
        words += [t.numel() * t.element_size(), _DTYPES.index(t.dtype) if t.dtype in _DTYPES else -1]
    return torch.tensor(words, dtype=torch.int64)


def _describe_sizes(h: torch.Tensor) -> str:
    words = h.tolist()
    if not words or words[0] != SIZES_MAGIC:
        return "no decent8 message header"
    parts = []
    for nbytes, code in zip(words[1::2], words[2::2]):
        name = str(_DTYPES[code]).replace("torch.", "") if 0 <= code < len(_DTYPES) else f"dtype #{code}"
        parts.append(f"{nbytes} B of {name}")
    return ", ".join(parts) or "no messages"


def spec_header(spec: dict[str, tuple[tuple[int, ...], torch.dtype]]) -> torch.Tensor:
    """int64 ``[4]``: magic, number of tensors, bytes per message, and a 48-bit
    fingerprint of the tensors' names, shapes and dtypes."""
    text = ";".join(f"{n}:{'x'.join(map(str, sh))}:{str(d).replace('torch.', '')}" for n, (sh, d) in sorted(spec.items()))
    nbytes = sum(math.prod(sh) * torch.empty((), dtype=d).element_size() for sh, d in spec.values())
    fp = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=6).digest(), "little")
    return torch.tensor([HEADER_MAGIC, len(spec), nbytes, fp], dtype=torch.int64)
