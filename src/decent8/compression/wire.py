"""The compressor a run actually puts on the wire: with ``precision=int8`` the fp32 wire
format becomes its 8-bit counterpart (what ``decent8 train``, the cost model and the
simulated clock all use)."""
from __future__ import annotations

#: precision=int8 sends 8-bit messages: the fp32 wire format → its 8-bit counterpart
INT8_WIRE = {"identity": "quantize", "none": "quantize", "topk": "topk_int8"}


def wire_compression(name: str, precision: str) -> str:
    """The compressor actually used: with ``precision=int8`` the gossip messages travel as
    8-bit values — a dense message as ``quantize`` (uint8 + per-tensor scale/zero), top-k
    as ``topk_int8``; other compressors (already ≤ 8 bit, or random-k) are kept."""
    key = name.strip().lower() if isinstance(name, str) else name
    if precision == "int8":
        return INT8_WIRE.get(key, name)
    return name


__all__ = ["INT8_WIRE", "wire_compression"]
