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

from typing import Any

from torch import nn

from ..errors import ConfigError, choice_error
from ..quant.quantizer import QuantSpec
from ..quant.transform import to_low_precision
from .norms import NORMS
from .registry import MODELS, ModelArgs, register_model
from .resnet_cifar import DEPTHS, ResNetCifar
from .resnet_imagenet import ResNetImageNet
from .small import MLP, DigitsCNN, TextClassifier
from .vgg import VGG11
from .hf import hf_model

PRECISIONS = ("fp32", "int8")
_NONE = ("none",)


@register_model("cnn")
def _cnn(a: ModelArgs) -> nn.Module:
    return DigitsCNN(a.channels, a.num_classes, a.width or 16, a.size, norm=a.norm)


@register_model("mlp", norms=_NONE)
def _mlp(a: ModelArgs) -> nn.Module:
    f = 1
    for s in a.input_shape:
        f *= s
    return MLP(f, a.num_classes, a.width or 128)


@register_model("text", norms=_NONE)
def _text(a: ModelArgs) -> nn.Module:
    if a.vocab_size is None:
        raise ConfigError("model", "model=text needs token-id data (data.name=agnews or a tensors file of ids)")
    return TextClassifier(a.vocab_size, a.num_classes, a.width or 64)


@register_model("hf", norms=_NONE, named_inputs=True)
def _hf(a: ModelArgs) -> nn.Module:
    shape = a.input_shape.get("input_ids", next(iter(a.input_shape.values()))) if isinstance(a.input_shape, dict) \
        else a.input_shape
    return hf_model(a.pretrained_dir, a.num_classes, a.vocab_size, shape[-1], a.width, a.seed)


def _resnet_cifar(name: str) -> None:
    @register_model(name, paper=True)
    def build(a: ModelArgs) -> nn.Module:
        return ResNetCifar(DEPTHS[name], a.num_classes, a.channels, a.width or 16, a.norm)


for _name in DEPTHS:
    _resnet_cifar(_name)


@register_model("vgg11", paper=True)
def _vgg11(a: ModelArgs) -> nn.Module:
    return VGG11(a.num_classes, a.channels, a.size, a.width or 64, norm=a.norm)


@register_model("resnet18", paper=True)
def _resnet18(a: ModelArgs) -> nn.Module:
    return ResNetImageNet((2, 2, 2, 2), a.num_classes, a.channels, a.width or 64, a.norm)


def __getattr__(name: str) -> Any:
    """Read from the registry when asked (a model registered later is in them): ``PAPER_MODELS``
    (the paper's), ``BUILTIN_MODELS`` and ``QUANTIZED_MODELS`` (every registered model: the 8-bit
    transform applies to any with Conv2d/Linear layers), ``NORM_MODELS`` (with a norm choice),
    ``MODEL_NORMS`` (name -> the norms it accepts)."""
    if name == "PAPER_MODELS":
        return tuple(n for n, e in MODELS.items() if e.paper)
    if name in ("BUILTIN_MODELS", "QUANTIZED_MODELS"):
        return MODELS.names()
    if name == "NORM_MODELS":
        return tuple(n for n, e in MODELS.items() if e.norms != _NONE)
    if name == "MODEL_NORMS":
        return {n: e.norms for n, e in MODELS.items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise choice_error("precision", precision, PRECISIONS)
    return precision


def default_norm(name: str, precision: str) -> str:
    """EvoNorm-S0 for fp32 and Range EvoNorm for int8 in the paper's models; ReLU in the digits ones."""
    entry = MODELS.get(name)
    if entry is not None and entry.paper:
        return "range_evonorm" if precision == "int8" else "evonorm"
    return "none"


def resolve(name: str, norm: str | None, precision: str, quant: QuantSpec | None) -> tuple[str, QuantSpec | None]:
    """Validate ``norm``/``precision`` for model ``name``; the norm to use and the QuantSpec (None for fp32)."""
    check_precision(precision)
    norm = default_norm(name, precision) if norm in (None, "", "auto") else norm
    allowed = MODELS[name].norms if name in MODELS else NORMS
    if norm not in allowed:
        raise choice_error("model.norm", norm, allowed)
    spec = (quant or QuantSpec()) if precision == "int8" else None
    return norm, spec


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int, width: int | None, norm: str,
                spec: QuantSpec | None, vocab_size: int | None = None, pretrained_dir=None,
                seed: int = 0) -> nn.Module:
    """The float model ``name`` (a registered one, :data:`.registry.MODELS`), in its 8-bit form
    when ``spec`` is given (``pretrained_dir`` and ``seed``: model=hf, see :mod:`.hf`)."""
    entry = MODELS.get(name)
    if isinstance(input_shape, dict) and (entry is None or not entry.named_inputs):
        # keyword inputs (a .pt of a dict of tensors): no built-in image model takes them
        raise ConfigError("model", f"model={name} takes one input tensor, but the data has named inputs "
                                   f"({', '.join(sorted(map(str, input_shape)))}); use model=hf for input_ids / "
                                   f"attention_mask, or a model of your own (model=pkg.module:factory)")
    if entry is None:
        raise choice_error("model", name, MODELS.names())
    module = entry.obj(ModelArgs(input_shape, num_classes, width, norm, vocab_size, pretrained_dir, seed))
    return to_low_precision(module, spec) if spec is not None else module


__all__ = ["PRECISIONS", "PAPER_MODELS", "BUILTIN_MODELS", "NORM_MODELS", "QUANTIZED_MODELS", "MODEL_NORMS",
           "check_precision", "default_norm", "resolve", "build_model", "register_model"]
