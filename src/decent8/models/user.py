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

import inspect
from typing import Any, Callable

from torch import nn

from ..errors import ConfigError
from ..plugins import is_import_path, load_factory  # noqa: F401  (re-exported)


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
