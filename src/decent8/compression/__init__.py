"""Compression operators: what goes on the wire (SPEC §4, docs/architecture.md "Payloads").

Every compressor works layer-wise over a :class:`~decent8.layout.ParamLayout`, maps a
flat ``[k, d]`` message to a :class:`Payload` of tensors with declared dtypes, and
decodes payloads back to dense float32 ``[m, d]``. ``nbytes()`` is the size of one
node's payload. Build one with :func:`make_compressor`.

=============  ==========================================  ==========================
name           payload per node                            bytes per node
=============  ==========================================  ==========================
identity/none  values f32 [d]                              4·d
topk           values f32 [K], indices i16/i32 [K]         (4 + i)·K
topk_int8      values u8 [K], indices [K], scale/zero [L]  (1 + i)·K + 8·L
randomk        values f32 [K], indices i16/i32 [K]         (4 + i)·K
quantize/int8  values u8 [d], scale f32 [L], zero f32 [L]  d + 8·L
sign           bits u8 [ceil(d/8)], scale f32 [L]          ceil(d/8) + 4·L
=============  ==========================================  ==========================

K = Σ_l max(1, floor(numel_l·(1 − ratio))), L = number of tensors, i = 2 (int16
indices, every tensor ≤ 65536 elements) or 4 (int32).
"""
from __future__ import annotations

from ..errors import ConfigError, choice_error
from ..layout import ParamLayout
from .base import Compressor, TensorSpec
from .identity import IdentityCompressor
from .payload import Payload
from .quantize import QuantizeCompressor
from .randomk import RandomKCompressor
from .sign import SignCompressor, pack_bits, unpack_bits
from .topk import INDEX_DTYPES, SparseCompressor, TopKCompressor, check_ratio, keep_count

#: Canonical compressor names accepted by :func:`make_compressor`.
COMPRESSORS: tuple[str, ...] = ("identity", "topk", "topk_int8", "randomk", "quantize", "sign")
#: Alternative spellings.
ALIASES: dict[str, str] = {"none": "identity", "int8": "quantize"}


def user_compressor(path: str, layout: ParamLayout, **options) -> Compressor:
    """``compression=pkg.module:Class`` (docs/extending.md): a :class:`Compressor` subclass,
    built as ``Class(layout, **the compression options its constructor names)`` (ratio,
    value_bits, bits, index_dtype, stochastic)."""
    import inspect

    from ..plugins import load_factory

    cls = load_factory(path, option="compression")
    if not (isinstance(cls, type) and issubclass(cls, Compressor)):
        raise ConfigError("compression", f"{path} is not a subclass of decent8.compression.Compressor")
    try:
        takes = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        takes = {}
    kwargs = {k: v for k, v in options.items() if k in takes}
    try:
        return cls(layout, **kwargs)
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError("compression", f"{path} failed: {type(e).__name__}: {e}") from None


#: built-in name -> class (read for the declared state without building one)
CLASSES: dict[str, type[Compressor]] = {"identity": IdentityCompressor, "topk": TopKCompressor,
                                        "topk_int8": TopKCompressor, "randomk": RandomKCompressor,
                                        "quantize": QuantizeCompressor, "sign": SignCompressor}


def compressor_class(name: str) -> type[Compressor]:
    """The class of a built-in compressor name or alias; a user's (``pkg.module:Class``) is
    imported. One line for an unknown name."""
    from ..plugins import is_import_path, load_factory

    if is_import_path(name):
        cls = load_factory(name, option="compression")
        if not (isinstance(cls, type) and issubclass(cls, Compressor)):
            raise ConfigError("compression", f"{name} is not a subclass of decent8.compression.Compressor")
        return cls
    key = name.strip().lower() if isinstance(name, str) else name
    key = ALIASES.get(key, key)
    if key not in CLASSES:
        raise choice_error("compression", name, COMPRESSORS + tuple(ALIASES))
    return CLASSES[key]


def make_compressor(
    name: str,
    layout: ParamLayout,
    ratio: float = 0.99,
    value_bits: int = 32,
    bits: int = 8,
    index_dtype: str = "auto",
    stochastic: bool = False,
) -> Compressor:
    """Build a compressor by name (see :data:`COMPRESSORS` and :data:`ALIASES`).

    ``ratio`` (fraction dropped, ``[0, 1)``), ``value_bits`` (8 or 32) and
    ``index_dtype`` (auto/int16/int32) are for the sparse ones (``topk_int8`` forces
    ``value_bits=8``); ``bits`` and ``stochastic`` (stochastic rounding) for
    ``quantize``. Bad values raise :class:`~decent8.errors.ConfigError`.
    """
    from ..plugins import is_import_path

    if is_import_path(name):
        return user_compressor(name, layout, ratio=ratio, value_bits=value_bits, bits=bits,
                               index_dtype=index_dtype, stochastic=stochastic)
    key = name.strip().lower() if isinstance(name, str) else name
    key = ALIASES.get(key, key)
    if key not in COMPRESSORS:
        raise choice_error("compression", name, COMPRESSORS + tuple(ALIASES))
    ratio = check_ratio(ratio)
    if isinstance(value_bits, bool) or value_bits not in (8, 32):
        raise ConfigError("compression.value_bits", f"must be 8 or 32, got {value_bits!r}")
    if index_dtype not in INDEX_DTYPES:
        raise choice_error("compression.index_dtype", index_dtype, INDEX_DTYPES)

    if key == "identity":
        return IdentityCompressor(layout)
    if key == "topk":
        return TopKCompressor(layout, ratio, value_bits=value_bits, index_dtype=index_dtype)
    if key == "topk_int8":
        return TopKCompressor(layout, ratio, value_bits=8, index_dtype=index_dtype)
    if key == "randomk":
        return RandomKCompressor(layout, ratio, index_dtype=index_dtype)
    if key == "quantize":
        return QuantizeCompressor(layout, bits=bits, stochastic=stochastic)
    return SignCompressor(layout)


__all__ = [
    "ALIASES", "CLASSES", "compressor_class", "user_compressor",
    "COMPRESSORS",
    "Compressor",
    "IdentityCompressor",
    "Payload",
    "QuantizeCompressor",
    "RandomKCompressor",
    "SignCompressor",
    "SparseCompressor",
    "TensorSpec",
    "TopKCompressor",
    "check_ratio",
    "keep_count",
    "make_compressor",
    "pack_bits",
    "unpack_bits",
]
