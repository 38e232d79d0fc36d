"""Named components: one :class:`Registry` type for every kind decent8 builds by name.

A registry maps a name to a component (a class or a factory function) and a record of
facts about it (``info``: display names, cost and default-suggestion facts, norms a model
accepts …). Built-in components register themselves with the :meth:`Registry.register`
decorator in the module that defines them; a registry imports its built-ins' subpackage
(every module of it, for ``discover``) on first lookup, so a new built-in is one new
file. A user's component is registered the same way (``decent8.register(kind, name)``) or
named by its import path ``pkg.module:Name`` on the command line, imported through
:func:`decent8.plugins.load_factory` (the one import gate).

A component's options are its constructor's keyword arguments (:func:`construct`): given
as ``group.name=NAME`` plus ``group.<kwarg>=value``, checked against the signature and its
type hints, each mistake one line naming the option and what is allowed.

Torch-free: nothing here imports a component until it is looked up.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

from .errors import ConfigError, choice_error, did_you_mean
from .plugins import is_import_path, load_factory


@dataclass(frozen=True)
class Entry:
    """One registered component: its ``name``, the object (class or factory), its facts."""

    name: str
    obj: Any
    info: Mapping[str, Any] = field(default_factory=dict)
    builtin: bool = False

    def __getattr__(self, key: str) -> Any:   # entry.paper reads info["paper"]
        info = object.__getattribute__(self, "info")
        if key in info:
            return info[key]
        raise AttributeError(f"{type(self).__name__} {object.__getattribute__(self, 'name')!r} has no {key!r}")


class Registry:
    """Names → components of one ``kind`` (``"algorithm"``, ``"compression"`` …).

    ``option``: the config option that names a component of this kind (one-line errors);
    ``package``: the subpackage whose modules register the built-ins (imported on first
    lookup; with ``discover`` every module in it); ``base``: ``"module:Class"`` every
    class registered or named by import path must subclass; ``path_hint``: how an import
    path is written in the list of allowed values (None: no import paths, registered names only)."""

    def __init__(self, kind: str, option: str | None = None, *, package: str | None = None, discover: bool = False,
                 base: str | None = None, base_note: str = "", path_hint: str | None = "pkg.module:Name") -> None:
        self.kind = kind
        self.option = option or kind
        self.package = package
        self.discover = discover
        self.base = base
        self.base_note = base_note
        self.path_hint = path_hint
        self._entries: dict[str, Entry] = {}
        self._aliases: dict[str, str] = {}
        self._loaded = package is None

    # ------------------------------------------------------------------ registration
    def register(self, name: Any = None, obj: Any = None, *, aliases: tuple[str, ...] = (), **info: Any) -> Any:
        """Register ``obj`` as ``name`` with the facts ``info``: ``@reg.register("name", **info)``
        on a class or function, ``@reg.register`` (its ``name`` attribute or ``__name__``),
        or ``reg.register("name", obj)``. Returns ``obj`` (a decorator returns it unchanged).
        A name is registered once (a second object under it: one line; :meth:`unregister`
        frees a user's name), and a built-in's name cannot be taken."""
        if callable(name) and obj is None and not isinstance(name, str):
            return self._add(None, name, aliases, info)
        if obj is not None:
            return self._add(name, obj, aliases, info)

        def decorate(target: Any) -> Any:
            return self._add(name, target, aliases, info)
        return decorate

    def _add(self, name: str | None, obj: Any, aliases: tuple[str, ...], info: dict[str, Any]) -> Any:
        name = name or getattr(obj, "name", None) or getattr(obj, "__name__", "").lower()
        if not isinstance(name, str) or not name or ":" in name:
            raise ConfigError(self.option, f"cannot register {obj!r} under the name {name!r} (a name without ':')")
        self._check(obj, name)
        builtin = str(getattr(obj, "__module__", "")).startswith("decent8.")
        old = self._entries.get(name) or self._entries.get(self._aliases.get(name, ""))
        if old is not None:
            if old.builtin and not builtin:
                raise ConfigError(self.option, f"{name!r} is a built-in {self.kind}; register yours under another name")
            raise ConfigError(self.option, f"{self.kind} {name!r} is registered twice")
        self._entries[name] = Entry(name, obj, dict(info), builtin)
        for a in aliases:
            self._aliases[a] = name
        return obj

    def _check(self, obj: Any, name: str) -> None:
        """``obj`` subclasses :attr:`base` (when given), or a one-line error."""
        if self.base is None:
            if not callable(obj):
                raise ConfigError(self.option, f"{name} is not callable")
            return
        module, attr = self.base.split(":")
        base = getattr(importlib.import_module(module), attr)
        if not (isinstance(obj, type) and issubclass(obj, base)):
            raise ConfigError(self.option, f"{name} is not a subclass of {module}.{attr}{self.base_note}")

    # ------------------------------------------------------------------ lookup
    def _load(self) -> None:
        """Import the built-ins' subpackage (and with ``discover`` each of its modules) once."""
        if self._loaded:
            return
        self._loaded = True
        assert self.package is not None
        pkg = importlib.import_module(self.package)
        if self.discover:
            for m in pkgutil.iter_modules(getattr(pkg, "__path__", [])):
                importlib.import_module(f"{self.package}.{m.name}")

    def names(self) -> tuple[str, ...]:
        """Every registered name: built-ins first (by their ``order`` fact, then as registered)."""
        self._load()
        items = list(self._entries.values())
        builtin = sorted((e for e in items if e.builtin), key=lambda e: e.info.get("order", float("inf")))
        return tuple(e.name for e in builtin) + tuple(e.name for e in items if not e.builtin)

    def aliases(self) -> dict[str, str]:
        self._load()
        return dict(self._aliases)

    def canonical(self, name: object) -> str | None:
        """The registered name ``name`` stands for (itself or an alias's target), or None."""
        if not isinstance(name, str):
            return None
        self._load()
        if name in self._entries:
            return name
        return self._aliases.get(name)

    def registered(self, name: object) -> Entry | None:
        """The entry of a registered name or alias, None otherwise: never imports a user's
        module (stored results may name code by import path)."""
        key = self.canonical(name)
        return self._entries[key] if key is not None else None

    def entry(self, name: object) -> Entry:
        """The entry of ``name``: a registered name or alias, or an import path
        ``pkg.module:Name`` (imported through the gate); one-line ConfigError otherwise."""
        found = self.registered(name)
        if found is not None:
            return found
        if self.path_hint is None or not is_import_path(name):
            hint = (self.path_hint,) if self.path_hint else ()
            raise choice_error(self.option, name, self.names() + tuple(self._aliases) + hint)
        assert isinstance(name, str)
        obj = load_factory(name, option=self.option)
        self._check(obj, name)
        return Entry(name, obj, {}, False)

    def lookup(self, name: object) -> Any:
        """The component ``name`` stands for (:meth:`entry`)."""
        return self.entry(name).obj

    # read-only mapping of registered names -> entries
    def __contains__(self, name: object) -> bool:
        return self.canonical(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __getitem__(self, name: str) -> Entry:
        found = self.registered(name)
        if found is None:
            raise KeyError(name)
        return found

    def get(self, name: object, default: Any = None) -> Any:
        found = self.registered(name)
        return default if found is None else found

    def items(self) -> list[tuple[str, Entry]]:
        return [(n, self._entries[n]) for n in self.names()]

    def __delitem__(self, name: str) -> None:
        self.unregister(name)

    def unregister(self, name: str) -> None:
        """Remove a user's registration (tests); built-ins stay."""
        e = self._entries.get(name)
        if e is not None and not e.builtin:
            del self._entries[name]
            for a in [a for a, n in self._aliases.items() if n == name]:
                del self._aliases[a]

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"


# ---------------------------------------------------------------------- options = keyword arguments
def keyword_options(obj: Any, skip: int = 0) -> dict[str, inspect.Parameter]:
    """The keyword arguments ``obj`` (a class: its constructor; a function) takes, after its
    first ``skip`` positional parameters (the arguments the builder passes itself)."""
    try:
        params = list(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):
        return {}
    params = params[skip:]
    return {p.name: p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def takes_any_keyword(obj: Any) -> bool:
    try:
        return any(p.kind == p.VAR_KEYWORD for p in inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):
        return False


def _hints(obj: Any) -> dict[str, Any]:
    target = obj.__init__ if isinstance(obj, type) else obj
    try:
        return typing.get_type_hints(target)
    except Exception:  # unresolvable annotations: values are not type-checked
        return {}


def _matches(value: Any, hint: Any) -> bool:
    """Whether a config value fits a type hint (int is a float; bool is not an int)."""
    if hint is Any or hint is inspect.Parameter.empty:
        return True
    origin = typing.get_origin(hint)
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        return any(_matches(value, h) for h in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint in (str, bool):
        return isinstance(value, hint)
    if origin in (list, tuple, typing.Sequence) or hint in (list, tuple):
        return isinstance(value, (list, tuple))
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    return True   # a type a config value cannot be checked against: the constructor decides


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(hint))
    text = getattr(hint, "__name__", None) or str(hint)
    return text.replace("typing.", "").replace("NoneType", "None")


def check_options(obj: Any, given: Mapping[str, Any], group: str, what: str, skip: int = 0) -> dict[str, Any]:
    """``given`` checked against ``obj``'s keyword arguments (after ``skip`` positional ones) and
    their type hints: one-line ConfigError ``group.kwarg: …`` for an unknown name or a value of
    the wrong type. Returns the options as the constructor takes them (ints as floats where a
    float is declared)."""
    takes = keyword_options(obj, skip)
    hints = _hints(obj)
    out: dict[str, Any] = {}
    for key, value in given.items():
        if key not in takes and not takes_any_keyword(obj):
            allowed = ", ".join(takes) or "none"
            raise ConfigError(f"{group}.{key}", f"unknown option of {what}{did_you_mean(key, list(takes))}; "
                                                f"its options: {allowed}")
        hint = hints.get(key, inspect.Parameter.empty)
        if not _matches(value, hint):
            raise ConfigError(f"{group}.{key}", f"must be {_type_name(hint)} ({what}), got {value!r:.60}")
        out[key] = float(value) if hint is float and isinstance(value, int) else value
    return out


def construct(obj: Any, *args: Any, given: Mapping[str, Any] | None = None, config: Mapping[str, Any] | None = None,
              group: str, what: str) -> Any:
    """``obj(*args, **options)``: ``given`` (the user's ``group.<kwarg>=value``) checked by
    :func:`check_options`, plus the values of ``config`` (a group's typed options) whose
    names the constructor takes and ``given`` leaves out. A required keyword left out is
    one line."""
    options = check_options(obj, dict(given or {}), group, what, skip=len(args))
    takes = keyword_options(obj, len(args))
    for key, value in (config or {}).items():
        if key in takes and key not in options:
            options[key] = value
    missing = [k for k, p in takes.items() if p.default is p.empty and k not in options]
    if missing:
        raise ConfigError(f"{group}.{missing[0]}", f"required by {what}; set {group}.{missing[0]}=VALUE")
    return obj(*args, **options)


# ---------------------------------------------------------------------- the registries
algorithms = Registry("algorithm", package="decent8.algorithms", discover=True,
                      base="decent8.algorithms:Algorithm", path_hint="pkg.module:Class",
                      base_note=" (GossipAlgorithm or AllReduceAlgorithm); see docs/extending.md")
compressors = Registry("compression", package="decent8.compression", discover=True,
                       base="decent8.compression:Compressor", path_hint="pkg.module:Class")
topologies = Registry("topology", package="decent8.topology", discover=True, path_hint="pkg.module:function")
optimizers = Registry("optimizer.kind", package="decent8.optim", discover=True, path_hint=None)
datasets = Registry("data", package="decent8.data.registry", path_hint=None)
models = Registry("model", package="decent8.models", discover=True, path_hint="pkg.module:factory")
losses = Registry("loss", package="decent8.task", path_hint="pkg.module:function")
attacks = Registry("byzantine.attack", package="decent8.byzantine", discover=True, path_hint="pkg.module:Name")
aggregators = Registry("byzantine.aggregator", package="decent8.byzantine", discover=True, path_hint="pkg.module:Name")

#: kind -> registry (``decent8.register(kind, name)``)
REGISTRIES: dict[str, Registry] = {
    "algorithm": algorithms, "compression": compressors, "compressor": compressors, "topology": topologies,
    "optimizer": optimizers, "data": datasets, "dataset": datasets, "model": models, "loss": losses,
    "attack": attacks, "aggregator": aggregators,
}


def registry(kind: str) -> Registry:
    """The registry of ``kind`` (:data:`REGISTRIES`), or a one-line error."""
    if kind not in REGISTRIES:
        raise choice_error("kind", kind, tuple(REGISTRIES))
    return REGISTRIES[kind]


def register(kind: str, name: Any = None, obj: Any = None, **info: Any) -> Any:
    """Register a component for the Python API and config files: ``decent8.register("compression",
    "mine")`` as a decorator on the class, or ``decent8.register("topology", "mine", fn)``."""
    return registry(kind).register(name, obj, **info)


__all__ = ["Entry", "Registry", "REGISTRIES", "registry", "register", "construct", "check_options",
           "keyword_options", "algorithms", "compressors", "topologies", "optimizers", "datasets", "models",
           "losses", "attacks", "aggregators"]
