"""Users' own components named by an import path ``pkg.module:attr`` (a model factory, a
compressor or algorithm class, a topology function): recognised and imported, the current
folder first (as ``python -m decent8`` does, also under the ``decent8`` console script),
with one-line errors. Torch-free."""
from __future__ import annotations

import importlib
import os
import re
import sys
from typing import Any, Callable

from .errors import ConfigError

_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def is_import_path(name: object) -> bool:
    return isinstance(name, str) and bool(_IMPORT_PATH.match(name))


def _add_cwd_to_path() -> None:
    """Import paths resolve from the current folder, as under ``python -m decent8``: the
    ``decent8`` console script's ``sys.path`` starts with the script's folder instead."""
    cwd = os.getcwd()
    if not any(os.path.abspath(p or os.curdir) == cwd for p in sys.path):
        sys.path.insert(0, cwd)
        importlib.invalidate_caches()


def load_factory(path: str, option: str = "model") -> Callable[..., Any]:
    """The object named by ``pkg.module:attr`` (one line naming ``option`` if it does not import)."""
    if not is_import_path(path):
        raise ConfigError(option, f"{path!r} is not an import path of the form pkg.module:factory")
    mod_name, attr = path.split(":", 1)
    _add_cwd_to_path()
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


__all__ = ["is_import_path", "load_factory"]
