"""c nodes' samples merged into one batch: the primitives of node-batched execution
(``sim.chunk=layers:N``; docs/execution.md).

Inside :func:`merged`, a layer's input ``x[b·c, ...]`` holds c nodes' samples
sample-major (row ``s·c + i`` is node i's sample s) and its parameters are stacked
``[c, ...]``. Per-sample layers need nothing; layers with parameters use the primitives
here (one grouped convolution / batched matmul for all c nodes), and the 8-bit layers of
:mod:`decent8.quant.layers` read :func:`merged_nodes` in their own ``forward`` to keep
their ranges per node. Outside it (the loop, a vmap chunk, a distributed rank) every
layer sees one node's tensors and ``merged_nodes()`` is 1.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn


class _Merged:
    nodes = 1


_MERGED = _Merged()


def merged_nodes() -> int:
    """How many nodes' samples the current batch holds (1 outside :func:`merged`)."""
    return _MERGED.nodes


@contextlib.contextmanager
def merged(c: int) -> Iterator[None]:
    """Within the block, batches hold ``c`` nodes' samples merged sample-major."""
    saved = _MERGED.nodes
    _MERGED.nodes = int(c)
    try:
        yield
    finally:
        _MERGED.nodes = saved


def per_node(x: torch.Tensor, c: int) -> torch.Tensor:
    """``x[b·c, ...]`` viewed as ``[b, c, features]``: node i's samples are ``[:, i]``."""
    return x.reshape(-1, c, x[0].numel())


def conv2d(m: nn.Conv2d, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, c: int) -> torch.Tensor:
    """``m``'s convolution of c merged nodes with stacked ``weight[c, O, C/g, kh, kw]``:
    ``x[b·c, C, H, W]`` is ``[b, c·C, H, W]`` in memory, so one ``conv2d`` with
    ``groups·c`` gives ``[b, c·O, H', W']``, which is ``[b·c, O, H', W']`` (no copies)."""
    if c == 1:
        return m._conv_forward(x, weight, bias)
    h = x.reshape(x.shape[0] // c, c * x.shape[1], *x.shape[2:])
    out = F.conv2d(h, weight.reshape(-1, *weight.shape[2:]), None if bias is None else bias.reshape(-1),
                   m.stride, m.padding, m.dilation, m.groups * c)
    return out.view(x.shape[0], -1, *out.shape[2:])


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, c: int) -> torch.Tensor:
    """``x · Wᵀ + bias`` of c merged nodes with stacked ``weight[c, O, F]``: one ``baddbmm``
    on ``x[c, b·…, F]``."""
    if c == 1:
        return F.linear(x, weight, bias)
    b = x.shape[0] // c
    x3 = x.reshape(b, c, -1, x.shape[-1]).transpose(0, 1).reshape(c, -1, x.shape[-1])  # [c, b·…, F]
    # formed as (W · x3ᵀ)ᵀ, so that backward's weight gradient g_outᵀ · x3 comes out [c, O, F]
    # contiguous, like the weight (x3 · Wᵀ gave it transposed: a strided copy into the flat
    # gradient; MLP at 256 nodes: forward + backward 25 % faster)
    x3t = x3.transpose(1, 2)
    out_t = torch.bmm(weight, x3t) if bias is None else torch.baddbmm(bias.unsqueeze(2), weight, x3t)
    out = out_t.transpose(1, 2)                                                      # [c, b·…, O]
    return out.reshape(c, b, -1, weight.shape[1]).transpose(0, 1).reshape(*x.shape[:-1], weight.shape[1])


__all__ = ["merged_nodes", "merged", "per_node", "conv2d", "linear"]
