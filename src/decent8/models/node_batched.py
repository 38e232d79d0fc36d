"""Node-batched layers: a chunk of c nodes through one grouped convolution / batched
matmul per layer (``sim.chunk=layers:N``; docs/architecture.md "Models", docs/execution.md).

An execution strategy, not a second copy of any model: the user's own module runs its
own ``forward`` on the chunk's samples merged sample-major into one batch
``[b·c, ...]`` (row ``s·c + i`` is node i's sample s), with the chunk's
stacked parameters ``[c, ...]`` substituted by ``functional_call``
(:mod:`decent8.node_axis`). Per-sample layers (activations, pooling, flatten, dropout)
need nothing; ``nn.Conv2d`` and ``nn.Linear`` get the node-aware ``forward`` of
:mod:`decent8.node_axis` for the duration of the call (:func:`node_batched`); decent8's
8-bit layers (``QConv2d``, ``QLinear``, ``ActQuant``, ``QAdd``, SPEC §5) read the merged
node count in their own ``forward`` and keep every range per node.

:func:`unsupported` says why a module cannot run this way (a layer with parameters or
buffers of another kind, e.g. BatchNorm or decent8's norm layers; an unknown
parameter-free leaf that might mix samples). The simulator also compares the output of
this path with the per-node loop before it uses it, which catches a ``forward`` that
mixes samples between nodes (``x.mean(0)``, …).
"""
from __future__ import annotations

import contextlib
import functools
from typing import Callable, Iterator

import torch
from torch import nn

from .. import node_axis
from . import norms
from ..quant.layers import ActQuant, Add, QAdd, QConv2d, QLinear


def _conv2d(m: nn.Conv2d, c: int, x: torch.Tensor) -> torch.Tensor:
    return node_axis.conv2d(m, x, m.weight, m.bias, c)


def _linear(m: nn.Linear, c: int, x: torch.Tensor) -> torch.Tensor:
    return node_axis.linear(x, m.weight, m.bias, c)


#: layer type (exact) → its node-aware forward ``f(module, c, *inputs)``
NODE_AWARE: dict[type, Callable[..., torch.Tensor]] = {nn.Conv2d: _conv2d, nn.Linear: _linear}

#: layers whose own ``forward`` handles a merged batch (:func:`decent8.node_axis.merged_nodes`)
NODE_NATIVE: tuple[type, ...] = (QConv2d, QLinear, ActQuant, QAdd)

#: parameter-free layers that act on each sample alone (exact types)
PER_SAMPLE: tuple[type, ...] = (
    nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.GELU, nn.SiLU, nn.ELU, nn.Tanh, nn.Sigmoid, nn.Softplus, nn.Identity,
    nn.SELU, nn.RReLU, nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout,
    nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.Flatten,
    norms.ReLU, Add,
)


#: module containers (no forward of their own, or the identity when empty)
CONTAINERS: tuple[type, ...] = (nn.Sequential, nn.ModuleList, nn.ModuleDict)


def unsupported(module: nn.Module) -> str:
    """Why ``module`` cannot run on node-batched layers ("" when it can)."""
    for name, m in module.named_modules():
        kind = type(m)
        where = f"{name or 'the model'} ({kind.__name__})"
        if kind in NODE_AWARE or kind in NODE_NATIVE:
            if isinstance(m, nn.Conv2d) and m.padding_mode != "zeros":
                return f"{where}: padding_mode {m.padding_mode!r}"
            continue
        if kind in CONTAINERS and not any(True for _ in m.parameters(recurse=False)):
            continue
        if kind in PER_SAMPLE:
            if isinstance(m, nn.Flatten) and m.start_dim == 0:
                return f"{where}: flattens the batch axis"
            continue
        if any(True for _ in m.parameters(recurse=False)) or any(True for _ in m.buffers(recurse=False)):
            return f"{where} has parameters or buffers of a layer without a node-batched form"
        if not any(True for _ in m.children()):
            return f"{where} is not a known per-sample layer"
    return ""


def node_aware_layers(module: nn.Module) -> list[tuple[nn.Module, Callable[..., torch.Tensor]]]:
    """The layers of ``module`` that need a node-aware ``forward``, with that forward
    (found once per model; :func:`node_batched` takes the list)."""
    return [(m, NODE_AWARE[type(m)]) for m in module.modules() if type(m) in NODE_AWARE]


@contextlib.contextmanager
def node_batched(layers: list[tuple[nn.Module, Callable[..., torch.Tensor]]], c: int) -> Iterator[None]:
    """Within the block, the model whose :func:`node_aware_layers` are ``layers`` takes c
    nodes' samples merged sample-major ``[b·c, ...]`` with stacked parameters ``[c, ...]``
    (substituted by ``functional_call``)."""
    try:
        for m, fn in layers:
            m.__dict__["forward"] = functools.partial(fn, m, c)  # shadows the class's forward
        with node_axis.merged(c):
            yield
    finally:
        for m, _ in layers:
            m.__dict__.pop("forward", None)


__all__ = ["NODE_AWARE", "NODE_NATIVE", "PER_SAMPLE", "CONTAINERS", "unsupported", "node_aware_layers", "node_batched"]
