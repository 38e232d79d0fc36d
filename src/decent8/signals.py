"""Ctrl-C and SIGTERM that are never lost.

A signal handler raises in whatever code runs when the signal lands; inside a
finalizer or a weakref callback (matplotlib drops figures while an epoch's plots are
written) Python prints "Exception ignored in …" and the exception is gone: the run went
on and exited 0. So the handlers also *record* the signal, and the training loop calls
:func:`raise_pending` at safe points (after each step, after the plots, after the
checkpoint): a swallowed signal still stops the run there.

Outside a command's guarded part (start-up while modules import, argument parsing
before the handlers are armed, shutdown) the handlers stop the process at once with
the command's one line and status 130 (SIGINT) / 143 (SIGTERM), never a traceback:
nothing has been started there that needs cleaning up.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from .errors import Terminated

_pending: list[int] = []
#: True while a command runs inside ``decent8.cli.main``'s handling: signals raise there
_armed = False


def exit_now(signum: int) -> None:
    """Stop at once: flush stdout, one line on stderr, exit 130 (SIGINT) / 143 (SIGTERM)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:   # a closed pipe: the line and the status still go out
        pass
    what = b"terminated (SIGTERM)" if signum == signal.SIGTERM else b"interrupted"
    try:
        os.write(2, b"decent8: error: " + what + b"\n")
    finally:
        os._exit(128 + signum)


def _on_signal(signum: int, frame: Any) -> None:
    if not _armed:
        exit_now(signum)
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


def install_early() -> None:
    """At a command's first instruction: SIGINT / SIGTERM stop it at once with one line
    (see the module docstring) until :func:`install` arms them (main thread only)."""
    global _armed
    _armed = False
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, _on_signal)


def disarm() -> None:
    """From here on a signal stops the process at once with one line (no exception)."""
    global _armed
    _armed = False


def install() -> dict[Any, Any]:
    """Handle SIGINT and SIGTERM (main thread only): they raise, and are recorded; returns what it replaced."""
    global _armed
    clear()
    if threading.current_thread() is not threading.main_thread():
        return {}
    was_armed, _armed = _armed, True
    previous: dict[Any, Any] = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    previous["armed"] = was_armed
    previous["unraisablehook"] = sys.unraisablehook
    sys.unraisablehook = _unraisable(sys.unraisablehook)
    return previous


def restore(previous: dict[Any, Any]) -> None:
    global _armed
    _armed = False
    if _pending:   # collect what the signal left half-built while the quiet hook is still in place
        import gc
        gc.collect()
    for s, h in previous.items():
        if s == "armed":
            continue
        if s == "unraisablehook":
            sys.unraisablehook = h
        else:
            signal.signal(s, h if h is not None else signal.SIG_DFL)
    clear()
    _armed = bool(previous.get("armed", False))   # a command run inside another (regenerate) hands back


def pending() -> int | None:
    """The first signal recorded since :func:`clear` (None if none)."""
    return _pending[0] if _pending else None


def clear() -> None:
    _pending.clear()


def raise_pending() -> None:
    """Raise for a signal whose exception was swallowed (see the module docstring)."""
    if _pending:
        signum = _pending[0]
        clear()
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


__all__ = ["install", "install_early", "disarm", "exit_now", "restore", "clear", "raise_pending"]
