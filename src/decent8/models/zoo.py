"""The paper's models (SPEC §7) by name, with a norm-activation layer and a precision.

============  ===================================  ============  =================
name          model                                parameters    default norm
============  ===================================  ============  =================
resnet20      CIFAR ResNet, 3 × 3 blocks, w = 16   0.27 M        evonorm / range_evonorm
resnet54      CIFAR ResNet, 3 × 8 blocks, w = 16   0.76 M        evonorm / range_evonorm
vgg11         VGG-11 config A + 512 hidden, drop   9.49 M        evonorm / range_evonorm
resnet18      ImageNet ResNet-18 (224 px)          11.2 M        evonorm / range_evonorm
cnn           digits CNN (:mod:`.small`)           9.9 k         none (ReLU)
mlp           MLP (full precision only)            —             none (ReLU)
============  ===================================  ============  =================

(parameter counts for 10 classes; default norm for fp32 / int8). ``precision=int8``
builds the 8-bit form (:mod:`decent8.quant`) of every model but the MLP.
"""
from __future__ import annotations

from torch import nn

from ..errors import ConfigError, choice_error
from ..nn.norms import NORMS
from ..quant.quantizer import QuantSpec
from .lowprec_small import LowPrecDigitsCNN
from .resnet_cifar import DEPTHS, ResNetCifar
from .resnet_imagenet import ResNetImageNet
from .vgg import VGG11

PRECISIONS = ("fp32", "int8")
#: models added for the paper (the digits ``cnn``/``mlp`` live in :mod:`.small`)
PAPER_MODELS = ("resnet20", "resnet54", "vgg11", "resnet18")
#: models with an 8-bit form
QUANTIZED_MODELS = ("cnn",) + PAPER_MODELS
#: norms each model accepts
MODEL_NORMS = {name: NORMS for name in QUANTIZED_MODELS}
MODEL_NORMS["mlp"] = ("none",)


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise choice_error("precision", precision, PRECISIONS)
    return precision


def default_norm(name: str, precision: str) -> str:
    """EvoNorm-S0 for fp32 and Range EvoNorm for int8 in the paper's models; ReLU in the digits ones."""
    if name in PAPER_MODELS:
        return "range_evonorm" if precision == "int8" else "evonorm"
    return "none"


def resolve(name: str, norm: str | None, precision: str, quant: QuantSpec | None) -> tuple[str, QuantSpec | None]:
    """Validate ``norm``/``precision`` for model ``name``; the norm to use and the QuantSpec (None for fp32)."""
    check_precision(precision)
    if precision == "int8" and name not in QUANTIZED_MODELS:
        raise ConfigError(
            "precision", f"model {name!r} has no 8-bit form; use precision=fp32 or a model among: "
            f"{', '.join(QUANTIZED_MODELS)}"
        )
    norm = default_norm(name, precision) if norm in (None, "", "auto") else norm
    allowed = MODEL_NORMS.get(name, NORMS)
    if norm not in allowed:
        raise choice_error("model.norm", norm, allowed)
    spec = (quant or QuantSpec()) if precision == "int8" else None
    return norm, spec


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int, width: int | None, norm: str,
                spec: QuantSpec | None) -> nn.Module:
    c, h = input_shape[0], input_shape[-1]
    if name == "cnn":
        return LowPrecDigitsCNN(c, num_classes, width or 16, h, norm=norm, spec=spec)
    if name in DEPTHS:
        return ResNetCifar(DEPTHS[name], num_classes, c, width or 16, norm, spec)
    if name == "vgg11":
        return VGG11(num_classes, c, h, width or 64, norm=norm, spec=spec)
    if name == "resnet18":
        return ResNetImageNet((2, 2, 2, 2), num_classes, c, width or 64, norm, spec)
    raise choice_error("model", name, QUANTIZED_MODELS)


__all__ = ["PRECISIONS", "PAPER_MODELS", "QUANTIZED_MODELS", "MODEL_NORMS", "check_precision", "default_norm",
           "resolve", "build_model"]
