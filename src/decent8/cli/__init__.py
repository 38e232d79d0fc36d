"""The ``decent8`` command line.

When this process *is* the command (the ``decent8`` console script, ``python -m decent8``,
a ``decent8 launch`` rank, a torchrun worker), importing this package is its first
instruction: the current folder leaves ``sys.path`` before anything else is imported (a
file in it, a run folder's ``torch.py`` say, never shadows a library; the user's own
modules are found through :func:`decent8.plugins.load_factory`), then SIGINT / SIGTERM
stop the command with one line and 130 / 143 (:mod:`decent8.signals`). Imported as a
library (tests, notebooks) it changes nothing.
"""
import sys as _sys


def _is_command() -> bool:
    main = _sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None:
        return getattr(spec, "name", None) == "decent8.__main__"
    import os.path as _p

    name = _p.basename(str(getattr(main, "__file__", "") or ""))
    return name in ("decent8", "decent8.exe", "decent8-script.py")


def start_command() -> None:
    """Make this process the command (see the package docstring); once."""
    if getattr(start_command, "done", False):
        return
    start_command.done = True  # type: ignore[attr-defined]
    import os   # loaded at interpreter start-up, as is os.path: nothing is looked up on sys.path yet

    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:   # the folder was removed: only '' can name it
        cwd = None
    _sys.path[:] = [e for e in _sys.path if not (isinstance(e, str) and
                                                 (e in ("", os.curdir) or (cwd and os.path.realpath(e) == cwd)))]
    from .. import signals

    signals.install_early()


if _is_command():
    start_command()
