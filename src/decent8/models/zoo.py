"""The paper's models (SPEC §7) by name, with a norm-activation layer and a precision.

============  ===================================  ============  =================
name          model                                parameters    default norm
============  ===================================  ============  =================
resnet20      CIFAR ResNet, 3 × 3 blocks, w = 16   0.27 M        evonorm / range_evonorm
resnet54      CIFAR ResNet, 3 × 8 blocks, w = 16   0.76 M        evonorm / range_evonorm
vgg11         VGG-11 config A + 512 hidden, drop   9.49 M        evonorm / range_evonorm
resnet18      ImageNet ResNet-18 (224 px)          11.2 M        evonorm / range_evonorm
cnn           digits CNN (:mod:`.small`)           9.9 k         none (ReLU)
mlp           MLP                                  —             none (ReLU)
text          bag of embeddings (token ids)        —             —
hf            BERT-family classifier (:mod:`.hf`)  22.7 M (MiniLM-L6) —
============  ===================================  ============  =================

(parameter counts for 10 classes; default norm for fp32 / int8). Every model is a
plain ``torch.nn`` module; ``precision=int8`` applies the 8-bit module transform
(:func:`decent8.quant.to_low_precision`) to it.
"""
from __future__ import annotations

from torch import nn

from ..errors import ConfigError, choice_error
from ..nn.norms import NORMS
from ..quant.quantizer import QuantSpec
from ..quant.transform import to_low_precision
from .resnet_cifar import DEPTHS, ResNetCifar
from .resnet_imagenet import ResNetImageNet
from .small import MLP, DigitsCNN, TextClassifier
from .vgg import VGG11

PRECISIONS = ("fp32", "int8")
#: models added for the paper (the digits ``cnn``/``mlp`` live in :mod:`.small`)
PAPER_MODELS = ("resnet20", "resnet54", "vgg11", "resnet18")
#: models with a norm-activation choice
NORM_MODELS = ("cnn",) + PAPER_MODELS
#: every built-in model (``model=pkg.module:factory`` names a user's)
BUILTIN_MODELS = ("cnn", "mlp", "text", "hf") + PAPER_MODELS
#: models with an 8-bit form (any model with Conv2d/Linear layers: the transform applies to all)
QUANTIZED_MODELS = BUILTIN_MODELS
#: norms each model accepts
MODEL_NORMS = {name: NORMS for name in NORM_MODELS}
MODEL_NORMS["mlp"] = ("none",)
MODEL_NORMS["text"] = ("none",)
MODEL_NORMS["hf"] = ("none",)


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
    norm = default_norm(name, precision) if norm in (None, "", "auto") else norm
    allowed = MODEL_NORMS.get(name, NORMS)
    if norm not in allowed:
        raise choice_error("model.norm", norm, allowed)
    spec = (quant or QuantSpec()) if precision == "int8" else None
    return norm, spec


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int, width: int | None, norm: str,
                spec: QuantSpec | None, vocab_size: int | None = None, pretrained_dir=None,
                seed: int = 0) -> nn.Module:
    """The float model ``name``, in its 8-bit form when ``spec`` is given (``pretrained_dir``
    and ``seed``: model=hf, see :mod:`.hf`)."""
    if name == "hf":
        from .hf import hf_model
        shape = input_shape.get("input_ids", next(iter(input_shape.values()))) if isinstance(input_shape, dict) \
            else input_shape
        module = hf_model(pretrained_dir, num_classes, vocab_size, shape[-1], width, seed)
        return to_low_precision(module, spec) if spec is not None else module
    if isinstance(input_shape, dict):  # keyword inputs (a .pt of a dict of tensors): no built-in image model takes them
        raise ConfigError("model", f"model={name} takes one input tensor, but the data has named inputs "
                                   f"({', '.join(sorted(map(str, input_shape)))}); use model=hf for input_ids / "
                                   f"attention_mask, or a model of your own (model=pkg.module:factory)")
    c, h = input_shape[0], input_shape[-1]
    if name == "cnn":
        module: nn.Module = DigitsCNN(c, num_classes, width or 16, h, norm=norm)
    elif name == "mlp":
        f = 1
        for s in input_shape:
            f *= s
        module = MLP(f, num_classes, width or 128)
    elif name == "text":
        if vocab_size is None:
            raise ConfigError("model", "model=text needs token-id data (data.name=agnews or a tensors file of ids)")
        module = TextClassifier(vocab_size, num_classes, width or 64)
    elif name in DEPTHS:
        module = ResNetCifar(DEPTHS[name], num_classes, c, width or 16, norm)
    elif name == "vgg11":
        module = VGG11(num_classes, c, h, width or 64, norm=norm)
    elif name == "resnet18":
        module = ResNetImageNet((2, 2, 2, 2), num_classes, c, width or 64, norm)
    else:
        raise choice_error("model", name, BUILTIN_MODELS)
    return to_low_precision(module, spec) if spec is not None else module


__all__ = ["PRECISIONS", "PAPER_MODELS", "BUILTIN_MODELS", "NORM_MODELS", "QUANTIZED_MODELS", "MODEL_NORMS", "check_precision", "default_norm",
           "resolve", "build_model"]
