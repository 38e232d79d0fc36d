"""Algorithm names (SPEC §3): the algorithm registry (:data:`decent8.registry.algorithms`).

Each built-in algorithm registers itself in its own file (``@algorithms.register("name",
order=…, info=AlgorithmInfo(…))`` on its class: the class is the update rule, the record
:class:`~.info.AlgorithmInfo` its facts; every module of this package is imported on the first lookup),
so a new built-in algorithm is one new file. A user's algorithm is named by its import
path, ``algorithm=pkg.module:Class`` (imported like ``model=pkg.module:factory``, and on
``--resume`` only when named again: :mod:`decent8.train.resume_trust`), or registered
with ``decent8.register("algorithm", "name", info=AlgorithmInfo(…))``; one registered
without a record, or named by import path, gets its nearest registered base class's record
without the display name, else its family's (:func:`info_of`).
This module imports without torch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..config import DEFAULT_ALGORITHM
from ..errors import ConfigError
from ..registry import algorithms
from .info import AlgorithmInfo, family_info, replace

if TYPE_CHECKING:  # pragma: no cover
    from .base import Algorithm


def algorithm_names() -> tuple[str, ...]:
    """Every registered name, built-ins first."""
    return algorithms.names()


def registered_class(name: str) -> "type[Algorithm] | None":
    """The class of a registered name, or None: never imports a user's module (for reading
    stored results, which may name code by import path)."""
    entry = algorithms.registered(name)
    return entry.obj if entry is not None else None


def _record(entry_info: dict, name: str) -> AlgorithmInfo | None:
    info = entry_info.get("info")
    if info is not None and not isinstance(info, AlgorithmInfo):
        raise ConfigError("algorithm", f"{name!r} is registered with info={type(info).__name__}, not an "
                                       f"decent8.algorithms.AlgorithmInfo")
    return info


def info_of(cls: type) -> AlgorithmInfo:
    """The record ``cls`` is registered with; for a class registered without one (or named by
    import path) the record of its nearest registered base class without the display name (a
    subclass of Choco-SGD keeps Choco's facts, not its name), else its family's
    (:func:`.info.family_info`)."""
    records = {id(e.obj): _record(e.info, n) for n, e in algorithms.items()}
    for klass in cls.__mro__:
        info = records.get(id(klass))
        if info is not None:
            return info if klass is cls else replace(info, display_name="")
    return family_info(cls)


def algorithm_info(name: str) -> AlgorithmInfo:
    """The facts of algorithm ``name`` (a registered name, or an import path: imported like
    :func:`algorithm_class`); one-line :class:`~decent8.errors.ConfigError` for an unknown name."""
    entry = algorithms.entry(name)
    info = _record(entry.info, entry.name)
    return info if info is not None else info_of(entry.obj)


def registered_info(name: str) -> AlgorithmInfo | None:
    """The facts of a registered name, or None: never imports a user's module (stored results)."""
    return algorithm_info(name) if algorithms.registered(name) is not None else None


def display_name(name: str) -> str:
    """A registered algorithm's display name; any other value (an import path in a stored
    result, say) unchanged: nothing is imported beyond decent8's own modules."""
    info = registered_info(name)
    return info.label(name) if info is not None else name


def display_order() -> tuple[str, ...]:
    """The registered algorithms that have a display name, in registry order (report columns)."""
    return tuple(n for n in algorithm_names() if algorithm_info(n).display_name)


def names_of(family: str) -> tuple[str, ...]:
    """The registered names of one family ("gossip", "ring all-reduce")."""
    return tuple(n for n in algorithm_names() if algorithm_info(n).family == family)


def register(name: str, cls: type, info: AlgorithmInfo | None = None) -> type:
    """Make ``cls`` (an :class:`~.base.Algorithm` subclass) available as ``algorithm=name``,
    with the facts ``info`` (None: its family's)."""
    return algorithms.register(name, cls, **({"info": info} if info is not None else {}))


def algorithm_class(name: str) -> "type[Algorithm]":
    """The class of ``name``: a registered name or an import path ``pkg.module:Class``
    (one-line :class:`~decent8.errors.ConfigError` otherwise)."""
    return algorithms.lookup(name)


__all__ = ["DEFAULT_ALGORITHM", "algorithm_names", "registered_class", "display_name", "display_order", "register",
           "algorithm_class", "algorithm_info", "registered_info", "info_of", "names_of", "AlgorithmInfo"]
