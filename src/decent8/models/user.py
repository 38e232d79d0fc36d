"""Users' own models: ``model=pkg.module:factory`` on the command line, a factory or a
module in the Python API.

``pkg.module`` is imported from the current folder first (as ``python -m decent8``
does, also under the ``decent8`` console script), then from the installed packages.

A factory is any callable returning an ``nn.Module``; it gets, by keyword, those of
``input_shape``, ``num_classes``, ``vocab_size`` and ``width`` that its signature names
(or all of them if it takes ``**kwargs``), so ``lambda: MyNet()`` works as well as
``def make(input_shape, num_classes): ...``.
"""
from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from typing import Any, Callable

from torch import nn

from ..errors import ConfigError

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
        what = " (a factory returning an nn.Module is expected)" if option == "model" else ""
        raise ConfigError(option, f"{path} is not callable{what}")
    return obj


def call_factory(factory: Callable[..., Any], option: str = "model", **available: Any) -> nn.Module:
    """``factory(**the arguments it accepts)``, checked to return an ``nn.Module``."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in available.items() if takes_all or k in params}
    try:
        module = factory(**kwargs)
    except Exception as e:
        raise ConfigError(option, f"the model factory failed: {type(e).__name__}: {e}") from None
    if not isinstance(module, nn.Module):
        raise ConfigError(option, f"the model factory returned {type(module).__name__}, not a torch.nn.Module")
    if not any(True for _ in module.parameters()):
        raise ConfigError(option, "the model has no parameters to train")
    return module


def user_model(path_or_factory: str | Callable[..., Any], **available: Any) -> nn.Module:
    factory = load_factory(path_or_factory) if isinstance(path_or_factory, str) else path_or_factory
    return call_factory(factory, **available)


__all__ = ["is_import_path", "load_factory", "call_factory", "user_model"]
