"""The one registry of algorithms, gossip and all-reduce alike (SPEC §3).

A name maps to one :class:`~decent8.algorithms.base.Algorithm` subclass. Built-in
algorithms are listed here as ``module:Class`` inside this package and imported on
first use, so this module (and ``decent8.algorithms``) imports without torch; a user's
algorithm is named by its import path, ``algorithm=pkg.module:Class`` (imported like
``model=pkg.module:factory``, and on ``--resume`` only when named again:
:mod:`decent8.train.resume_trust`), or registered with :func:`register`.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..config import DEFAULT_ALGORITHM
from ..errors import ConfigError, choice_error

if TYPE_CHECKING:  # pragma: no cover
    from .base import Algorithm

#: built-in name -> "module:Class" in this package (one algorithm per file)
#: (the paper's algorithms first, in the order of its tables)
_BUILTIN: dict[str, str] = {
    "dpsgd": "dpsgd:DPSGD",
    "deepsqueeze": "deepsqueeze:DeepSqueeze",
    "choco": "choco:ChocoSGD",
    "sgp": "dpsgd:SGP",
    "sparse_push": "deepsqueeze:SparsePush",
    "choco_push": "choco:ChocoPush",
    # heterogeneity-robust algorithms (docs/results/heterogeneity.md)
    "gt": "gt:GradientTracking",
    "d2": "d2:D2",
    "gut": "gut:GUT",
    "qg_gutm": "gut:QGGUTm",
    "relaysgd": "relaysgd:RelaySGD",
    # asynchronous gossip: an event-driven run (train/async_gossip.py), simulator only
    "adpsgd": "adpsgd:ADPSGD",
    # all-reduce algorithms (docs/algorithms.md §10)
    "psgd": "psgd:PSGD",
    "marsit": "marsit:Marsit",
    "signsgd": "signsgd:SignSGD",
    "ef_signsgd": "ef_signsgd:EFSignSGD",
}
_REGISTERED: dict[str, type] = {}


def algorithm_names() -> tuple[str, ...]:
    """Every registered name, built-ins first."""
    return tuple(_BUILTIN) + tuple(n for n in _REGISTERED if n not in _BUILTIN)


def registered_class(name: str) -> "type[Algorithm] | None":
    """The class of a registered name, or None: never imports a user's module (for reading
    stored results, which may name code by import path)."""
    if name in _BUILTIN or name in _REGISTERED:
        return algorithm_class(name)
    return None


def display_name(name: str) -> str:
    """A registered algorithm's display name; any other value (an import path in a stored
    result, say) unchanged: nothing is imported beyond decent8's own modules."""
    cls = registered_class(name)
    return cls.label() if cls is not None else name


def display_order() -> tuple[str, ...]:
    """The registered algorithms that have a display name, in registry order (report columns)."""
    return tuple(n for n in algorithm_names() if n in _BUILTIN or n in _REGISTERED
                 if algorithm_class(n).display_name)


def register(name: str, cls: type) -> type:
    """Make ``cls`` (an :class:`~.base.Algorithm` subclass) available as ``algorithm=name``."""
    from .base import Algorithm

    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise ConfigError("algorithm", f"{cls!r} is not a subclass of decent8.algorithms.Algorithm")
    if name in _BUILTIN:
        raise ConfigError("algorithm", f"{name!r} is a built-in algorithm; register yours under another name")
    _REGISTERED[name] = cls
    return cls


def algorithm_class(name: str) -> "type[Algorithm]":
    """The class of ``name``: a registered name or an import path ``pkg.module:Class``
    (one-line :class:`~decent8.errors.ConfigError` otherwise)."""
    from .base import Algorithm

    if isinstance(name, str) and name in _BUILTIN:
        module, attr = _BUILTIN[name].split(":")
        return getattr(importlib.import_module(f"{__package__}.{module}"), attr)
    if isinstance(name, str) and name in _REGISTERED:
        return _REGISTERED[name]
    from ..plugins import is_import_path, load_factory

    if not is_import_path(name):
        raise choice_error("algorithm", name, algorithm_names() + ("pkg.module:Class",))
    cls = load_factory(name, option="algorithm")
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise ConfigError("algorithm", f"{name} is not a subclass of decent8.algorithms.Algorithm "
                                       f"(GossipAlgorithm or AllReduceAlgorithm); see docs/extending.md")
    return cls


__all__ = ["DEFAULT_ALGORITHM", "algorithm_names", "registered_class", "display_name", "display_order", "register", "algorithm_class"]
