"""Per-layer addition and multiplication counts (paper Tables 7, 8 and 9).

The counts come from a real model: :func:`trace_model` runs one forward pass of a
``[b, C, H, W]`` input (one model, batch b) with forward hooks on the layer modules
and records each layer's shape (Table 8's notation: b, C_in, C_out, K, L = input
height/width, P, S). :func:`layer_ops` then applies the paper's formulas:

======================  ==================================  ===================================
layer                   training (Table 7) adds / mults     inference (Table 9) adds / mults
======================  ==================================  ===================================
conv                    3·b·Co·Ci·K²·L'² each               b·Co·Ci·K²·L'² each
linear                  3·b·Co·Ci each                      b·Co·Ci each
quantization (act.)     2·b·C·L² / 4·b·C·L²                 — (not in Table 9)
quantization (weight)   2·numel / 4·numel                   2·numel / 4·numel
Range BN + ReLU         9·b·C·L² / 6·b·C·L² + 7·C           3·b·C·L² / 2·b·C·L² + 3·C
Range EvoNorm           6·b·C·L² / 10·b·C·L² + 5·C          2·b·C·L² / 4·b·C·L² + 2·C
skip connection         2·b·C·L² / —                        2·b·C·L² / —
average pool            b·C·L² / 2·b·C                      b·C·L² / b·C
======================  ==================================  ===================================

with ``L' = (L + 2P − K)/S + 1`` (floor; the conv's real output size, H'·W' for
non-square maps) and numel = Co·Ci·K² for a conv weight (Co·Ci for a linear one;
a bias adds its own numel). Conv and linear biases are not counted (the tables have no
term for them); the weight-quantization rows exist only in 8-bit models, the
activation-quantization row for every activation quantizer
(:class:`~decent8.quant.layers.ActQuant`) the 8-bit model runs in its forward pass.

Layers the paper's tables do not cover get documented estimates, marked ``extension``
in :data:`EXTENSIONS`: EvoNorm-S0 (counted as Range EvoNorm: the variance costs about
what the chunked range does), BatchNorm + ReLU and GroupNorm + ReLU (counted as Range
BN + ReLU), a plain ReLU (one comparison per element, counted as an add; twice in
training), max pooling (the average-pool row without its multiplications) and dropout
(no arithmetic counted).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from ..errors import ConfigError, choice_error
from ..models.norms import BatchNormReLU, EvoNormS0, GroupNormReLU, RangeBatchNorm, RangeEvoNorm
from ..models.norms import ReLU as NormReLU
from ..models.blocks import GlobalAvgPool
from ..quant.layers import ActQuant, Add, QAdd, QConv2d, QLinear
from ..models import MODELS, make_model
from ..models.zoo import QUANTIZED_MODELS, build_model, resolve

#: Layer kinds, in the order of the paper's tables.
KINDS = ("input", "conv", "linear", "act_quant", "weight_quant", "range_bn", "range_evonorm", "evonorm", "bn",
         "gn", "relu", "skip", "avg_pool", "max_pool", "dropout")
#: Norm-activation kinds (the layer after a conv).
NORM_KINDS = ("range_bn", "range_evonorm", "evonorm", "bn", "gn", "relu")
#: Kinds whose counts are our estimates, not rows of Table 7 / 9.
EXTENSIONS = ("evonorm", "bn", "gn", "relu", "max_pool", "dropout")
#: Norm kinds that end in a ReLU ("Range batch-norm + ReLU" in Table 7).
RELU_NORMS = ("range_bn", "bn", "gn")

_NORM_CLASSES: tuple[tuple[type, str], ...] = (
    (RangeBatchNorm, "range_bn"), (RangeEvoNorm, "range_evonorm"), (EvoNormS0, "evonorm"),
    (BatchNormReLU, "bn"), (GroupNormReLU, "gn"), (NormReLU, "relu"),
)


@dataclass
class Layer:
    """One traced layer in Table 8's notation plus its op counts (filled by :func:`layer_ops`)."""

    name: str                    # module path in the model ("stages.0.1.conv2"); "" for the model input
    kind: str                    # one of KINDS
    b: int                       # batch (samples per node; for a linear layer all leading positions)
    c_in: int = 0
    c_out: int = 0
    k: int = 0                   # kernel size K (K² = kh·kw for a non-square kernel)
    kk: int = 0                  # K² (kh·kw)
    L: int = 0                   # input height/width (L² = H·W for non-square maps)
    LL: int = 1                  # L² = H·W of the input
    p: int = 0                   # padding P
    s: int = 1                   # stride S
    out_LL: int = 1              # L'² = H'·W' of the output
    groups: int = 1
    numel: int = 0               # weight (+ bias) elements, for weight quantization
    shortcut: bool = False       # a layer on a residual block's downsample shortcut
    train_adds: int = 0
    train_mults: int = 0
    infer_adds: int = 0
    infer_mults: int = 0

    @property
    def in_elems(self) -> int:
        """Elements of the layer's input activation (b·C_in·L²)."""
        return self.b * self.c_in * self.LL

    @property
    def out_elems(self) -> int:
        """Elements of the layer's output activation."""
        if self.kind in ("conv",):
            return self.b * self.c_out * self.out_LL
        if self.kind == "linear":
            return self.b * self.c_out
        if self.kind in ("avg_pool", "max_pool"):
            return self.b * self.c_in * self.out_LL
        if self.kind == "weight_quant":
            return 0
        return self.in_elems

    def ops(self, phase: str) -> tuple[int, int]:
        """``(adds, mults)`` for ``phase`` = "training" or "inference"."""
        if phase == "training":
            return self.train_adds, self.train_mults
        if phase == "inference":
            return self.infer_adds, self.infer_mults
        raise ValueError(f"phase must be 'training' or 'inference', got {phase!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def conv_out_size(L: int, k: int, p: int, s: int) -> int:
    """Table 7's ``(L + 2P − K)/S + 1`` (floor division: the real output size)."""
    return (L + 2 * p - k) // s + 1


def layer_ops(layer: Layer) -> Layer:
    """Fill ``layer``'s training and inference add/mult counts from Tables 7 and 9 (in place)."""
    b, ci, co, LL = layer.b, layer.c_in, layer.c_out, layer.LL
    act = b * ci * LL  # b·C_in·L²
    kind = layer.kind
    ta = tm = ia = im = 0
    if kind == "conv":
        macs = b * co * (ci // layer.groups) * layer.kk * layer.out_LL
        ta = tm = 3 * macs
        ia = im = macs
    elif kind == "linear":
        macs = b * co * ci
        ta = tm = 3 * macs
        ia = im = macs
    elif kind == "act_quant":
        ta, tm = 2 * act, 4 * act
        ia = im = 0  # Table 9 has no activation-quantization row
    elif kind == "weight_quant":
        ta, tm = 2 * layer.numel, 4 * layer.numel
        ia, im = 2 * layer.numel, 4 * layer.numel
    elif kind in ("range_bn", "bn", "gn"):
        ta, tm = 9 * act, 6 * act + 7 * ci
        ia, im = 3 * act, 2 * act + 3 * ci
    elif kind in ("range_evonorm", "evonorm"):
        ta, tm = 6 * act, 10 * act + 5 * ci
        ia, im = 2 * act, 4 * act + 2 * ci
    elif kind == "relu":
        ta, ia = 2 * act, act
    elif kind == "skip":
        ta = ia = 2 * act
    elif kind == "avg_pool":
        ta, tm = act, 2 * b * ci
        ia, im = act, b * ci
    elif kind == "max_pool":
        ta = ia = act
    elif kind in ("input", "dropout"):
        pass
    else:  # pragma: no cover - guarded by KINDS
        raise ValueError(f"unknown layer kind {kind!r}")
    layer.train_adds, layer.train_mults, layer.infer_adds, layer.infer_mults = ta, tm, ia, im
    return layer


def _spatial(shape: torch.Size) -> tuple[int, int, int]:
    """``(C, L, L²)`` of an activation ``[b, C, H, W]`` (``[b, C]``: L = 1)."""
    if len(shape) >= 4:
        c, h, w = int(shape[1]), int(shape[-2]), int(shape[-1])
        return c, h, h * w
    return int(shape[-1]), 1, 1


def _shortcut(name: str) -> bool:
    return any(part in ("shortcut", "downsample") for part in name.split("."))


def _kind_of(module: nn.Module) -> str | None:
    for cls, kind in _NORM_CLASSES:
        if isinstance(module, cls):
            return kind
    if isinstance(module, nn.Conv2d):
        return "conv"
    if isinstance(module, nn.Linear):
        return "linear"
    if isinstance(module, ActQuant):
        return "act_quant"
    if isinstance(module, (Add, QAdd)):
        return "skip"
    if isinstance(module, (GlobalAvgPool, nn.AvgPool2d, nn.AdaptiveAvgPool2d)):
        return "avg_pool"
    if isinstance(module, nn.MaxPool2d):
        return "max_pool"
    if isinstance(module, nn.ReLU):
        return "relu"
    if isinstance(module, nn.Dropout):
        return "dropout"
    return None


@dataclass
class ModelCounts:
    """The traced layers of one model at one batch size, with their op counts."""

    model: str
    norm: str
    precision: str
    batch: int
    input_shape: tuple[int, ...]
    parameters: int
    layers: list[Layer] = field(default_factory=list)

    def total(self, phase: str) -> tuple[int, int]:
        adds = mults = 0
        for layer in self.layers:
            a, m = layer.ops(phase)
            adds += a
            mults += m
        return adds, mults

    def by_kind(self, phase: str) -> dict[str, tuple[int, int]]:
        out: dict[str, list[int]] = {}
        for layer in self.layers:
            a, m = layer.ops(phase)
            acc = out.setdefault(layer.kind, [0, 0])
            acc[0] += a
            acc[1] += m
        return {k: (v[0], v[1]) for k, v in out.items()}


def trace_model(model: nn.Module, input_shape: tuple[int, ...], batch: int) -> list[Layer]:
    """Run one forward pass of a ``[batch, *input_shape]`` input through ``model`` and
    return its layers (Table 8 notation) in execution order, op counts filled in.

    The model is run in eval mode under ``no_grad`` (its training flag is restored), so
    running statistics are not touched. 8-bit conv / linear layers also contribute a
    ``weight_quant`` row (their weight and bias are quantized once per pass).
    """
    if batch < 1:
        raise ConfigError("batch", f"must be a positive integer, got {batch!r}")
    records: list[tuple[int, int, Layer]] = []
    order: dict[int, int] = {}
    names = {id(m): n for n, m in model.named_modules()}
    handles = []

    def pre_hook(module: nn.Module, inputs: tuple[Any, ...]) -> None:
        order.setdefault(id(module), len(order))

    def hook(module: nn.Module, inputs: tuple[Any, ...], output: Any) -> None:
        kind = _kind_of(module)
        name = names.get(id(module), "")
        x = inputs[0]
        shape = x.shape
        seq = order.get(id(module), len(order))
        if kind == "conv":
            c, L, LL = _spatial(shape)
            kh, kw = module.kernel_size
            out_LL = int(output.shape[-2]) * int(output.shape[-1])
            # L'² is the real output size: Table 7's ((L + 2P − K)/S + 1)² for a square map
            layer = Layer(name, "conv", int(shape[0]), c_in=c, c_out=int(module.out_channels), k=int(kh),
                          kk=int(kh) * int(kw), L=L, LL=LL, p=int(module.padding[0]), s=int(module.stride[0]),
                          out_LL=out_LL, groups=int(module.groups), shortcut=_shortcut(name))
        elif kind == "linear":
            lead = 1
            for s in shape[:-1]:
                lead *= int(s)
            layer = Layer(name, "linear", lead, c_in=int(shape[-1]), c_out=int(module.out_features))
        elif kind in ("avg_pool", "max_pool"):
            c, L, LL = _spatial(shape)
            out_LL = int(output.shape[-2]) * int(output.shape[-1]) if output.dim() >= 4 else 1
            layer = Layer(name, kind, int(shape[0]), c_in=c, c_out=c, L=L, LL=LL, out_LL=out_LL)
        elif kind is not None:
            c, L, LL = _spatial(shape)
            layer = Layer(name, kind, int(shape[0]), c_in=c, c_out=c, L=L, LL=LL, out_LL=LL,
                          shortcut=_shortcut(name))
        else:  # pragma: no cover - hooks are only registered on known kinds
            return
        records.append((seq, 0, layer_ops(layer)))
        if isinstance(module, (QConv2d, QLinear)):
            numel = module.weight.numel() + (module.bias.numel() if module.bias is not None else 0)
            wq = Layer(name + ".weight", "weight_quant", 1, c_in=int(layer.c_in), c_out=int(layer.c_out),
                       k=layer.k, kk=layer.kk, numel=numel, shortcut=layer.shortcut)
            records.append((seq, 1, layer_ops(wq)))

    for module in model.modules():
        if _kind_of(module) is not None:
            handles.append(module.register_forward_pre_hook(pre_hook))
            handles.append(module.register_forward_hook(hook))
    modes = [(m, m.training) for m in model.modules()]
    try:
        model.eval()
        param = next(model.parameters(), None)
        device = param.device if param is not None else torch.device("cpu")
        x = torch.zeros(batch, *input_shape, device=device)
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
        for m, mode in modes:
            m.training = mode
    records.sort(key=lambda r: (r[0], r[1]))
    c, L, LL = _spatial(torch.Size((batch, *input_shape)))
    first = Layer("input", "input", batch, c_in=c, c_out=c, L=L, LL=LL, out_LL=LL)
    return [first] + [r[2] for r in records]


#: Input shapes and classes of the data sets a model may be costed for.
DATASETS: dict[str, tuple[tuple[int, ...], int]] = {
    "cifar10": ((3, 32, 32), 10),
    "imagenette": ((3, 224, 224), 10),
    "digits": ((1, 8, 8), 10),
    "mnist": ((1, 28, 28), 10),
}


def default_dataset(model: str) -> str:
    if model == "resnet18":
        return "imagenette"
    if model in ("cnn", "mlp"):
        return "digits"
    return "cifar10"


def input_shape_for(dataset: str, image_size: int | None = None) -> tuple[tuple[int, ...], int]:
    """``(input shape, classes)`` of ``dataset`` (``image_size`` resizes an image data set)."""
    if dataset not in DATASETS:
        raise ConfigError("data", f"the cost model covers the image data sets; unknown value {dataset!r}; "
                                  f"allowed: {', '.join(sorted(DATASETS))}")
    shape, classes = DATASETS[dataset]
    if image_size is not None:
        if isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 1:
            raise ConfigError("data.image_size", f"must be a positive integer, got {image_size!r}")
        shape = (shape[0], image_size, image_size)
    return shape, classes


def build_for_cost(model: str, norm: str | None, precision: str, dataset: str | None = None,
                   width: int | None = None, image_size: int | None = None) -> tuple[nn.Module, tuple[int, ...], str]:
    """The model to cost (validated like ``decent8 train`` does), its input shape and the norm used."""

    if model not in MODELS:
        raise choice_error("model", model, MODELS)
    input_shape, classes = input_shape_for(dataset or default_dataset(model), image_size)
    if width is not None and (isinstance(width, bool) or not isinstance(width, int) or width < 1):
        raise ConfigError("model.width", f"must be a positive integer, got {width!r}")
    resolved_norm, spec = resolve(model, norm, precision, None)
    if model in QUANTIZED_MODELS:
        # the norm-activation form at both precisions (make_model's fp32 digits CNN uses
        # functional ReLUs, which hooks cannot see; this one is parameter-identical)
        net = build_model(model, input_shape, classes, width, resolved_norm, spec)
    else:
        net = make_model(model, input_shape, classes, width=width, norm=resolved_norm, precision=precision)
    return net, input_shape, resolved_norm


def count_model(model: str, norm: str | None = None, precision: str = "fp32", batch: int = 32,
                dataset: str | None = None, width: int | None = None, image_size: int | None = None) -> ModelCounts:
    """Build ``model`` (by name, as ``decent8 train`` would) and count its ops at ``batch`` per node."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigError("batch", f"must be a positive integer, got {batch!r}")
    net, input_shape, resolved = build_for_cost(model, norm, precision, dataset, width, image_size)
    params = sum(p.numel() for p in net.parameters())
    try:  # shapes only: trace on the meta device, no arithmetic
        layers = trace_model(net.to("meta"), input_shape, batch)
    except (NotImplementedError, RuntimeError):  # pragma: no cover - an op without a meta kernel
        net, _, _ = build_for_cost(model, norm, precision, dataset, width, image_size)
        layers = trace_model(net, input_shape, batch)
    return ModelCounts(model, resolved, precision, batch, tuple(input_shape), params, layers)


def macs(layer: Layer) -> int:
    """Multiply-accumulates of one forward pass of a conv / linear layer (0 for the others)."""
    if layer.kind == "conv":
        return layer.b * layer.c_out * (layer.c_in // layer.groups) * layer.kk * layer.out_LL
    if layer.kind == "linear":
        return layer.b * layer.c_out * layer.c_in
    return 0


__all__ = ["KINDS", "NORM_KINDS", "EXTENSIONS", "RELU_NORMS", "DATASETS", "Layer", "ModelCounts", "conv_out_size",
           "layer_ops", "trace_model", "input_shape_for", "build_for_cost", "count_model", "default_dataset", "macs"]
