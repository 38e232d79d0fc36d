"""The compressor a run actually puts on the wire (``compression.wire``, docs/algorithms.md §4).

Training precision and wire precision are separate choices. ``compression.wire``:

- ``fp32``: the named compressor as it is — dense messages as float32, top-k with
  ``compression.value_bits`` (32 by default) — also when training in 8 bits (the
  setting of the paper's reference code);
- ``int8``: the 8-bit counterpart — a dense message as ``quantize`` (uint8 + per-tensor
  scale/zero), top-k as ``topk_int8`` (uint8 values) — also at ``precision=fp32``;
- ``auto``: ``int8`` at ``precision=int8`` (SPEC §4: "we send 8-bit"), ``fp32`` otherwise.

The wire applies to the compressors with both formats (identity/none, topk); the others
(quantize, random-k, sign, a user's) have one wire format, ``auto`` only. The resolved
config records the concrete ``fp32``/``int8`` (:func:`resolve_wire`), so a config.yaml
reruns on the same wire whatever ``auto`` means later. ``decent8 train``, the cost model
and the simulated clock all go through :func:`wire_compression`.
"""
from __future__ import annotations

from ..config import SHARED_OPTIONS, WIRES
from ..errors import ConfigError, choice_error

#: the fp32 wire format → its 8-bit counterpart
INT8_WIRE = {"identity": "quantize", "none": "quantize", "topk": "topk_int8"}


def _key(name: object) -> object:
    return name.strip().lower() if isinstance(name, str) else name


def check_wire(wire: object) -> str:
    """``compression.wire`` is one of :data:`WIRES` (one line otherwise)."""
    if wire not in WIRES:
        raise choice_error("compression.wire", wire, WIRES)
    return str(wire)


def resolve_wire(name: str, precision: str, wire: str = "auto", value_bits: int = 32) -> str:
    """The concrete wire of compressor ``name``: ``fp32`` or ``int8`` for the compressors
    with both formats, ``auto`` for the others (their one format). One-line errors for a
    wire the compressor cannot honour."""
    check_wire(wire)
    key = _key(name)
    if key not in INT8_WIRE:
        if wire != "auto":
            raise ConfigError("compression.wire", f"{wire} applies to compression=identity, none, topk (dense or "
                                                  f"top-k values in 32 or 8 bits); compression={name} has its own "
                                                  f"wire format: use compression.wire=auto")
        return "auto"
    if key == "topk" and value_bits == 8:     # top-k with 8-bit values is the int8 wire already
        if wire == "fp32":
            raise ConfigError("compression.wire", "fp32 sends top-k values in 32 bits, but compression.value_bits=8; "
                                                  "use compression.value_bits=32 or compression.wire=int8")
        return "int8"
    if wire == "auto":
        return "int8" if precision == "int8" else "fp32"
    return wire


def value_bits_of(params: dict) -> int:
    """``compression.value_bits`` of a config's compressor options (``compression.params``;
    32 when not given)."""
    return params.get("value_bits", SHARED_OPTIONS["compression"]["value_bits"])


def wire_compression(name: str, precision: str, wire: str = "auto", value_bits: int = 32) -> str:
    """The compressor actually used (module docstring): the 8-bit counterpart of ``name``
    when its wire resolves to ``int8``, ``name`` otherwise."""
    if resolve_wire(name, precision, wire, value_bits) == "int8":
        return INT8_WIRE[_key(name)]
    return name


__all__ = ["INT8_WIRE", "WIRES", "check_wire", "resolve_wire", "value_bits_of", "wire_compression"]
