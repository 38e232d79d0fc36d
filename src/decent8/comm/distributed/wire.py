"""The protocol words of the distributed backend: the 32-byte payload-layout header sent
before a phase's first payload, the per-batch header of message sizes and dtypes, the
40-byte trailer that ends every message on the wire (its body's bytes, dtype and shape:
the receiver checks what actually arrived against what the header announced, in a fresh
buffer with room to spare, so a short, long or mistyped message is named, never read),
and the bound on set-up data broadcast as JSON."""
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


# ---------------------------------------------------------------- message frames
#: first and last word of the trailer that ends every message on the wire
FRAME_MAGIC = 0x64387472  # "d8tr"
FRAME_END = 0x64386564    # "d8ed"
#: the trailer: magic, body bytes, dtype code, shape fingerprint, end mark (5 int64 words)
TRAILER_BYTES = 40


def _code(dtype: torch.dtype) -> int:
    return _DTYPES.index(dtype) if dtype in _DTYPES else -1


def _shape_print(shape: Sequence[int]) -> int:
    return int.from_bytes(hashlib.blake2b("x".join(map(str, shape)).encode(), digest_size=6).digest(), "little")


def _trailer(t: torch.Tensor) -> torch.Tensor:
    return torch.tensor([FRAME_MAGIC, t.numel() * t.element_size(), _code(t.dtype), _shape_print(t.shape), FRAME_END],
                        dtype=torch.int64)


def frame(t: torch.Tensor) -> torch.Tensor:
    """``t``'s bytes followed by its trailer (uint8, on ``t``'s device): what goes on the wire."""
    body = t.contiguous().reshape(-1).view(torch.uint8)
    return torch.cat([body, _trailer(t).to(t.device).view(torch.uint8)])


def slack_bytes(nbytes: int, backend: str) -> int:
    """Spare room of a receive buffer beyond body and trailer: gloo aborts the process on a
    message longer than the buffer, so a message up to this much longer is received and
    named; NCCL's sends and receives must match in size (no room)."""
    return 0 if backend == "nccl" else 4096 + min(nbytes, 1 << 20)


def receive_buffer(t: torch.Tensor, backend: str) -> torch.Tensor:
    """A fresh uint8 buffer for a message into ``t``: room for the body, the trailer and the
    slack, everything after the body zeroed (a short message leaves no valid trailer)."""
    nbytes = t.numel() * t.element_size()
    raw = torch.empty(nbytes + TRAILER_BYTES + slack_bytes(nbytes, backend), dtype=torch.uint8, device=t.device)
    raw[nbytes:].zero_()
    return raw


def _describe(nbytes: int, code: int, shape_fp: int, shape: Sequence[int] | None = None) -> str:
    name = str(_DTYPES[code]).replace("torch.", "") if 0 <= code < len(_DTYPES) else f"dtype #{code}"
    return f"{nbytes} B of {name}" + (f" {list(shape)}" if shape is not None else "")


def unframe(raw: torch.Tensor, into: torch.Tensor) -> str | None:
    """Check a received frame against what was announced for ``into`` (bytes, dtype, shape)
    and copy its body there; a reason (text) when it does not match, ``into`` untouched."""
    nbytes = into.numel() * into.element_size()
    tail = raw[nbytes:].cpu()
    words = tail[:TRAILER_BYTES].clone().view(torch.int64).tolist()
    want = _trailer(into).tolist()
    announced = _describe(nbytes, want[2], want[3], into.shape)
    if words[0] != FRAME_MAGIC or words[4] != FRAME_END:
        if bool(tail[TRAILER_BYTES:].any()):
            return f"a message longer than the announced {announced}"
        return f"a message shorter than the announced {announced} (or a damaged one)"
    if words[1:4] != want[1:4]:
        return f"{_describe(words[1], words[2], words[3])} (another dtype or shape) where its header announced {announced}"
    if bool(tail[TRAILER_BYTES:].any()):
        return f"a message longer than the announced {announced}"
    into.copy_(raw[:nbytes].view(into.dtype).view(into.shape))
    return None
