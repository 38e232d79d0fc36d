"""The fused 8-bit quantizer: Q_b's elementwise passes as one generated kernel (SPEC §5).

Eagerly, :func:`decent8.quant.quantizer.fake_quantize` is nine operators per tensor: the
step ``scale = max((max − min)/L, 1e-8)`` (three on 0-dim tensors), then ``x − min``,
``/ scale``, (``+ h/2^16`` when stochastic), clamp, round, ``· scale``, ``+ min`` — each a
kernel launch on a GPU, where a small model's step is bound by launches. Here the same
arithmetic, in the same order and rounding, is one ``torch.compile`` region (Triton on a
GPU, C++ with the system compiler on a CPU)::

    scale = max((mx − mn) / L, 1e-8)
    y     = (x − mn) / scale                                  deterministic
    y     = (x − (mn − scale·2^-17)) / scale + h · 2^-16      stochastic, h the dither codes
    x̂     = round(clamp(y, 0, L)) · scale + mn

so the result is bitwise that of the eager passes (``tests/quant/test_fused.py``: every
execution strategy, forward and backward). The range (``torch.aminmax``) and the dither
draws (the node's stream or the device generator) stay as they are: the draws are the
same numbers, handed to the kernel as float codes.

The tensor is seen as ``[a, c, b]`` (``c`` nodes along ``node_dim``, ``[1, 1, n]`` for one
range). Two backends compute it:

* on the CPU, one C loop (:mod:`decent8.quant.cpu_kernel`, built once with the system C
  compiler, called through ctypes: a few µs a call);
* elsewhere (and on the CPU in mode ``compiled``), a ``torch.compile`` region: a
  deterministic and a stochastic kernel, each with dynamic sizes, so one compiled graph
  serves every rank (Triton on a GPU, C++ on a CPU, ~40 µs of guards a call there).

Modes (:func:`set_fused`): ``auto`` (the default) fuses CUDA tensors, and CPU tensors where
the C loop is built and PyTorch runs one thread (with more, the eager operators split a large
tensor over the threads and the single-threaded loop is not faster); ``on`` fuses every
tensor; ``compiled`` uses ``torch.compile`` on every device; ``off`` none. Never while a whole
step is being compiled (``sim.compile``: the compiler fuses it there) nor inside
``torch.func`` transforms (the quantizer's vmap rules call it on the physical tensor). A
machine where the compiler does not work falls back to the eager passes with one warning
line; the values are the same either way.
"""
from __future__ import annotations

import contextlib
import math
import types
import warnings
from typing import Callable, Iterator

import torch

from ..native import warn_unavailable
from . import cpu_kernel

FUSED_MODES = ("auto", "on", "compiled", "off")
_MODE = ["auto"]
_BROKEN: list[str] = []  # the compiler's failure, once seen
_KERNELS: dict[tuple, Callable[..., torch.Tensor]] = {}


def set_fused(mode: str) -> str:
    """Where the fused quantizer runs: ``auto`` (CUDA tensors; CPU tensors with the C loop at
    one thread), ``on`` (every device), ``compiled`` (every device, ``torch.compile`` on the
    CPU too), ``off`` (nowhere). Returns the previous mode."""
    if mode not in FUSED_MODES:
        raise ValueError(f"fused quantizer mode must be one of {', '.join(FUSED_MODES)}, got {mode!r}")
    previous, _MODE[0] = _MODE[0], mode
    return previous


def fused_mode() -> str:
    """The current mode (see :func:`set_fused`)."""
    return _MODE[0]


def _deterministic(x: torch.Tensor, mn: torch.Tensor, mx: torch.Tensor, levels: float, min_scale: float) -> torch.Tensor:
    scale = torch.clamp_min((mx - mn) / levels, min_scale)
    return torch.clamp((x - mn) / scale, 0.0, levels).round() * scale + mn


def _stochastic(x: torch.Tensor, mn: torch.Tensor, mx: torch.Tensor, h: torch.Tensor, levels: float,
                min_scale: float, dither_levels: float) -> torch.Tensor:
    scale = torch.clamp_min((mx - mn) / levels, min_scale)
    shift = mn + scale * (-0.5 / dither_levels)
    y = (x - shift) / scale + h * (1.0 / dither_levels)
    return torch.clamp(y, 0.0, levels).round() * scale + mn


def _kernel(stochastic: bool, *tensors: torch.Tensor) -> Callable[..., torch.Tensor]:
    """The compiled kernel for this variant: its own code object per dtype, device, sizes
    of 1 and storage offsets of 0 / 1 / more (what the compiler specializes on), so that
    each compiles once and none reaches dynamo's per-code-object recompile limit."""
    key = (stochastic, *((t.dtype, t.device.type, *(n == 1 for n in t.shape), min(t.storage_offset(), 2))
                         for t in tensors))
    k = _KERNELS.get(key)
    if k is None:
        fn = _stochastic if stochastic else _deterministic
        twin = types.FunctionType(fn.__code__.replace(co_name=f"{fn.__name__}_{len(_KERNELS)}"), fn.__globals__,
                                  fn.__name__, fn.__defaults__, fn.__closure__)
        k = _KERNELS[key] = torch.compile(twin, dynamic=True, fullgraph=True)
    return k


@contextlib.contextmanager
def _no_function_modes() -> Iterator[None]:
    """No torch-function modes (decent8.streams' random-operator mode) while the kernel runs:
    it draws nothing, and the mode stack is part of the compiled code's guards."""
    stack = [torch._C._pop_torch_function_stack() for _ in range(torch._C._len_torch_function_stack())]
    try:
        yield
    finally:
        for mode in reversed(stack):
            torch._C._push_on_torch_function_stack(mode)


def _c_loop(x: torch.Tensor) -> bool:
    """Whether the CPU's C loop quantizes ``x`` (float32 on the CPU, not in mode ``compiled``,
    the library built; warns once where it cannot be)."""
    if x.device.type != "cpu" or x.dtype != torch.float32 or _MODE[0] == "compiled":
        return False
    if cpu_kernel.available():
        return True
    warn_unavailable(cpu_kernel.why_unavailable(), "fused 8-bit quantizer",
                     "using the eager operators (the same values, slower)", stacklevel=4)
    return False


def wanted(x: torch.Tensor) -> bool:
    """Whether ``x`` is quantized by the fused kernel (mode, device, no transform or trace active)."""
    mode = _MODE[0]
    if mode == "off" or x.numel() == 0:
        return False
    probe = getattr(torch.compiler, "is_compiling", None)
    if probe is not None and probe():
        return False
    if torch._C._functorch.is_functorch_wrapped_tensor(x):  # (a vmap rule's physical tensor is plain)
        return False
    if mode == "auto":
        if x.device.type == "cpu":
            return torch.get_num_threads() == 1 and _c_loop(x)
        return x.device.type == "cuda" and not _BROKEN
    return _c_loop(x) or not _BROKEN


def memory_order(x: torch.Tensor) -> tuple[torch.Tensor, list[int]] | None:
    """``x`` permuted to its memory order, a contiguous view, and the permutation (None
    when ``x`` is not dense: a slice with gaps). A vmap rule's tensor has the node dim
    moved to the front of a tensor whose memory puts it elsewhere."""
    if x.is_contiguous():
        return x, list(range(x.dim()))
    perm = sorted(range(x.dim()), key=lambda d: (-x.stride(d), -x.shape[d]))
    xp = x.permute(perm)
    return (xp, perm) if xp.is_contiguous() else None


def _as_abc(x: torch.Tensor, node_dim: int | None) -> tuple[int, int, int]:
    if node_dim is None:
        return 1, 1, x.numel()
    d = node_dim % x.dim()
    return math.prod(x.shape[:d]), x.shape[d], math.prod(x.shape[d + 1:])


def fake_quantize_fused(x: torch.Tensor, mn: torch.Tensor, mx: torch.Tensor, levels: int, min_scale: float,
                        h: torch.Tensor | None, dither_levels: int, node_dim: int | None) -> torch.Tensor | None:
    """Q_b(x) over ``[mn, mx]`` in one kernel (``h``: float dither codes shaped like ``x``,
    None for deterministic rounding); None when the ranges do not have one value per node
    (the caller then runs the eager passes) or the compiler fails."""
    a, c, b = _as_abc(x, node_dim)
    if mn.numel() not in (1, c) or mx.numel() not in (1, c):
        return None
    if mn.numel() == 1 and c > 1:  # one range for every node: as one node's tensor
        a, c, b = 1, 1, x.numel()
    shape3 = (a, c, b)
    r = (1, c, 1)
    x3 = x.detach().view(shape3)  # (requires_grad is not a guard: fewer graphs)
    mn3, mx3 = mn.detach().reshape(r), mx.detach().reshape(r)
    if _c_loop(x) and mn3.dtype == mx3.dtype == torch.float32 and (h is None or h.dtype == torch.float32):
        h3 = None if h is None else h.detach().reshape(shape3)
        out = cpu_kernel.fake_quantize(x3, mn3, mx3, h3, float(levels), float(min_scale), float(dither_levels))
        return out.view(x.shape)
    try:
        with _no_function_modes():
            if h is None:
                out = _kernel(False, x3, mn3, mx3)(x3, mn3, mx3, float(levels), float(min_scale))
            else:
                h3 = h.detach().reshape(shape3)
                out = _kernel(True, x3, mn3, mx3, h3)(x3, mn3, mx3, h3, float(levels), float(min_scale),
                                                      float(dither_levels))
    except Exception as e:  # noqa: BLE001 - any compiler failure: the eager passes compute the same
        _fail(e, stochastic=h is not None)
        return None
    _WORKED.append(True)
    return out.view(x.shape)


def ranges_fit(x: torch.Tensor, mn: torch.Tensor, mx: torch.Tensor, node_dim: int | None) -> bool:
    """Whether the ranges are what the fused kernels assume: one value, or one per slice of
    ``x`` along ``node_dim`` shaped to broadcast there (no more dims than ``x``, every other
    size 1). Other ranges (legal for the eager passes, which broadcast them as they are)
    run eagerly."""
    for r in (mn, mx):
        if r.dim() > x.dim():
            return False
        if r.numel() == 1:
            continue
        if node_dim is None:
            return False
        d = node_dim % x.dim()
        shape = (1,) * (x.dim() - r.dim()) + tuple(r.shape)
        if shape[d] != x.shape[d] or any(n != 1 for i, n in enumerate(shape) if i != d):
            return False
    return True


def takes_codes(x: torch.Tensor, mn: torch.Tensor, mx: torch.Tensor, node_dim: int | None) -> bool:
    """Whether :func:`fake_quantize_codes` quantizes ``x`` (contiguous, the CPU's C loop, one
    range or one per node along ``node_dim``): decided before anything is drawn."""
    if not (x.is_contiguous() and wanted(x) and _c_loop(x)) or mn.dtype != torch.float32 or mx.dtype != torch.float32:
        return False
    return ranges_fit(x, mn, mx, node_dim)


def node_range(x: torch.Tensor, node_dim: int | None) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``node_minmax(x, node_dim)`` in one pass of the CPU's C loop (the same values and
    shapes), or None where the loop does not take ``x`` (then the caller reduces with torch):
    not a dense float32 CPU tensor at one thread, empty, or holding a NaN."""
    if x.numel() == 0 or not (wanted(x) and _c_loop(x)):
        return None
    if node_dim is None:
        if not x.is_contiguous():
            return None
        got = cpu_kernel.minmax(x.detach().view(1, 1, -1))
        return None if got is None else (got[0].view(()), got[1].view(()))
    ordered = memory_order(x)
    if ordered is None:
        return None
    xp, perm = ordered
    nd = node_dim % x.dim()
    got = cpu_kernel.minmax(xp.detach().view(_as_abc(xp, perm.index(nd))))
    if got is None:
        return None
    shape = [x.shape[d] if d == nd else 1 for d in range(x.dim())]
    return got[0].view(shape), got[1].view(shape)


def codes_layout(x: torch.Tensor, mn: torch.Tensor, mx: torch.Tensor,
                 node_dim: int) -> tuple[torch.Tensor, list[int], int] | None:
    """``x`` in its memory order for :func:`fake_quantize_codes` with one row of node-stream
    codes per node: ``(xp, perm, node dim of xp)``, or None. The codes of a node are its
    slice's elements in logical order, so the other dims (of size > 1) must keep their order
    in memory: then node j's element ``(i, k)`` of the ``[a, c, b]`` view of ``xp`` is its
    ``i·b + k``-th. (A vmap chunk's tensor with the node dim moved to the front of a
    sample-major layout is such a tensor.)"""
    if x.is_contiguous():
        return (x, list(range(x.dim())), node_dim % x.dim()) if takes_codes(x, mn, mx, node_dim) else None
    if not (wanted(x) and _c_loop(x)) or mn.dtype != torch.float32 or mx.dtype != torch.float32:
        return None
    if not ranges_fit(x, mn, mx, node_dim):
        return None
    ordered = memory_order(x)
    if ordered is None:
        return None
    xp, perm = ordered
    nd = node_dim % x.dim()
    others = [d for d in perm if d != nd and x.shape[d] != 1]
    if others != sorted(others):
        return None
    return xp, perm, perm.index(nd)


def fake_quantize_codes(x: torch.Tensor, mn: torch.Tensor, mx: torch.Tensor, levels: int, min_scale: float,
                        codes: torch.Tensor, dither_levels: int, node_dim: int | None, rows: bool) -> torch.Tensor:
    """Stochastic Q_b(x) in the CPU's C loop, reading the int16 dither ``codes`` as drawn:
    shaped like ``x`` (the global generator's :func:`~decent8.quant.quantizer.dither_like`),
    or with ``rows`` one row per node along ``node_dim``
    (:func:`decent8.streams.draw_dither_rows`). The same values as the eager passes with those
    codes as floats. Requires :func:`takes_codes`."""
    a, c, b = _as_abc(x, node_dim)
    mn3, mx3 = mn.detach().reshape(-1).expand(c), mx.detach().reshape(-1).expand(c)
    out = cpu_kernel.fake_quantize(x.detach().view(a, c, b), mn3, mx3, None, float(levels), float(min_scale),
                                   float(dither_levels), codes=codes, code_rows=rows)
    return out.view(x.shape)


_WORKED: list[bool] = []  # a kernel ran (later failures are per shape, not the machine's compiler)


def _fail(e: Exception, stochastic: bool) -> None:
    """One warning line; the machine's compiler is taken as broken when no kernel ever ran."""
    why = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:160]
    if not _WORKED:
        _BROKEN.append(why)
        warnings.warn(f"fused 8-bit quantizer unavailable (torch.compile failed: {why}); using the eager operators",
                      RuntimeWarning, stacklevel=4)
    elif not _SHAPE_FAILED:
        _SHAPE_FAILED.append(why)
        warnings.warn(f"fused 8-bit quantizer: a tensor layout it could not compile ({why}) runs the eager "
                      "operators (the same values)", RuntimeWarning, stacklevel=4)


_SHAPE_FAILED: list[str] = []


__all__ = ["FUSED_MODES", "set_fused", "fused_mode", "wanted", "fake_quantize_fused", "ranges_fit", "takes_codes",
           "codes_layout", "node_range", "fake_quantize_codes"]
