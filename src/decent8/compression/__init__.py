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

from ..registry import compressors, construct

#: the compression group's typed options, given to a compressor whose constructor names them
OPTIONS = ("ratio", "value_bits", "bits", "index_dtype", "stochastic")


def __getattr__(name: str):
    """``COMPRESSORS`` (registered names), ``ALIASES`` (alias -> name), ``CLASSES`` (name ->
    class): read from the registry when asked, so that a compressor registered later is in them."""
    if name == "COMPRESSORS":
        return compressors.names()
    if name == "ALIASES":
        return compressors.aliases()
    if name == "CLASSES":
        return {n: e.obj for n, e in compressors.items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def compressor_class(name: str) -> type[Compressor]:
    """The class of a registered compressor name or alias; a user's (``pkg.module:Class``) is
    imported. One line for an unknown name."""
    return compressors.lookup(_key(name))


def _key(name: object) -> object:
    """A registered name as written (any case, spaces around), else ``name`` unchanged."""
    if isinstance(name, str) and compressors.canonical(name.strip().lower()) is not None:
        return name.strip().lower()
    return name


def make_compressor(
    name: str,
    layout: ParamLayout,
    ratio: float = 0.99,
    value_bits: int = 32,
    bits: int = 8,
    index_dtype: str = "auto",
    stochastic: bool = False,
    params: dict | None = None,
) -> Compressor:
    """Build a compressor by name (``decent8 list``; a registered name, an alias or a user's
    ``pkg.module:Class``) as ``Class(layout, **options)``: the options below that its
    constructor names, and ``params`` (``compression.<kwarg>=value``), each checked against
    its signature and type hints (:func:`decent8.registry.construct`).

    ``ratio`` (fraction dropped, ``[0, 1)``), ``value_bits`` (8 or 32) and
    ``index_dtype`` (auto/int16/int32) are for the sparse ones (``topk_int8`` forces
    ``value_bits=8``); ``bits`` and ``stochastic`` (stochastic rounding) for
    ``quantize``. Bad values raise :class:`~decent8.errors.ConfigError`.
    """
    entry = compressors.entry(_key(name))
    config = dict(ratio=ratio, value_bits=value_bits, bits=bits, index_dtype=index_dtype, stochastic=stochastic)
    if entry.builtin:
        ratio = check_ratio(ratio)
        if isinstance(value_bits, bool) or value_bits not in (8, 32):
            raise ConfigError("compression.value_bits", f"must be 8 or 32, got {value_bits!r}")
        if index_dtype not in INDEX_DTYPES:
            raise choice_error("compression.index_dtype", index_dtype, INDEX_DTYPES)
        config.update(ratio=ratio, **entry.info.get("fixed", {}))
        return construct(entry.obj, layout, given=params, config=config, group="compression",
                         what=f"compression={entry.name}")
    try:
        return construct(entry.obj, layout, given=params, config=config, group="compression",
                         what=f"compression={name}")
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError("compression", f"{name} failed: {type(e).__name__}: {e}") from None


def user_compressor(path: str, layout: ParamLayout, **options) -> Compressor:
    """``compression=pkg.module:Class`` (docs/extending.md): :func:`make_compressor` of a user's class."""
    return make_compressor(path, layout, **options)


__all__ = [
    "ALIASES", "CLASSES", "OPTIONS", "compressor_class", "user_compressor",
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
