"""The uniform quantizer Q_b of SPEC §5, vectorised over the node axis.

Asymmetric uniform quantization onto the 2^b levels of ``[min, max]``::

    scale = max((max − min) / (2^b − 1), 1e-8)
    q     = round(clamp((x − min) / scale (+ U(−½, ½) when stochastic), 0, 2^b − 1))
    x̂     = q · scale + min

Deterministic rounding gives ``|x − x̂| ≤ scale / 2`` inside the range; stochastic
rounding is unbiased (``E[x̂] = x`` inside the range). Values outside ``[min, max]``
are clamped to the end levels. Everything here is "fake" quantization: x̂ is stored
as a float of the input's dtype, holding one of 2^b values per range.

Ranges are per node: the layers are plain per-model modules, so a range is a
reduction over the whole tensor a node sees (:func:`quantize_tensor`), or the batch
mean of per-sample ranges for activations (:func:`sample_mean_range`). Under
``torch.func.vmap`` (a chunk of nodes in one call) the autograd functions' ``vmap``
rules keep one range per node.

Autograd: :func:`quantize_ste` is straight-through (the gradient passes unchanged);
:func:`quantize_grad` is the identity forward and quantizes the *gradient* in
backward (whole-tensor range per node, stochastic rounding by default) — the
8-bit gradient quantizer of the low-precision layers.

The stochastic dither uses 16 random bits per element, drawn as full-range int64
words from the tensor's device generator (four elements per word) and read as int16
codes h: ``(h + ½)/2^16`` is symmetric around 0 in (−½, ½) with resolution 2^-16, so
the rounding bias is at most 2^-17 of a step; about 4× cheaper than ``torch.rand``
on CPU. The work buffers for the codes are reused between calls (:class:`_Scratch`).
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any

import torch

from .. import streams
from . import fused
from ..errors import ConfigError

#: Smallest step, so a constant range does not divide by zero (SPEC §5).
MIN_SCALE = 1e-8
#: Allowed bit widths of the fake quantizer.
MIN_BITS, MAX_BITS = 2, 16
_DITHER_LEVELS = 65536  # 16 random bits per element


def check_bits(bits: object, option: str = "quant.bits") -> int:
    """Validate a bit width (an int in ``[2, 16]``); a :class:`ConfigError` naming ``option`` otherwise."""
    if isinstance(bits, bool) or not isinstance(bits, int) or not MIN_BITS <= bits <= MAX_BITS:
        raise ConfigError(option, f"must be an integer from {MIN_BITS} to {MAX_BITS}, got {bits!r}")
    return bits


def num_levels(bits: int) -> int:
    """The largest code ``2^b − 1``."""
    return (1 << bits) - 1


@dataclass(frozen=True)
class QuantSpec:
    """How a low-precision model quantizes (SPEC §5; ``precision=int8`` in the config).

    ``bits``: weights, biases, norm parameters and activations; ``grad_bits``: the
    layer gradients passed backward; ``stochastic``: stochastic rounding of
    activations and gradients in training (deterministic rounding everywhere when
    False — handy for exact comparisons); ``eval_stochastic``: stochastic rounding
    of activations at evaluation too (the reference code's behaviour; default off);
    ``momentum``: weight of the *old* value in the running min/max used at
    evaluation (``running ← m·running + (1 − m)·batch``).
    """

    bits: int = 8
    grad_bits: int = 8
    stochastic: bool = True
    eval_stochastic: bool = False
    momentum: float = 0.1

    def __post_init__(self) -> None:
        check_bits(self.bits, "quant.bits")
        check_bits(self.grad_bits, "quant.grad_bits")
        if not 0.0 <= float(self.momentum) < 1.0:
            raise ConfigError("quant.momentum", f"must be in [0, 1), got {self.momentum!r}")


# --- ranges ------------------------------------------------------------------------------
#
# The layers are plain per-model modules: a tensor they see is one node's tensor. When
# the simulator runs a chunk of nodes under ``torch.func.vmap`` the autograd functions
# below get a ``vmap`` rule that re-applies them to the physical tensor with the
# batched (node) dim as ``node_dim``, so every range stays per node and the fast dither
# below draws once for the whole chunk.


_CONSTANTS: dict[tuple[float, torch.dtype, torch.device], torch.Tensor] = {}


def constant(value: float, like: torch.Tensor) -> torch.Tensor | float:
    """``value`` as a 0-dim tensor of ``like``'s dtype and device (cached), to pass to an
    arithmetic operator instead of the Python number: given a number, an operator first
    wraps it in a float64 tensor and converts that to the operand's dtype (three more
    dispatched operators per call, ~2 µs on CPU). The same value reaches the kernel, so the
    result is bitwise the same. While ``torch.compile`` traces, the number itself."""
    if _is_compiling():
        return value
    key = (value, like.dtype, like.device)
    t = _CONSTANTS.get(key)
    if t is None:
        t = _CONSTANTS[key] = torch.tensor(value, dtype=like.dtype, device=like.device)
    return t


def mean(x: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """``x.mean(dim)`` (all elements when None) computed as ATen's CPU kernel does it — the
    sum, divided by the count — with the count a cached :func:`constant`: bitwise the same,
    four dispatched operators fewer."""
    if _is_compiling():
        return x.mean() if dim is None else x.mean(dim)
    total = x.sum() if dim is None else x.sum(dim)
    return total.div_(constant(float(x.numel() if dim is None else x.shape[dim]), total))


def sample_mean_range(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch mean of per-sample ``(min, max)`` of one node's activations ``x[b, ...]`` → two scalars."""
    x = x.detach()
    if x.dim() == 1:
        v = mean(x)
        return v, v
    dims = tuple(range(1, x.dim()))
    return mean(x.amin(dim=dims)), mean(x.amax(dim=dims))


def _bcast(v: torch.Tensor, x: torch.Tensor, node_dim: int = 0) -> torch.Tensor:
    """A per-node ``[k]`` (or scalar) value shaped to broadcast against ``x`` along ``node_dim``."""
    if v.dim() == 0:
        return v
    shape = [1] * x.dim()
    shape[node_dim] = v.shape[0]
    return v.reshape(shape)


# --- the quantizer -------------------------------------------------------------------------


def _is_dense(x: torch.Tensor) -> bool:
    """True when ``x`` covers its memory without gaps or overlaps (a permutation of a contiguous tensor)."""
    expected = 1
    for stride, size in sorted((st, sz) for st, sz in zip(x.stride(), x.shape) if sz > 1):
        if stride != expected:
            return False
        expected *= size
    return True


class _Scratch(threading.local):
    """Grow-only work buffers, one set per thread and device, reused by every call.

    The dither and its float copy are temporaries as large as the tensor being
    quantized; allocating them afresh each call made the allocator hand the pages
    back to the OS and fault them in again (several × the arithmetic on CPU). The
    buffers grow to the largest tensor quantized so far and are kept.
    """

    def __init__(self) -> None:
        self.buffers: dict[tuple[str, torch.dtype, torch.device], torch.Tensor] = {}

    def get(self, slot: str, n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A 1-D tensor of ``n`` elements (contents undefined) in buffer ``slot``."""
        key = (slot, dtype, device)
        buf = self.buffers.get(key)
        if buf is None or buf.numel() < n:
            buf = torch.empty(max(n, 2 * buf.numel() if buf is not None else 0), dtype=dtype, device=device)
            self.buffers[key] = buf
        return buf[:n]


_SCRATCH = _Scratch()


def _shaped_like(flat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``flat`` (``x.numel()`` elements) viewed with ``x``'s shape, in ``x``'s memory order
    when ``x`` is a dense permuted view."""
    if not x.is_contiguous() and _is_dense(x):
        return flat.as_strided(x.shape, x.stride())
    return flat.view(x.shape)


def dither_like(x: torch.Tensor, scratch: bool = False) -> torch.Tensor:
    """Integer dither codes ``h`` in ``[−2^15, 2^15)`` shaped like ``x`` (int16, in ``x``'s
    memory order when ``x`` is a permuted view), from the global generator of ``x``'s
    device; ``(h + ½)/2^16`` is U(−½, ½) to 2^-16. ``scratch=True``: the codes live in
    a reused work buffer, valid until the next quantizer call."""
    n = x.numel()
    nwords = (n + 3) // 4
    if scratch:
        words = _SCRATCH.get("words", nwords, torch.int64, x.device)
    else:
        words = torch.empty(nwords, dtype=torch.int64, device=x.device)
    flat = words.random_(-(1 << 63), None).view(torch.int16)[:n]  # 64 random bits → four 16-bit codes
    return _shaped_like(flat, x)


def _is_compiling() -> bool:
    """True while ``torch.compile`` traces (``sim.compile``); torch < 2.3 has no probe."""
    probe = getattr(torch.compiler, "is_compiling", None)
    return bool(probe and probe())


def dither_codes(y: torch.Tensor) -> torch.Tensor:
    """The codes of :func:`dither_like` (the same draws), as float values shaped like ``y``:
    an operator that ``torch.compile`` calls as it is. Traced, the int16 view of the
    random words breaks the graph, and an int16 operand makes inductor's fused kernel
    several times slower than the float one. ``y`` is an input so that two calls are
    never merged. (The name carries a version: the inductor cache keys on it, so a
    change of what it returns needs a new name.)"""
    return torch.empty_like(y).copy_(dither_like(y))


if hasattr(torch.library, "custom_op"):  # torch >= 2.4
    dither_codes = torch.library.custom_op("decent8::dither_v1", mutates_args=())(dither_codes)

    @dither_codes.register_fake
    def _(y: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(y)

    if hasattr(dither_codes, "register_vmap"):
        @dither_codes.register_vmap
        def _(info: Any, in_dims: tuple[int | None], y: torch.Tensor) -> tuple[torch.Tensor, int | None]:
            """Under ``torch.func.vmap`` (a compiled ``sim.chunk``): one draw for the whole
            batched tensor, so every node gets its own codes (``randomness="different"``;
            ``"same"`` draws one node's codes and shares them). Without this rule torch falls
            back to a loop over the nodes and warns at every call."""
            (dim,) = in_dims
            if info.randomness == "same":
                codes = dither_codes(y if dim is None else y.select(dim, 0))
                return (codes, None) if dim is None else (codes.unsqueeze(0).expand(info.batch_size, *codes.shape), 0)
            if info.randomness != "different":
                raise RuntimeError("the 8-bit quantizer's dither draws random numbers: vmap needs randomness='different'")
            return dither_codes(y), dim


def fake_quantize(
    x: torch.Tensor,
    mn: torch.Tensor,
    mx: torch.Tensor,
    bits: int = 8,
    stochastic: bool = False,
    node_dim: int | None = None,
) -> torch.Tensor:
    """Q_b(x) over ``[mn, mx]`` (tensors broadcastable against ``x``), no autograd.

    Returns a new tensor of ``x``'s dtype (and memory layout) holding the dequantized
    values ``q · scale + mn``. Every pass after the first works in place on that
    tensor; the dither and its float copy use reused work buffers (:class:`_Scratch`).
    While a chunk of nodes runs with node streams (:mod:`decent8.streams`) the dither is
    each node's own draw: ``x`` holds one slice per node along ``node_dim`` (None: one
    node's tensor, or c nodes' samples merged sample-major along dim 0).
    """
    levels = num_levels(bits)
    with torch.no_grad():
        if mn.dtype != x.dtype:
            mn = mn.to(x.dtype)
        if mx.dtype != x.dtype:
            mx = mx.to(x.dtype)
        if stochastic and not streams.active() and fused.takes_codes(x, mn, mx, node_dim):
            # the C loop reads the int16 codes as drawn, laid out like x
            return fused.fake_quantize_codes(x, mn, mx, levels, MIN_SCALE, dither_like(x, True), _DITHER_LEVELS,
                                             node_dim, rows=False)
        if stochastic and streams.active():  # ... or one row per node, x in its memory order
            if node_dim is None:  # one node's tensor: its codes laid out like x
                layout = (x, [], None) if fused.takes_codes(x, mn, mx, None) else None
            else:
                layout = fused.codes_layout(x, mn, mx, node_dim)
            rows = None if layout is None else streams.draw_dither_rows(x, -1 if node_dim is None else node_dim)
            if rows is not None:
                xp, perm, nd = layout
                out = fused.fake_quantize_codes(xp, mn, mx, levels, MIN_SCALE, rows, _DITHER_LEVELS, nd, rows=True)
                return out if xp is x else out.permute(sorted(range(len(perm)), key=perm.__getitem__))
        fits = fused.wanted(x) and fused.ranges_fit(x, mn, mx, node_dim)
        ordered = fused.memory_order(x) if fits else None
        if ordered is not None:  # one kernel, the same arithmetic (.fused), on x in its memory order
            xp, perm = ordered
            inverse = sorted(range(len(perm)), key=perm.__getitem__)
            h = None
            if stochastic:
                if streams.active():
                    h = streams.draw(x, streams.DITHER, -1 if node_dim is None else node_dim).permute(perm)
                else:  # the codes in memory order, as the eager passes draw them
                    h = _SCRATCH.get("dither", x.numel(), x.dtype, x.device).view(xp.shape).copy_(dither_like(xp, True))
            out = fused.fake_quantize_fused(xp, mn, mx, levels, MIN_SCALE, h, _DITHER_LEVELS,
                                            None if node_dim is None else perm.index(node_dim % x.dim()))
            if out is not None:
                return out.permute(inverse)
            if h is not None:  # the same draws in the eager passes
                h = h.permute(inverse)
                scale = torch.sub(mx, mn).div_(constant(float(levels), mx)).clamp_min_(constant(MIN_SCALE, mx))
                shift = torch.add(mn, scale, alpha=-0.5 / _DITHER_LEVELS)
                y = torch.sub(x, shift).div_(scale).add_(h, alpha=1.0 / _DITHER_LEVELS)
                return y.clamp_(0, levels).round_().mul_(scale).add_(mn)
        scale = torch.sub(mx, mn).div_(constant(float(levels), mx)).clamp_min_(constant(MIN_SCALE, mx))
        if stochastic:
            # (x − mn)/scale + (h + ½)/2^16  =  (x − shift)/scale + h/2^16
            shift = torch.add(mn, scale, alpha=-0.5 / _DITHER_LEVELS)
            y = torch.sub(x, shift).div_(scale)
            if streams.active():
                y.add_(streams.draw(y, streams.DITHER, -1 if node_dim is None else node_dim), alpha=1.0 / _DITHER_LEVELS)
            elif _is_compiling():  # sim.compile: one fused pass around the draws
                y.add_(dither_codes(y), alpha=1.0 / _DITHER_LEVELS)
            else:
                h = dither_like(y, scratch=True)
                hf = _shaped_like(_SCRATCH.get("dither", y.numel(), y.dtype, y.device), y).copy_(h)
                y.add_(hf, alpha=1.0 / _DITHER_LEVELS)
        else:
            y = torch.sub(x, mn).div_(scale)
        if _is_compiling():  # (fused; vmap has no batching rule for clamp_ and would loop over the nodes)
            y.clamp_min_(0).clamp_max_(levels)
        else:
            y.clamp_(0, levels)
        y.round_()
        return y.mul_(scale).add_(mn)  # (addcmul with scalar tensors is ~4x slower on CPU)


def node_minmax(x: torch.Tensor, node_dim: int | None = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(min, max)`` over every dim but ``node_dim`` (all dims when None), shaped to
    broadcast against ``x``.

    Reduces the innermost contiguous block of dims first and the rest on the small
    result, so a node axis in the middle of memory does not make the reduction copy
    the tensor.
    """
    if node_dim is None:
        return torch.aminmax(x)
    node_dim %= x.dim()
    dims = sorted((d for d in range(x.dim()) if d != node_dim), key=lambda d: (x.stride(d), d))
    inner, expected = [], 1
    for d in dims:
        if x.shape[d] != 1 and x.stride(d) != expected:
            break
        inner.append(d)
        if x.shape[d] != 1:
            expected = x.stride(d) * x.shape[d]
    rest = tuple(d for d in dims if d not in inner)
    if not dims:  # one value per node: its own range
        return x.clone(), x.clone()
    if not inner:  # the node axis is the innermost one: reduce the rest as it lies
        return x.amin(dim=rest, keepdim=True), x.amax(dim=rest, keepdim=True)
    mn, mx = x.amin(dim=tuple(inner), keepdim=True), x.amax(dim=tuple(inner), keepdim=True)
    if rest:
        mn, mx = mn.amin(dim=rest, keepdim=True), mx.amax(dim=rest, keepdim=True)
    return mn, mx


def quantize_per_node(x: torch.Tensor, bits: int = 8, stochastic: bool = False, node_dim: int | None = None) -> torch.Tensor:
    """Q_b with the whole-tensor range (per slice along ``node_dim`` when given), no autograd."""
    with torch.no_grad():
        if x.dim() == 0 or (node_dim is not None and x.dim() <= 1):
            return x.clone()
        ranged = fused.node_range(x, node_dim)   # (one pass of the C loop where it runs)
        mn, mx = ranged if ranged is not None else node_minmax(x, node_dim)
        return fake_quantize(x, mn, mx, bits, stochastic, node_dim)


def _front(t: torch.Tensor, bdim: int | None, size: int, like_dim: int | None = None) -> torch.Tensor:
    """A vmapped argument with its batch dim moved to 0 (expanded when unbatched); an
    argument of fewer per-model dims than ``like_dim`` gets singleton dims after the
    batch dim so it broadcasts against the physical input."""
    if bdim is None:
        return t  # broadcasts as it is
    t = t.movedim(bdim, 0)
    if like_dim is not None and t.dim() - 1 < like_dim:
        t = t.reshape(t.shape[0], *([1] * (like_dim - (t.dim() - 1))), *t.shape[1:])
    return t


def _plain_twin(fn: type[torch.autograd.Function]) -> type[torch.autograd.Function]:
    """The same autograd function in the classic ``forward(ctx, ...)`` style, for calls
    outside ``torch.func`` transforms: ``Function.apply`` binds the arguments with
    ``inspect.signature`` for the ``setup_context`` style that functorch needs, which
    cost ~30 µs per call — more than quantizing a small weight tensor."""

    def forward(ctx, *args):  # type: ignore[no-untyped-def]
        out = fn.forward(*args)
        fn.setup_context(ctx, args, out)
        return out

    return type(fn.__name__ + "Plain", (torch.autograd.Function,),
                {"forward": staticmethod(forward), "backward": staticmethod(fn.backward)})


def _apply(fn: type[torch.autograd.Function], plain: type[torch.autograd.Function], *args):  # type: ignore[no-untyped-def]
    """``fn.apply(*args)`` (functorch-aware) inside ``torch.func`` transforms, ``plain.apply`` outside."""
    return (fn if torch._C._are_functorch_transforms_active() else plain).apply(*args)


def _straight_through(x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``q`` forward (exactly: ``x − x.detach()`` is 0), identity backward. The form of the
    straight-through estimator used while ``torch.compile`` traces (``sim.compile``): there
    an autograd function under ``vmap`` (a compiled ``sim.chunk`` > 1) loses its backward
    (torch 2.13: differentiated through its forward, or cut off the graph), while these
    plain operations fuse with the quantizer's."""
    return q + (x - x.detach())


class _FakeQuantSTE(torch.autograd.Function):
    """Q_b(x) over ``[mn, mx]``, straight-through backward; vmap: one call on the chunk."""

    @staticmethod
    def forward(x, mn, mx, bits, stochastic, node_dim):  # type: ignore[override]
        return fake_quantize(x, mn, mx, bits, stochastic, node_dim)

    @staticmethod
    def setup_context(ctx, inputs, output):  # type: ignore[override]
        pass

    @staticmethod
    def backward(ctx, g):  # type: ignore[override]
        return g, None, None, None, None, None

    @staticmethod
    def vmap(info, in_dims, x, mn, mx, bits, stochastic, node_dim):  # type: ignore[override]
        bx, bmn, bmx = in_dims[:3]
        per_model = x.dim() - (0 if bx is None else 1)
        if bx is None:
            x = x.unsqueeze(0).expand(info.batch_size, *x.shape)
        else:
            x = x.movedim(bx, 0)
        mn = _front(mn, bmn, info.batch_size, per_model)
        mx = _front(mx, bmx, info.batch_size, per_model)
        return _apply(_FakeQuantSTE, _FakeQuantSTEPlain, x, mn, mx, bits, stochastic, 0), 0


_FakeQuantSTEPlain = _plain_twin(_FakeQuantSTE)


def quantize_ste(
    x: torch.Tensor, mn: torch.Tensor, mx: torch.Tensor, bits: int = 8, stochastic: bool = False,
    node_dim: int | None = None,
) -> torch.Tensor:
    """Q_b(x) over ``[mn, mx]`` with a straight-through (identity) backward (``node_dim``:
    see :func:`fake_quantize`)."""
    if _is_compiling():
        return _straight_through(x, fake_quantize(x.detach(), mn.detach(), mx.detach(), bits, stochastic, node_dim))
    return _apply(_FakeQuantSTE, _FakeQuantSTEPlain, x, mn.detach(), mx.detach(), bits, stochastic, node_dim)


class _QuantizeWhole(torch.autograd.Function):
    """Q_b(x) over x's own whole-tensor range (per ``node_dim`` slice), straight-through."""

    @staticmethod
    def forward(x, bits, stochastic, node_dim):  # type: ignore[override]
        return quantize_per_node(x, bits, stochastic, node_dim)

    @staticmethod
    def setup_context(ctx, inputs, output):  # type: ignore[override]
        pass

    @staticmethod
    def backward(ctx, g):  # type: ignore[override]
        return g, None, None, None

    @staticmethod
    def vmap(info, in_dims, x, bits, stochastic, node_dim):  # type: ignore[override]
        bx = in_dims[0]
        if bx is None:
            return _apply(_QuantizeWhole, _QuantizeWholePlain, x, bits, stochastic, node_dim), None
        return _apply(_QuantizeWhole, _QuantizeWholePlain, x, bits, stochastic, bx), bx


_QuantizeWholePlain = _plain_twin(_QuantizeWhole)


def quantize_tensor(x: torch.Tensor, bits: int = 8, stochastic: bool = False,
                    node_dim: int | None = None) -> torch.Tensor:
    """Weights, biases, norm parameters, normalising scales: the tensor's own min/max
    (one range per node: per slice along ``node_dim`` when the tensor stacks several
    nodes' copies), deterministic rounding by default, straight-through backward."""
    if x.dim() == 0:
        return x
    if _is_compiling():
        return _straight_through(x, quantize_per_node(x.detach(), bits, stochastic, node_dim))
    return _apply(_QuantizeWhole, _QuantizeWholePlain, x, bits, stochastic, node_dim)


class _QuantizeGrad(torch.autograd.Function):
    @staticmethod
    def forward(x, bits, stochastic, node_dim, stream):  # type: ignore[override]
        return x.view_as(x)

    @staticmethod
    def setup_context(ctx, inputs, output):  # type: ignore[override]
        ctx.bits, ctx.stochastic, ctx.node_dim, ctx.stream = inputs[1], inputs[2], inputs[3], inputs[4]

    @staticmethod
    def backward(ctx, g):  # type: ignore[override]
        with _in_stream(ctx.stream):
            return quantize_per_node(g, ctx.bits, ctx.stochastic, ctx.node_dim), None, None, None, None

    @staticmethod
    def vmap(info, in_dims, x, bits, stochastic, node_dim, stream):  # type: ignore[override]
        bx = in_dims[0]
        return _apply(_QuantizeGrad, _QuantizeGradPlain, x, bits, stochastic, node_dim if bx is None else bx,
                      stream), bx


_QuantizeGradPlain = _plain_twin(_QuantizeGrad)


def _grad_stream(stochastic: bool) -> tuple[torch.Tensor, int] | None:
    """The node streams' keys and the call number a gradient quantizer draws with in
    backward, taken in forward (so its draws do not depend on the order backward runs in)."""
    return streams.take_call() if stochastic and streams.active() else None


def _in_stream(stream: tuple[torch.Tensor, int] | None):  # type: ignore[no-untyped-def]
    return contextlib.nullcontext() if stream is None else streams.node_streams(*stream)


def _requires_grad(x: torch.Tensor) -> bool:
    """``x.requires_grad``, looking through functorch wrappers: under ``vmap`` a batched
    tensor reports False even when the tensor it wraps requires grad. (Under
    ``torch.compile`` True: the wrappers cannot be traced, and a gradient hook on a
    tensor that gets no gradient never runs.)"""
    if _is_compiling():
        return True
    f = torch._C._functorch
    while f.is_functorch_wrapped_tensor(x):
        x = f.get_unwrapped(x)
    return x.requires_grad


def quantize_grad(x: torch.Tensor, bits: int = 8, stochastic: bool = True, node_dim: int | None = None) -> torch.Tensor:
    """Identity forward; in backward the incoming gradient is quantized to ``bits``
    with the node's whole-tensor range (per slice along ``node_dim`` when given;
    stochastic rounding by default). Every call in training takes its number in the node
    streams, whether or not ``x`` needs a gradient (compiled, that is not known)."""
    if not torch.is_grad_enabled():
        return x
    stream = _grad_stream(stochastic)
    if not _requires_grad(x):
        return x
    if _is_compiling() and _quantize_grad_op is not None:
        keys, call = stream or (_NO_KEYS, -1)
        return _quantize_grad_op(x, keys, call, bits, stochastic, -1 if node_dim is None else node_dim)
    return _apply(_QuantizeGrad, _QuantizeGradPlain, x, bits, stochastic, node_dim, stream)


_NO_KEYS = torch.empty(0, dtype=torch.int64)  # empty, not zeros: no kernel runs at import (the kernel family stays selectable)
_quantize_grad_op = None
if hasattr(torch.library, "custom_op"):  # torch >= 2.4
    @torch.library.custom_op("decent8::quantize_grad_v2", mutates_args=())
    def _quantize_grad_op(x: torch.Tensor, keys: torch.Tensor, call: int, bits: int, stochastic: bool,
                          node_dim: int) -> torch.Tensor:
        """:func:`quantize_grad` as an operator, for ``torch.compile`` (``sim.compile``): the
        identity (a copy: an operator's output may not alias its input) whose registered
        backward quantizes the gradient; ``node_dim`` −1 is None; ``keys``/``call`` the node
        streams it draws from (``call`` −1: the global generator). Traced, an autograd
        function under ``vmap`` loses its backward (see :func:`_straight_through`)."""
        return x.clone()

    @_quantize_grad_op.register_fake
    def _(x: torch.Tensor, keys: torch.Tensor, call: int, bits: int, stochastic: bool, node_dim: int) -> torch.Tensor:
        return torch.empty_like(x)

    def _quantize_grad_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
        ctx.bits, ctx.stochastic, ctx.node_dim = inputs[3], inputs[4], inputs[5]
        ctx.stream = None if inputs[2] < 0 else (inputs[1], inputs[2])

    def _quantize_grad_backward(ctx: Any, g: torch.Tensor) -> tuple:
        node_dim = None if ctx.node_dim < 0 else ctx.node_dim
        with _in_stream(ctx.stream):
            return quantize_per_node(g, ctx.bits, ctx.stochastic, node_dim), None, None, None, None, None

    _quantize_grad_op.register_autograd(_quantize_grad_backward, setup_context=_quantize_grad_setup)

    if hasattr(_quantize_grad_op, "register_vmap"):
        @_quantize_grad_op.register_vmap
        def _(info: Any, in_dims: tuple, x: torch.Tensor, keys: torch.Tensor, call: int, bits: int,
              stochastic: bool, node_dim: int) -> tuple[torch.Tensor, int | None]:
            """Batched over the nodes: one call with the batch dim as the node dim, so each
            node's gradient keeps its own range (and its own stream)."""
            bx = in_dims[0]
            return _quantize_grad_op(x, keys, call, bits, stochastic, node_dim if bx is None else bx), bx


__all__ = [
    "MIN_SCALE",
    "MIN_BITS",
    "MAX_BITS",
    "QuantSpec",
    "check_bits",
    "num_levels",
    "node_minmax",
    "sample_mean_range",
    "constant",
    "mean",
    "dither_like",
    "fake_quantize",
    "quantize_per_node",
    "quantize_ste",
    "quantize_tensor",
    "quantize_grad",
]
