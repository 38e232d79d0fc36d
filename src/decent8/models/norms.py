"""Normalization-activation layers (SPEC §5; paper Eq. 2–5), plain per-model modules.

All layers take one node's activations ``[b, C, H, W]`` (or ``[b, C]``) and per-channel
parameters ``[C]``; the simulator runs them per node or for a chunk of nodes under
``torch.func.vmap``, so every statistic is per node.

In the ResNets/VGG of this package the norm layer *is* the activation:

=================  ================================================================
``evonorm``        EvoNorm-S0 (Eq. 4): ``x·σ(v·x) / sqrt(Var_g(x) + 1e-5)·γ + β``,
                   variance per sample over each of G = 8 channel groups × H × W.
``range_evonorm``  Range EvoNorm (Eq. 5): ``x·hardsigmoid(v·x)·s·γ + β`` with
                   ``s = 1/(C(L)·R + 1e-5)``, R the mean over 16 chunks of each
                   sample-group's (max − min), ``C(L) = 0.5·0.35·(1 + sqrt(π·ln 4)) /
                   sqrt(2·ln L)``, L the chunk length. No running statistics.
``range_bn``       Range BatchNorm (Eq. 3): ``(x − μ)·s·γ + β`` with the chunked range
                   per channel over the node's batch (16 chunks); running mean and
                   running scale (weight 0.1 on the old value) at evaluation.
``bn``             BatchNorm + ReLU (Eq. 2), per node, running mean/var (PyTorch's
                   momentum 0.1 on the new value).
``gn``             GroupNorm (G = 8) + ReLU.
``none``           ReLU.
=================  ================================================================

With a :class:`~decent8.quant.QuantSpec` (``precision=int8``; set by the 8-bit module
transform, :func:`decent8.quant.transform.to_low_precision`) a layer quantizes its
input (activation quantizer with running min/max), its parameters and its
normalising scale (per-tensor min/max, deterministic rounding), and puts
an 8-bit gradient quantizer on its output (Range EvoNorm: ``x̂ = Q(x)``,
``num = x̂·hardsigmoid(Q(v)·x̂)``, ``y = num·Q(s)·Q(γ) + Q(β)``). A model may switch
that gradient quantizer off (``grad_quant=False``) where the layer's only consumers are
quantized convs / residual adds: they already hand back an 8-bit gradient with the
same whole-tensor range per node, and Q_b is idempotent on its own grid.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..quant.layers import ActQuant, update_running
from ..quant.quantizer import QuantSpec, quantize_grad, quantize_tensor
from ..errors import choice_error

NORMS = ("none", "evonorm", "range_evonorm", "range_bn", "bn", "gn")
#: Channel groups of EvoNorm-S0, Range EvoNorm and GroupNorm (SPEC §5: G = 8).
GROUPS = 8
#: Chunks of the chunked range (Banner et al. 2018; SPEC §5: 16).
CHUNKS = 16
EPS = 1e-5


def range_constant(length: int) -> float:
    """``C(L) = 0.5·0.35·(1 + sqrt(π·ln 4)) / sqrt(2·ln L)`` (L ≥ 2; smaller L uses 2)."""
    L = max(int(length), 2)
    return 0.5 * 0.35 * (1.0 + math.sqrt(math.pi * math.log(4.0))) / math.sqrt(2.0 * math.log(L))


def chunk_count(n: int, chunks: int = CHUNKS) -> int:
    """Chunks used for ``n`` elements: ``chunks`` when it divides n into pieces of ≥ 2,
    else the largest such divisor below it (1 when n < 4)."""
    for c in range(min(chunks, n // 2), 1, -1):
        if n % c == 0:
            return c
    return 1


def chunked_range(y: torch.Tensor, chunks: int = CHUNKS) -> tuple[torch.Tensor, int]:
    """Mean over chunks of (max − min) along the last dim of ``y[..., n]`` and the chunk length.

    Differentiable like the reference code's ``y.max(-1)[0]``: the gradient of each
    chunk's max (min) goes to one arg-max (arg-min) element.
    """
    n = y.shape[-1]
    c = chunk_count(n, chunks)
    yc = y.reshape(*y.shape[:-1], c, n // c)
    return (yc.max(-1).values - yc.min(-1).values).mean(-1), n // c


def _groups(channels: int, groups: int) -> int:
    return math.gcd(channels, groups)


class NormAct(nn.Module):
    """Common part: per-channel parameters, optional quantization.

    Subclasses implement :meth:`_forward` on ``xt[b, C, S]`` (S = H·W, or 1) with
    parameter views ``[1, C, 1]``.
    """

    has_v: bool = False

    def __init__(self, channels: int, spec: QuantSpec | None = None, zero_init: bool = False,
                 grad_quant: bool = True) -> None:
        super().__init__()
        self.channels = channels
        self.zero_init = zero_init
        self.grad_quant = grad_quant
        if self.has_v:
            self.v = nn.Parameter(torch.ones(channels))
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.spec: QuantSpec | None = None
        self.act_quant: ActQuant | None = None
        self.set_spec(spec)
        self.reset_parameters()

    def set_spec(self, spec: QuantSpec | None) -> None:
        """Make the layer 8-bit (``spec``) or full precision (None)."""
        self.spec = spec
        self.act_quant = ActQuant(spec) if spec is not None else None

    def reset_parameters(self) -> None:
        with torch.no_grad():
            if self.has_v:
                self.v.fill_(1.0)
            self.weight.fill_(0.0 if self.zero_init else 1.0)
            self.bias.zero_()

    def _param(self, p: torch.Tensor) -> torch.Tensor:
        """``p[C]`` as ``[1, C, 1]``, quantized in an int8 layer."""
        if self.spec is not None:
            p = quantize_tensor(p, self.spec.bits)
        return p.reshape(1, -1, 1)

    def _q(self, t: torch.Tensor) -> torch.Tensor:
        """A normalising scale quantized with its own range (deterministic) in an int8 layer."""
        return t if self.spec is None else quantize_tensor(t, self.spec.bits)

    def _affine(self, num: torch.Tensor, group_scale: torch.Tensor) -> torch.Tensor:
        """``num·scale·γ + β`` for a per-sample, per-group ``scale[b, G, 1]``, as one
        multiply-add with the small ``[b, C, 1]`` factor ``scale·γ``."""
        b, c, _ = num.shape
        groups = group_scale.shape[1]
        gamma = self._param(self.weight).reshape(1, groups, c // groups)
        factor = (group_scale * gamma).reshape(b, c, 1)
        return torch.addcmul(self._param(self.bias), num, factor)

    def _forward(self, xt: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c = x.shape[:2]
        if self.act_quant is not None:
            x = self.act_quant(x)
        y = self._forward(x.reshape(b, c, -1)).reshape(x.shape)
        if self.spec is not None and self.grad_quant:
            y = quantize_grad(y, self.spec.grad_bits, self.spec.stochastic)
        return y

    def extra_repr(self) -> str:
        return f"{self.channels}" + (f", bits={self.spec.bits}" if self.spec is not None else "")


class EvoNormS0(NormAct):
    """EvoNorm-S0 (Eq. 4): ``x·σ(v·x) / sqrt(Var_g(x) + 1e-5)·γ + β``, G = 8 groups per sample."""

    has_v = True

    def __init__(self, channels: int, spec: QuantSpec | None = None, zero_init: bool = False,
                 grad_quant: bool = True, groups: int = GROUPS, eps: float = EPS) -> None:
        self.groups = _groups(channels, groups)
        self.eps = eps
        super().__init__(channels, spec, zero_init, grad_quant)

    def _forward(self, xt: torch.Tensor) -> torch.Tensor:
        b = xt.shape[0]
        num = xt * torch.sigmoid(xt * self._param(self.v))
        var = xt.reshape(b, self.groups, -1).var(-1, unbiased=False, keepdim=True)
        inv = self._q(torch.rsqrt(var + self.eps))  # [b, G, 1]
        return self._affine(num, inv)


class RangeEvoNorm(NormAct):
    """Range EvoNorm (Eq. 5; SPEC §5), no running statistics."""

    has_v = True

    def __init__(self, channels: int, spec: QuantSpec | None = None, zero_init: bool = False,
                 grad_quant: bool = True, groups: int = GROUPS, chunks: int = CHUNKS, eps: float = EPS) -> None:
        self.groups = _groups(channels, groups)
        self.chunks = chunks
        self.eps = eps
        super().__init__(channels, spec, zero_init, grad_quant)

    def _forward(self, xt: torch.Tensor) -> torch.Tensor:
        b = xt.shape[0]
        num = xt * F.hardsigmoid(xt * self._param(self.v))
        r, length = chunked_range(xt.reshape(b, self.groups, -1), self.chunks)
        scale = self._q(1.0 / (range_constant(length) * r + self.eps)).unsqueeze(-1)  # [b, G, 1]
        return self._affine(num, scale)


class _RunningNorm(NormAct):
    """Batch normalisation per node: ``(x − μ)·s·γ + β`` with the batch's statistics in
    training and running ones for evaluation; subclasses give the statistics (:meth:`_batch`),
    the scale ``s`` of the second statistic (:meth:`_scale`) and the activation."""

    second: str = "var"   # the running buffer beside running_mean

    def __init__(self, channels: int, spec: QuantSpec | None = None, zero_init: bool = False,
                 grad_quant: bool = True, momentum: float = 0.1, eps: float = EPS) -> None:
        self.momentum = momentum
        self.eps = eps
        super().__init__(channels, spec, zero_init, grad_quant)
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer(f"running_{self.second}", torch.ones(channels))

    def _batch(self, xt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:  # pragma: no cover - abstract
        """(mean, second statistic, its value for the running buffer, weight of the old value)."""
        raise NotImplementedError

    def _scale(self, second: torch.Tensor) -> torch.Tensor:
        return second

    def _act(self, y: torch.Tensor) -> torch.Tensor:
        return y

    def _forward(self, xt: torch.Tensor) -> torch.Tensor:
        running_second = getattr(self, f"running_{self.second}")
        if self.training:
            mean, second, for_running, keep = self._batch(xt)
            update_running(self.running_mean, mean, keep)
            update_running(running_second, for_running, keep)
        else:
            mean, second = self.running_mean, running_second
        scale = self._q(self._scale(second))
        y = (xt - mean.reshape(1, -1, 1)) * scale.reshape(1, -1, 1)
        return self._act(y * self._param(self.weight) + self._param(self.bias))


class RangeBatchNorm(_RunningNorm):
    """Range BatchNorm (Eq. 3): ``(x − μ)·s·γ + β``, ``s = 1/(C(L)·R + 1e-5)`` with the
    chunked range per channel over the node's batch; running mean and scale for eval
    (``momentum`` is the weight of the old value, Banner et al.'s convention)."""

    second = "scale"

    def __init__(self, channels: int, spec: QuantSpec | None = None, zero_init: bool = False,
                 grad_quant: bool = True, chunks: int = CHUNKS, momentum: float = 0.1, eps: float = EPS) -> None:
        self.chunks = chunks
        super().__init__(channels, spec, zero_init, grad_quant, momentum, eps)

    def _batch(self, xt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
        b, c, s = xt.shape
        per_channel = xt.transpose(0, 1).reshape(c, b * s)  # [C, b·S]
        mean = per_channel.mean(-1)
        r, length = chunked_range(per_channel, self.chunks)
        scale = 1.0 / (range_constant(length) * r + self.eps)
        return mean, scale, scale, self.momentum


class BatchNormReLU(_RunningNorm):
    """Per-node BatchNorm (Eq. 2) followed by ReLU; running mean/var for evaluation
    (``momentum``: PyTorch's convention, the weight of the new value)."""

    def _batch(self, xt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
        b, c, s = xt.shape
        var, mean = torch.var_mean(xt, dim=(0, 2), unbiased=False)  # [C]
        n = b * s
        return mean, var, var * (n / max(n - 1, 1)), 1.0 - self.momentum

    def _scale(self, second: torch.Tensor) -> torch.Tensor:
        return torch.rsqrt(second + self.eps)

    def _act(self, y: torch.Tensor) -> torch.Tensor:
        return torch.relu(y)


class GroupNormReLU(NormAct):
    """Per-sample GroupNorm (G = 8 groups) followed by ReLU."""

    def __init__(self, channels: int, spec: QuantSpec | None = None, zero_init: bool = False,
                 grad_quant: bool = True, groups: int = GROUPS, eps: float = EPS) -> None:
        self.groups = _groups(channels, groups)
        self.eps = eps
        super().__init__(channels, spec, zero_init, grad_quant)

    def _forward(self, xt: torch.Tensor) -> torch.Tensor:
        b, c, s = xt.shape
        g = xt.reshape(b, self.groups, -1)
        var, mean = torch.var_mean(g, dim=-1, unbiased=False, keepdim=True)
        inv = self._q(torch.rsqrt(var + self.eps))
        y = ((g - mean) * inv).reshape(b, c, s)
        return torch.relu(y * self._param(self.weight) + self._param(self.bias))


class ReLU(nn.ReLU):
    """Plain ReLU (``norm=none``), with the norm layers' constructor signature."""

    def __init__(self, channels: int = 0, spec: QuantSpec | None = None, zero_init: bool = False,
                 grad_quant: bool = True) -> None:
        super().__init__()


_CLASSES = {
    "none": ReLU,
    "evonorm": EvoNormS0,
    "range_evonorm": RangeEvoNorm,
    "range_bn": RangeBatchNorm,
    "bn": BatchNormReLU,
    "gn": GroupNormReLU,
}


def make_norm(name: str, channels: int, spec: QuantSpec | None = None, zero_init: bool = False,
              grad_quant: bool = True) -> nn.Module:
    """A normalization-activation layer by name (see :data:`NORMS`)."""

    if name not in _CLASSES:
        raise choice_error("model.norm", name, NORMS)
    return _CLASSES[name](channels, spec=spec, zero_init=zero_init, grad_quant=grad_quant)


__all__ = [
    "NORMS", "GROUPS", "CHUNKS", "range_constant", "chunk_count", "chunked_range", "NormAct",
    "EvoNormS0", "RangeEvoNorm", "RangeBatchNorm", "BatchNormReLU", "GroupNormReLU", "ReLU", "make_norm",
]
