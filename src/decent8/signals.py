"""Ctrl-C and SIGTERM that are never lost.

A signal handler raises in whatever code runs when the signal lands; inside a
finalizer or a weakref callback (matplotlib drops figures while an epoch's plots are
written) Python prints "Exception ignored in …" and the exception is gone: the run went
on and exited 0. So the handlers also *record* the signal, and the training loop calls
:func:`raise_pending` at safe points (after each step, after the plots, after the
checkpoint): a swallowed signal still stops the run there.
"""
from __future__ import annotations

import signal
import sys
import threading
from typing import Any

from .errors import Terminated

_pending: list[int] = []


def _on_signal(signum: int, frame: Any) -> None:
    _pending.append(signum)
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _unraisable(hook: Any) -> Any:
    """``sys.unraisablehook`` that stays silent once a signal is recorded: the signal's own
    swallowed exception, and what it leaves behind (a finalizer of an object whose
    ``__init__`` the signal cut short, e.g. pyparsing's ``Forward.__del__`` while matplotlib
    builds its parser, raises AttributeError); :func:`raise_pending` reports it in one line."""
    def quiet(info: Any) -> None:
        if _pending:
            return
        hook(info)
    return quiet


def install() -> dict[Any, Any]:
    """Handle SIGINT and SIGTERM (main thread only); returns what it replaced."""
    clear()
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous: dict[Any, Any] = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    previous["unraisablehook"] = sys.unraisablehook
    sys.unraisablehook = _unraisable(sys.unraisablehook)
    return previous


def restore(previous: dict[Any, Any]) -> None:
    if _pending:   # collect what the signal left half-built while the quiet hook is still in place
        import gc
        gc.collect()
    for s, h in previous.items():
        if s == "unraisablehook":
            sys.unraisablehook = h
        else:
            signal.signal(s, h if h is not None else signal.SIG_DFL)
    clear()


def clear() -> None:
    _pending.clear()


def raise_pending() -> None:
    """Raise for a signal whose exception was swallowed (see the module docstring)."""
    if _pending:
        signum = _pending[0]
        clear()
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


__all__ = ["install", "restore", "clear", "raise_pending"]
