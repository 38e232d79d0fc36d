"""Node-batched layers: one module definition, k independent models at once.

Every layer keeps parameters of the usual per-model shape (so initialisation, layouts
and checkpoints look like plain PyTorch), but its forward accepts activations with a
leading node axis ``[k, b, ...]`` and parameters that are either per-model
(``shape``, k = 1 semantics broadcast) or stacked (``[k, *shape]``, substituted by
:class:`~decent8.models.stacked.StackedModel` through ``functional_call``).

Linear layers become one batched matmul (``baddbmm``) and convolutions one grouped
convolution with ``groups = k``, so n nodes cost about what one model costs on the
same total batch — no Python loop over nodes.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _stacked(p: torch.Tensor | None, base_dim: int, k: int) -> torch.Tensor | None:
    """``p`` as ``[k, *shape]``: expand an unstacked parameter to k nodes."""
    if p is None:
        return None
    if p.dim() == base_dim:
        return p.unsqueeze(0).expand(k, *p.shape)
    return p


class Linear(nn.Linear):
    """y[k, b, …, out] = x[k, b, …, in] · W[k]ᵀ + bias[k]."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = x.shape[0]
        w = _stacked(self.weight, 2, k)
        lead = x.shape[1:-1]
        x3 = x.reshape(k, -1, x.shape[-1])
        if self.bias is not None:
            out = torch.baddbmm(_stacked(self.bias, 1, k).unsqueeze(1), x3, w.transpose(1, 2))
        else:
            out = torch.bmm(x3, w.transpose(1, 2))
        return out.reshape(k, *lead, w.shape[1])


class Conv2d(nn.Conv2d):
    """Per-node 2-D convolution of ``x[k, b, C, H, W]`` as one grouped convolution."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, b = x.shape[:2]
        w = _stacked(self.weight, 4, k)
        h = x.transpose(0, 1).reshape(b, k * x.shape[2], *x.shape[3:])
        bias = _stacked(self.bias, 1, k)
        out = F.conv2d(
            h,
            w.reshape(-1, *w.shape[2:]),
            None if bias is None else bias.reshape(-1),
            self.stride,
            self.padding,
            self.dilation,
            self.groups * k,
        )
        return out.view(b, k, -1, *out.shape[2:]).transpose(0, 1)


class Flatten(nn.Module):
    """``[k, b, ...]`` → ``[k, b, features]``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(2)


class _PerSample(nn.Module):
    """Apply a per-sample op (pooling) on ``[k·b, …]`` and restore the node axis."""

    def _apply_op(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, b = x.shape[:2]
        y = self._apply_op(x.reshape(k * b, *x.shape[2:]))
        return y.reshape(k, b, *y.shape[1:])


class MaxPool2d(_PerSample):
    def __init__(self, kernel_size: int, stride: int | None = None, padding: int = 0) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding

    def _apply_op(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding)


class AvgPool2d(_PerSample):
    def __init__(self, kernel_size: int, stride: int | None = None, padding: int = 0) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding

    def _apply_op(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding)


class GlobalAvgPool(nn.Module):
    """``[k, b, C, H, W]`` → ``[k, b, C]``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(-2, -1))
