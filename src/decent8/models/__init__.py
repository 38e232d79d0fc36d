"""Models (SPEC §7): plain ``torch.nn`` modules, and the stacked all-nodes view used by both backends."""
from __future__ import annotations

import torch
from torch import nn

from ..errors import choice_error
from ..quant.quantizer import QuantSpec
from ..quant.transform import to_low_precision
from .small import MLP, DigitsCNN, TextClassifier
from .stacked import StackedModel
from .user import is_import_path, user_model
from . import registry
from .registry import ModelArgs, register_model
from .zoo import PRECISIONS, build_model, resolve

#: the model registry (:func:`register_model` adds more: :func:`make_model` builds any registered one)
MODELS = registry.MODELS


def make_model(name: str, input_shape: tuple[int, ...], num_classes: int, width: int | None = None,
               norm: str | None = None, precision: str = "fp32", quant: QuantSpec | None = None,
               vocab_size: int | None = None, pretrained_dir=None, seed: int = 0) -> nn.Module:
    """Build a model by name for inputs of ``input_shape`` (without the batch axis).

    ``name`` is a registered model (:data:`MODELS` and any added by :func:`register_model`) or an import path ``pkg.module:factory``
    of a function returning an ``nn.Module`` (:func:`.user.user_model`). ``norm`` picks
    the normalization-activation layer of the built-in models (None: the model's
    default, see :mod:`.zoo`); ``precision="int8"`` applies the 8-bit module transform
    with ``quant`` settings.
    """
    if is_import_path(name):
        _, spec = resolve("mlp", "none", precision, quant)
        module = user_model(name, input_shape=input_shape, num_classes=num_classes, vocab_size=vocab_size,
                            width=width)
        return to_low_precision(module, spec) if spec is not None else module
    if name not in registry.MODELS:
        raise choice_error("model", name, tuple(registry.MODELS) + ("pkg.module:factory",))
    norm, spec = resolve(name, norm, precision, quant)
    return build_model(name, input_shape, num_classes, width, norm, spec, vocab_size, pretrained_dir, seed)


def init_parameters(module: nn.Module, seed: int) -> None:
    """Re-initialise ``module`` deterministically from ``seed`` (independent of global RNG state)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for m in module.modules():
            if hasattr(m, "reset_parameters") and m is not module:
                m.reset_parameters()




def __getattr__(name: str):
    if name == "QUANTIZED_MODELS":   # every registered model (read when asked)
        return MODELS.names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["MODELS", "PRECISIONS", "QUANTIZED_MODELS", "ModelArgs", "register_model", "make_model", "init_parameters", "StackedModel",
           "DigitsCNN", "MLP", "TextClassifier"]
