"""The one import gate: users' components named by an import path ``pkg.module:attr`` (a
model factory, a loss, a compressor or algorithm class, a topology function) and the
optional libraries decent8 imports lazily (tensorboardX, mlflow, wandb, transformers).

What it guarantees, however decent8 is started (the ``decent8`` console script,
``python -m decent8``, ``decent8 launch`` ranks, torchrun):

* the current folder is on ``sys.path`` only once the user's own code is imported
  (:func:`load_factory`: code named on the command line, in a config file given to
  ``decent8 train``, or named again / trusted on ``--resume``), and never while it lies
  inside a run folder being read;
* a run folder being read (:func:`read_as_data`) is data: no ``sys.path`` entry inside
  it is kept, and a module whose file (source, bytecode, extension module, package or
  namespace folder, at any level of a dotted name) resolves inside it is refused in one
  line before anything executes. The module is located with the same ``sys.path`` the
  import then uses;
* an optional library (:func:`import_library`) is imported with the current folder and
  the run folders off ``sys.path``; one that still resolves inside a run folder counts as
  not installed (one-line warning).

Torch-free.
"""
from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import re
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable

from .errors import ConfigError

_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
#: run folders this process reads (resolved): nothing is imported from inside them
_RUN_FOLDERS: list[Path] = []


def is_import_path(name: object) -> bool:
    return isinstance(name, str) and bool(_IMPORT_PATH.match(name))


# ------------------------------------------------------------------ paths
def _real(entry: str | os.PathLike) -> Path | None:
    """``entry`` resolved (``''`` is the current folder), or None if it cannot be."""
    try:
        return Path(os.fspath(entry) or os.curdir).resolve()
    except (OSError, RuntimeError, ValueError, TypeError):
        return None


def run_folder_of(entry: str | os.PathLike, roots: Iterable[Path] | None = None) -> Path | None:
    """The run folder (of ``roots``, default: those being read) that holds ``entry``, or None."""
    real = _real(entry)
    if real is None:
        return None
    for root in (_RUN_FOLDERS if roots is None else roots):
        if real == root or root in real.parents:
            return root
    return None


def _is_cwd(entry: object) -> bool:
    if not isinstance(entry, (str, os.PathLike)):
        return False
    return _real(entry) == _real(os.curdir)


def strip_working_folder() -> None:
    """Take the current folder (``''``, ``.`` or its path) off ``sys.path``: ``python -m``
    puts it first at start-up, where a file in it would shadow any library."""
    sys.path[:] = [e for e in sys.path if not _is_cwd(e)]


def read_as_data(folder: str | os.PathLike) -> Path:
    """Record ``folder`` as a run folder being read, for the rest of the process: its
    ``sys.path`` entries (the current folder included, if it lies inside) go, and no
    module inside it is imported. Returns the resolved folder."""
    root = _real(folder) or Path(folder).absolute()
    if root not in _RUN_FOLDERS:
        _RUN_FOLDERS.append(root)
    kept = [e for e in sys.path if not (isinstance(e, (str, os.PathLike)) and run_folder_of(e, [root]))]
    if len(kept) != len(sys.path):
        sys.path[:] = kept
        importlib.invalidate_caches()
    return root


def code_path() -> list[str]:
    """The ``sys.path`` a user's module is imported with: the current folder first (as
    ``python -m`` has it), unless it lies inside a run folder being read; no entry inside one."""
    path = [e for e in sys.path if not _is_cwd(e)
            and not (isinstance(e, (str, os.PathLike)) and run_folder_of(e))]
    cwd = os.getcwd()
    if run_folder_of(cwd) is None:
        path.insert(0, cwd)
    return path


def _library_path() -> list[str]:
    """``sys.path`` for an optional library: neither the current folder nor a run folder."""
    return [e for e in sys.path if not _is_cwd(e) and not (isinstance(e, (str, os.PathLike)) and run_folder_of(e))]


# ------------------------------------------------------------------ locating without importing
def _find_top(name: str, path: list[str]) -> Any:
    """The spec of top-level module ``name`` as an import with ``sys.path = path`` finds it
    (the meta-path finders included); nothing is executed."""
    saved = sys.path[:]
    sys.path[:] = path
    try:
        importlib.invalidate_caches()
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    finally:
        sys.path[:] = saved


def _locations(spec: Any) -> list[str]:
    """A package spec's search locations; a namespace package's as found (its parent is
    not imported, so they cannot be recomputed from it)."""
    locs = spec.submodule_search_locations
    if locs is None:
        return []
    try:
        return list(locs)
    except (KeyError, AttributeError, TypeError):
        return list(getattr(locs, "_path", None) or [])


def module_files(mod_name: str, path: list[str]) -> list[Path]:
    """Every file and package folder that importing ``mod_name`` with ``sys.path = path``
    would run, level by level of the dotted name (source ``.py``, sourceless ``.pyc``,
    extension ``.so``/``.pyd``, a package's ``__init__`` and folder, a namespace package's
    folders), found without executing anything: a package is not imported to find its
    submodules, its search locations are searched as the import would."""
    found: list[Path] = []
    parts = mod_name.split(".")
    locations: list[str] | None = None
    for i in range(len(parts)):
        name = ".".join(parts[: i + 1])
        mod = sys.modules.get(name)
        if mod is not None:
            origin = getattr(mod, "__file__", None)
            locs = list(getattr(mod, "__path__", None) or [])
        else:
            if i == 0:
                spec = _find_top(name, path)
            elif locations:
                try:
                    spec = importlib.machinery.PathFinder.find_spec(name, locations)
                except KeyError:   # a namespace package whose parent is not imported: its folders
                    locs = [os.path.join(loc, parts[i]) for loc in locations if os.path.isdir(os.path.join(loc, parts[i]))]
                    found += [Path(loc) for loc in locs]
                    locations = locs or None
                    continue
                except (ImportError, ValueError):
                    spec = None
            else:
                spec = None
            if spec is None:
                break
            origin = spec.origin if spec.has_location else None
            locs = _locations(spec)
        if isinstance(origin, str) and origin not in ("built-in", "frozen"):
            found.append(Path(origin))
        found += [Path(loc) for loc in locs if isinstance(loc, str)]
        locations = locs or None
    return found


def refuse_run_folder_code(mod_name: str, option: str, path: list[str]) -> None:
    """One line if ``mod_name`` would load any file from inside a run folder being read."""
    for f in module_files(mod_name, path):
        root = run_folder_of(f)
        if root is not None:
            raise ConfigError(option, f"{mod_name} is {f}, inside the run folder {root}; "
                                      f"decent8 never runs code from a run folder")


# ------------------------------------------------------------------ the gate
def load_factory(path: str, option: str = "model") -> Callable[..., Any]:
    """The object named by ``pkg.module:attr``, imported through the gate (module docstring);
    one line naming ``option`` if it is refused or does not import."""
    if not is_import_path(path):
        raise ConfigError(option, f"{path!r} is not an import path of the form pkg.module:factory")
    mod_name, attr = path.split(":", 1)
    search = code_path()
    refuse_run_folder_code(mod_name, option, search)   # located on the very path the import uses
    if sys.path != search:
        sys.path[:] = search
        importlib.invalidate_caches()
    try:
        obj: Any = importlib.import_module(mod_name)
    except Exception as e:  # ImportError, or an error raised while importing the user's module
        raise ConfigError(option, f"cannot import module {mod_name!r}: {type(e).__name__}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(option, f"module {mod_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(option, f"{path} is not callable (a factory returning an nn.Module is expected)")
    return obj


def import_library(name: str) -> ModuleType:
    """The optional library ``name`` (e.g. ``tensorboardX``, ``mlflow.tracking``), never
    from the current folder or a run folder: ImportError (as if not installed, with a
    one-line warning) if it would load a file from inside a run folder being read."""
    search = _library_path()
    for f in module_files(name, search):
        root = run_folder_of(f)
        if root is not None:
            warnings.warn(f"{name.split('.')[0]} is {f}, inside the run folder {root}: not imported "
                          f"(treated as not installed)", RuntimeWarning, stacklevel=2)
            raise ImportError(f"{name} lies inside the run folder {root}")
    if name in sys.modules:
        return sys.modules[name]
    saved = sys.path[:]
    sys.path[:] = search
    try:
        return importlib.import_module(name)
    finally:   # entries the library added itself stay; the ones left out come back
        added = [e for e in sys.path if e not in search and e not in saved]
        sys.path[:] = saved + added


__all__ = ["is_import_path", "load_factory", "import_library", "read_as_data", "code_path", "module_files",
           "refuse_run_folder_code", "run_folder_of", "strip_working_folder"]
