"""Models (SPEC §7) and the stacked all-nodes view used by both backends."""
from __future__ import annotations

import torch
from torch import nn

from ..errors import choice_error
from .small import MLP, DigitsCNN
from .stacked import StackedModel

MODELS = ("cnn", "mlp")


def make_model(name: str, input_shape: tuple[int, ...], num_classes: int, width: int | None = None) -> nn.Module:
    """Build a model by name for inputs of ``input_shape`` (without the batch axis)."""
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


__all__ = ["MODELS", "make_model", "init_parameters", "StackedModel", "DigitsCNN", "MLP"]
