"""The built-in models by name: ``@register_model`` adds a builder to the model registry
(:data:`MODELS`, :data:`decent8.registry.models`), with the norms it accepts and whether it is one of the paper's models (EvoNorm / Range EvoNorm by
default) or takes named inputs (a dict of tensors)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from torch import nn

from ..registry import models
from .norms import NORMS


@dataclass(frozen=True)
class ModelArgs:
    """What a builder gets: the data's input shape and classes, the config's width and norm
    (already resolved), and for model=hf its pretrained folder and seed."""

    input_shape: Any
    num_classes: int
    width: int | None
    norm: str
    vocab_size: int | None = None
    pretrained_dir: Any = None
    seed: int = 0

    @property
    def channels(self) -> int:
        return self.input_shape[0]

    @property
    def size(self) -> int:
        return self.input_shape[-1]


#: the model registry (:data:`decent8.registry.models`): name -> entry (``entry.obj`` the builder;
#: ``entry.norms``, ``entry.paper``, ``entry.named_inputs`` its facts), in registration order
MODELS = models


def register_model(name: str, *, norms: tuple[str, ...] = NORMS, paper: bool = False,
                   named_inputs: bool = False) -> Callable[[Callable[[ModelArgs], nn.Module]],
                                                           Callable[[ModelArgs], nn.Module]]:
    """Register ``fn(args: ModelArgs) -> nn.Module`` as model ``name``: ``norms`` the norm layers
    it accepts (``("none",)``: none), ``paper`` one of the paper's models (its default norm is
    EvoNorm-S0 for fp32, Range EvoNorm for int8), ``named_inputs`` it takes a dict of tensors."""
    def decorate(fn: Callable[[ModelArgs], nn.Module]) -> Callable[[ModelArgs], nn.Module]:
        return models.register(name, fn, norms=tuple(norms), paper=paper, named_inputs=named_inputs)
    return decorate


__all__ = ["MODELS", "ModelArgs", "register_model"]
