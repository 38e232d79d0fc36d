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

from typing import Any, Mapping

from ..errors import ConfigError
from ..layout import ParamLayout
from .base import Compressor, TensorSpec
from .identity import IdentityCompressor
from .payload import Payload
from .quantize import QuantizeCompressor
from .randomk import RandomKCompressor
from .sign import SignCompressor, pack_bits, unpack_bits
from .topk import INDEX_DTYPES, SparseCompressor, TopKCompressor, check_ratio, keep_count

from ..config import SHARED_OPTIONS
from ..registry import check_options, compressors, construct, keyword_options

#: option names every compressor accepts (the compression group's former fields) -> the value
#: they stand for when not given: given to a compressor whose constructor takes them, dropped
#: for one that does not
OPTIONS: dict[str, Any] = SHARED_OPTIONS["compression"]


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


def compressor_options(name: str, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The keyword arguments compressor ``name`` (a registered name, an alias or a user's
    ``pkg.module:Class``) is built with: ``given`` (``compression.<kwarg>=value``) checked against
    its constructor's signature and type hints (:func:`decent8.registry.check_options`), its
    fixed ones (``topk_int8``: ``value_bits=8``), and defaults for the rest: the value of
    :data:`OPTIONS` for those names (``ratio`` 0.99 …), else the signature's. The names of
    :data:`OPTIONS` its constructor does not take are dropped (``compression.ratio`` for
    ``identity``: every stored config holds them all). What the resolved config records."""
    entry = compressors.entry(_key(name))
    takes = keyword_options(entry.obj, skip=1)
    given = {k: v for k, v in (given or {}).items() if k in takes or k not in OPTIONS}
    what = f"compression={entry.name}"
    options = {**check_options(entry.obj, given, "compression", what, skip=1), **entry.info.get("fixed", {})}
    out: dict[str, Any] = {}
    for key, param in takes.items():   # in the signature's order (config.yaml)
        if key in options:
            out[key] = options[key]
        elif key in OPTIONS:
            out[key] = OPTIONS[key]
        elif param.default is not param.empty:
            out[key] = param.default
    return {**out, **{k: v for k, v in options.items() if k not in out}}


def make_compressor(
    name: str,
    layout: ParamLayout,
    ratio: float | None = None,
    value_bits: int | None = None,
    bits: int | None = None,
    index_dtype: str | None = None,
    stochastic: bool | None = None,
    params: Mapping[str, Any] | None = None,
) -> Compressor:
    """Build a compressor by name (``decent8 list``; a registered name, an alias or a user's
    ``pkg.module:Class``) as ``Class(layout, **options)``, the options of
    :func:`compressor_options`: ``params`` (``compression.<kwarg>=value``) and the named ones
    below where given.

    ``ratio`` (fraction dropped, ``[0, 1)``; default 0.99), ``value_bits`` (8 or 32) and
    ``index_dtype`` (auto/int16/int32) are for the sparse ones (``topk_int8`` forces
    ``value_bits=8``); ``bits`` and ``stochastic`` (stochastic rounding) for
    ``quantize``. Bad values raise :class:`~decent8.errors.ConfigError`.
    """
    named = dict(ratio=ratio, value_bits=value_bits, bits=bits, index_dtype=index_dtype, stochastic=stochastic)
    given = {**{k: v for k, v in named.items() if v is not None}, **dict(params or {})}
    entry = compressors.entry(_key(name))
    if entry.builtin:
        return construct(entry.obj, layout, given=compressor_options(name, given), group="compression",
                         what=f"compression={entry.name}")
    try:
        return construct(entry.obj, layout, given=compressor_options(name, given), group="compression",
                         what=f"compression={name}")
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError("compression", f"{name} failed: {type(e).__name__}: {e}") from None


def user_compressor(path: str, layout: ParamLayout, **options) -> Compressor:
    """``compression=pkg.module:Class`` (docs/extending.md): :func:`make_compressor` of a user's class."""
    return make_compressor(path, layout, **options)


__all__ = [
    "ALIASES", "CLASSES", "OPTIONS", "compressor_class", "compressor_options", "user_compressor",
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
