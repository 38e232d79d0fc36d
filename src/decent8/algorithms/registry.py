"""Algorithm names (SPEC §3): the algorithm registry (:data:`decent8.registry.algorithms`).

Each built-in algorithm registers itself in its own file (``@algorithms.register("name",
order=…)`` on its class; every module of this package is imported on the first lookup),
so a new built-in algorithm is one new file. A user's algorithm is named by its import
path, ``algorithm=pkg.module:Class`` (imported like ``model=pkg.module:factory``, and on
``--resume`` only when named again: :mod:`decent8.train.resume_trust`), or registered
with ``decent8.register("algorithm", "name")``. This module imports without torch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..config import DEFAULT_ALGORITHM
from ..registry import algorithms

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


def display_name(name: str) -> str:
    """A registered algorithm's display name; any other value (an import path in a stored
    result, say) unchanged: nothing is imported beyond decent8's own modules."""
    cls = registered_class(name)
    return cls.label() if cls is not None else name


def display_order() -> tuple[str, ...]:
    """The registered algorithms that have a display name, in registry order (report columns)."""
    return tuple(n for n in algorithm_names() if algorithms[n].obj.display_name)


def register(name: str, cls: type) -> type:
    """Make ``cls`` (an :class:`~.base.Algorithm` subclass) available as ``algorithm=name``."""
    return algorithms.register(name, cls)


def algorithm_class(name: str) -> "type[Algorithm]":
    """The class of ``name``: a registered name or an import path ``pkg.module:Class``
    (one-line :class:`~decent8.errors.ConfigError` otherwise)."""
    return algorithms.lookup(name)


__all__ = ["DEFAULT_ALGORITHM", "algorithm_names", "registered_class", "display_name", "display_order", "register", "algorithm_class"]
