"""The boundary of a user's component (a compressor, an algorithm given by import path):
what it returns is checked, and what it raises becomes one line naming it.

:func:`guard` wraps chosen methods of one instance; an exception other than decent8's own
(:class:`~decent8.errors.ConfigError`, :class:`~decent8.errors.TrainingError`, a signal)
becomes a :class:`UserCodeError` — exit 2 with one line, and a run folder that holds no
checkpoint yet is removed (train/loop.py)."""
from __future__ import annotations

import functools
from typing import Any, Callable, Iterable

from .errors import ConfigError, TrainingError, first_line


class UserCodeError(ConfigError):
    """A user's component raised or returned something decent8 cannot use."""


def call(option: str, label: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, its foreign exceptions as one :class:`UserCodeError` line."""
    try:
        return fn(*args, **kwargs)
    except (ConfigError, TrainingError, KeyboardInterrupt, MemoryError):
        raise
    except Exception as e:
        raise UserCodeError(option, f"{label} raised {type(e).__name__}: {first_line(e)}") from None


def guard(obj: Any, option: str, name: str, methods: Iterable[str],
          check: "dict[str, Callable[[Any, tuple], str | None]] | None" = None) -> Any:
    """Wrap ``methods`` of the instance ``obj`` (returned): their exceptions become one line
    naming ``option``=``name`` and the method; ``check[method](result, args)`` returns a
    reason the result is unusable (or None)."""
    check = check or {}
    for method in methods:
        bound = getattr(obj, method)

        @functools.wraps(bound)
        def wrapped(*args: Any, _bound: Callable[..., Any] = bound, _method: str = method, **kwargs: Any) -> Any:
            out = call(option, f"{name}.{_method}", _bound, *args, **kwargs)
            why = check[_method](out, args) if _method in check else None
            if why is not None:
                raise UserCodeError(option, f"{name}.{_method} returned {why}")
            return out

        object.__setattr__(obj, method, wrapped)
    return obj


__all__ = ["UserCodeError", "call", "guard"]
