"""User-facing errors.

Every mistake a user can make in a config or on the command line raises
:class:`ConfigError`; the CLI prints it as one line and exits with code 2.
"""
from __future__ import annotations

import re


class ConfigError(ValueError):
    """Bad user input: ``option`` names the setting, ``message`` says what is allowed."""

    def __init__(self, option: str, message: str) -> None:
        self.option = option
        self.message = message
        super().__init__(f"{option}: {message}")


#: terminal escape sequences (colours, cursor moves) and other control characters that a
#: library puts into its messages (torch's weights_only hint is bold): never in our one line
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")


def first_line(e: BaseException, limit: int = 200) -> str:
    """An exception's message cut to its first line (``limit`` characters; its type's
    name when it has none), without terminal escapes, for one-line errors that quote a
    library's message."""
    text = _ESCAPES.sub("", str(e)).strip()
    return text.splitlines()[0][:limit] if text else type(e).__name__


def did_you_mean(value: object, allowed: "list[str] | tuple[str, ...]") -> str:
    """`` (did you mean 'x'?)`` naming the closest allowed names to a mistyped ``value``
    (``difflib.get_close_matches``: similarity ratio ≥ 0.6, at most 3, or a case-only
    difference), or ``""`` when none is close."""
    import difflib

    text = str(value)
    names = [str(a) for a in allowed]
    close = [a for a in names if a.lower() == text.lower() and a != text]
    close += [a for a in difflib.get_close_matches(text.lower(), names, n=3, cutoff=0.6) if a not in close]
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close[:3]) + "?)"


def choice_error(option: str, value: object, allowed: "list[str] | tuple[str, ...]") -> ConfigError:
    """The standard error for a value outside a fixed set of names (with the closest names)."""
    return ConfigError(option, f"unknown value {value!r}{did_you_mean(value, allowed)}; "
                               f"allowed: {', '.join(sorted(allowed))}")


class TrainingError(RuntimeError):
    """A run that cannot go on (diverged, a peer died); the CLI prints it as one line, exit 1."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that cleanup (``finally``) runs (exit 143)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM: ``sigterm``) during a run: carries the run folder so the CLI
    can say how to resume."""

    def __init__(self, run_dir: object, resumable: bool, sigterm: bool = False) -> None:
        super().__init__(str(run_dir))
        self.run_dir = run_dir
        self.resumable = resumable
        self.sigterm = sigterm
