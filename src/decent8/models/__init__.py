"""Models (SPEC §7) and the stacked all-nodes view used by both backends."""
from __future__ import annotations

import torch
from torch import nn

from ..errors import choice_error
from ..quant.quantizer import QuantSpec
from .small import MLP, DigitsCNN
from .stacked import StackedModel
from .zoo import PAPER_MODELS, PRECISIONS, QUANTIZED_MODELS, build_model, resolve

MODELS = ("cnn", "mlp") + PAPER_MODELS


def make_model(name: str, input_shape: tuple[int, ...], num_classes: int, width: int | None = None,
               norm: str | None = None, precision: str = "fp32", quant: QuantSpec | None = None) -> nn.Module:
    """Build a model by name for inputs of ``input_shape`` (without the batch axis).

    ``norm`` picks the normalization-activation layer (None: the model's default, see
    :mod:`.zoo`); ``precision="int8"`` builds the 8-bit form with ``quant`` settings.
    """
    if name not in MODELS:
        raise choice_error("model", name, MODELS)
    norm, spec = resolve(name, norm, precision, quant)
    if name in PAPER_MODELS or spec is not None or norm != "none":
        return build_model(name, input_shape, num_classes, width, norm, spec)
    if name == "cnn":
        c, h = input_shape[0], input_shape[-1]
        return DigitsCNN(c, num_classes, width or 16, h)
    if name == "mlp":
        f = 1
        for s in input_shape:
            f *= s
        return MLP(f, num_classes, width or 128)
    raise choice_error("model", name, MODELS)


def init_parameters(module: nn.Module, seed: int) -> None:
    """Re-initialise ``module`` deterministically from ``seed`` (independent of global RNG state)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for m in module.modules():
            if hasattr(m, "reset_parameters") and m is not module:
                m.reset_parameters()


__all__ = ["MODELS", "PRECISIONS", "QUANTIZED_MODELS", "make_model", "init_parameters", "StackedModel",
           "DigitsCNN", "MLP"]
