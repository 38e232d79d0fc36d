"""Per-node random streams: every random draw node i makes at step t comes from its own
stream, keyed by ``(seed, i, t)`` (ARCHITECTURE "Models": the math never depends on how
the nodes are executed).

A draw is the ``j``-th random call of node i's forward (and backward) in step t: its
generator is seeded with ``mix(key_i(t), j)``, and it fills node i's tensor in the
tensor's *logical* element order. So node i gets the same numbers whether it runs

* alone (the plain loop, or a distributed rank: one key),
* in a ``torch.func.vmap`` chunk (the operator's batching rule draws node by node along
  the batch dim), or
* merged sample-major with c other nodes in one batch ``[b·c, ...]`` (node-batched
  layers: each node's ``[b, ...]`` slice drawn on its own and interleaved),

eager or compiled (the draws are one operator, ``decent8::node_rand_v1``, that the
compiler calls as it is). What draws here:

* the 8-bit quantizer's stochastic rounding (:mod:`decent8.quant.quantizer`), forward and
  backward (the gradient quantizer keeps the call number of its forward);
* dropout (``F.dropout``, ``dropout1d/2d/3d``, so every ``nn.Dropout*``),
  ``torch.rand_like``, ``torch.randn_like`` and ``torch.bernoulli`` inside the model's
  forward, intercepted by :class:`NodeRandomMode` while a chunk runs.

Other random operators inside a model (``torch.rand(size)``, ``Tensor.normal_``, the
attention dropout of ``scaled_dot_product_attention``, …) cannot be assigned to nodes:
they keep the global generator, and the first one met in a run gives a warning naming
it (their draws then depend on ``sim.chunk``; docs/execution.md).

Nothing here is stateful across steps, so a checkpoint needs no generator state.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

_M64 = (1 << 64) - 1

#: what a draw returns: U[0, 1), N(0, 1), or the quantizer's 16-bit dither codes as floats
UNIFORM, NORMAL, DITHER = 0, 1, 2


def _mix(x: int) -> int:
    """splitmix64's finaliser: a bijection of 64-bit words that scatters every input bit."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def node_keys(seed: int, nodes: Sequence[int], step: int) -> torch.Tensor:
    """The stream keys ``[len(nodes)]`` (int64, CPU) of ``nodes`` at step ``step``."""
    base = _mix(_mix(int(seed) & _M64) ^ 0x6E6F64652D726E67)  # "node-rng"
    keys = [_mix(_mix(base ^ int(i)) ^ (int(step) & _M64)) >> 1 for i in nodes]
    return torch.tensor(keys, dtype=torch.int64)


def _generator(key: int, call: int, device: torch.device) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(_mix((key ^ (call * 0xD1B54A32D192ED03)) & _M64) >> 1)
    return g


def _draw(key: int, call: int, shape: torch.Size, kind: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """One node's draw, contiguous, in the logical order of ``shape``."""
    g = _generator(key, call, device)
    if kind == DITHER:  # 64 random bits → four 16-bit codes (as quantizer.dither_like)
        n = shape.numel()
        words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device)
        codes = words.random_(-(1 << 63), None, generator=g).view(torch.int16)[:n]
        return codes.to(dtype).view(shape)
    if kind == NORMAL:
        return torch.randn(shape, generator=g, dtype=dtype, device=device)
    return torch.rand(shape, generator=g, dtype=dtype, device=device)


def fill(keys: torch.Tensor, call: int, like: torch.Tensor, kind: int = UNIFORM, node_dim: int = -1) -> torch.Tensor:
    """Draws shaped like ``like`` (its float dtype): per node along ``node_dim`` when
    given (``>= 0``); otherwise ``like`` is one node's tensor (one key) or c nodes'
    samples merged sample-major along dim 0 (c keys: row ``s·c + i`` is node i's)."""
    dtype = like.dtype if like.is_floating_point() else torch.get_default_dtype()
    ks = keys.tolist()
    c = len(ks)
    if node_dim < 0:
        if c == 1:
            return _draw(ks[0], call, like.shape, kind, dtype, like.device)
        if like.dim() == 0 or like.shape[0] % c:
            raise RuntimeError(f"a batch of {tuple(like.shape)} does not hold {c} nodes' samples")
        view, node_dim = like.reshape(like.shape[0] // c, c, *like.shape[1:]), 1
    else:
        view = like
    if view.shape[node_dim] != c:
        raise RuntimeError(f"{c} stream keys for {view.shape[node_dim]} nodes")
    out = torch.empty(view.shape, dtype=dtype, device=like.device)
    for j, key in enumerate(ks):
        out.select(node_dim, j).copy_(_draw(key, call, out.select(node_dim, j).shape, kind, dtype, like.device))
    return out.view(like.shape)


if hasattr(torch.library, "custom_op"):  # torch >= 2.4: one operator for vmap and torch.compile
    node_rand = torch.library.custom_op("decent8::node_rand_v1", mutates_args=())(fill)

    @node_rand.register_fake
    def _(keys: torch.Tensor, call: int, like: torch.Tensor, kind: int = UNIFORM, node_dim: int = -1) -> torch.Tensor:
        return torch.empty_like(like, dtype=like.dtype if like.is_floating_point() else torch.get_default_dtype())

    if hasattr(node_rand, "register_vmap"):
        @node_rand.register_vmap
        def _(info: Any, in_dims: tuple, keys: torch.Tensor, call: int, like: torch.Tensor, kind: int = UNIFORM,
              node_dim: int = -1) -> tuple[torch.Tensor, int]:
            """A ``torch.func.vmap`` chunk of nodes: the batch dim is the node axis, one
            draw per node from its own stream."""
            if in_dims[0] is not None or node_dim >= 0:
                raise RuntimeError("node streams: the keys are not batched and the node axis is the vmap dim")
            d = in_dims[2]
            phys = like.unsqueeze(0).expand(info.batch_size, *like.shape) if d is None else like.movedim(d, 0)
            return node_rand(keys, call, phys, kind, 0), 0
else:  # pragma: no cover - torch < 2.4
    node_rand = fill


# --- the current chunk's streams --------------------------------------------------------------


class _State:
    """The running chunk's stream keys and the next call number (a plain object, so that
    ``torch.compile`` traces its updates; the simulator runs one chunk at a time)."""

    keys: torch.Tensor | None = None
    call = 0


_STATE = _State()


def active() -> bool:
    """True while a chunk runs with node streams (:func:`node_streams`)."""
    return _STATE.keys is not None


def start(keys: torch.Tensor | None) -> None:
    """A chunk's forward begins: its streams are ``keys``, its draws numbered from 0."""
    _STATE.keys, _STATE.call = keys, 0


def take_call() -> tuple[torch.Tensor, int]:
    """The current keys and the next call number (each random call of a forward takes one)."""
    keys = _STATE.keys
    assert keys is not None, "no node streams are active"
    call = _STATE.call
    _STATE.call = call + 1
    return keys, call


@contextlib.contextmanager
def node_streams(keys: torch.Tensor | None, call: int = 0) -> Iterator[None]:
    """Within the block, random draws come from the streams ``keys`` (one per node of the
    running chunk), numbered from ``call``; ``None`` switches them off."""
    saved = _STATE.keys, _STATE.call
    _STATE.keys, _STATE.call = keys, call
    try:
        yield
    finally:
        _STATE.keys, _STATE.call = saved


def draw(like: torch.Tensor, kind: int = UNIFORM, node_dim: int = -1) -> torch.Tensor:
    """The next draw of the running chunk's nodes, shaped like ``like`` (see :func:`fill`)."""
    keys, call = take_call()
    if torch._C._are_functorch_transforms_active() or _is_compiling():
        return node_rand(keys, call, like, kind, node_dim)
    return fill(keys, call, like, kind, node_dim)  # eager: without the operator's dispatch cost


def _is_compiling() -> bool:
    probe = getattr(torch.compiler, "is_compiling", None)
    return bool(probe and probe())


# --- random operators inside a model -------------------------------------------------------------


def _dropout(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,
             feature_dims: int = 0) -> torch.Tensor:
    """Inverted dropout with the node's own mask: ``x · [u ≥ p] / (1 − p)``, u ~ U[0, 1) per
    element (``feature_dims`` > 0: per channel, ``dropout{1,2,3}d``)."""
    if not training or p == 0.0:
        return input
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    like = input.detach()
    if feature_dims:  # one draw per (sample, channel): the spatial dims of the mask are 1
        spatial = min(feature_dims, like.dim() - 1)
        like = like[(Ellipsis,) + (slice(0, 1),) * spatial]
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    mask = (draw(like) >= p).to(input.dtype).mul_(scale)
    return input.mul_(mask) if inplace else input * mask


def _feature(dims: int) -> Callable[..., torch.Tensor]:
    def dropout_nd(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> torch.Tensor:
        return _dropout(input, p, training, inplace, feature_dims=dims)
    return dropout_nd


def _rand_like(input: torch.Tensor, *, dtype: torch.dtype | None = None, **kwargs: Any) -> torch.Tensor:
    return draw(input if dtype is None else input.detach().to(dtype), UNIFORM)


def _randn_like(input: torch.Tensor, *, dtype: torch.dtype | None = None, **kwargs: Any) -> torch.Tensor:
    return draw(input if dtype is None else input.detach().to(dtype), NORMAL)


def _bernoulli(input: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    if args or kwargs.get("p") is not None:  # bernoulli(input, p): a scalar probability
        p = args[0] if args else kwargs["p"]
        return (draw(input.detach()) < p).to(input.dtype)
    return (draw(input.detach()) < input.detach()).to(input.dtype)


#: operators drawn from the node's stream
KEYED: dict[Callable, Callable] = {
    F.dropout: _dropout, F.dropout1d: _feature(1), F.dropout2d: _feature(2), F.dropout3d: _feature(3),
    torch.rand_like: _rand_like, torch.randn_like: _randn_like, torch.bernoulli: _bernoulli,
}

#: random operators that stay on the global generator (a warning names the first one met)
UNKEYED: tuple[Callable, ...] = tuple(f for f in (
    torch.rand, torch.randn, torch.randint, torch.randint_like, torch.randperm, torch.normal, torch.poisson,
    torch.multinomial, F.alpha_dropout, F.feature_alpha_dropout, F.rrelu, F.gumbel_softmax,
    torch.Tensor.uniform_, torch.Tensor.normal_, torch.Tensor.bernoulli_, torch.Tensor.random_,
    torch.Tensor.exponential_, torch.Tensor.geometric_, torch.Tensor.log_normal_, torch.Tensor.cauchy_,
    torch.Tensor.bernoulli, torch.Tensor.multinomial,
) if f is not None)

_warned: set[str] = set()


class NodeRandomMode(TorchFunctionMode):
    """While a chunk runs: :data:`KEYED` operators draw from the nodes' streams; the first
    :data:`UNKEYED` one met gives a warning (a draw with an explicit ``generator`` is the
    caller's own and passes silently)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if _STATE.keys is not None:
            impl = KEYED.get(func)
            if impl is not None:
                return impl(*args, **kwargs)
            if _unkeyed_draw(func, args, kwargs):
                name = getattr(func, "__qualname__", getattr(func, "__name__", str(func)))
                if name not in _warned:
                    _warned.add(name)
                    warnings.warn(f"the model draws random numbers with {name}, which decent8 cannot assign to a "
                                  f"node's stream: these draws depend on sim.chunk (docs/execution.md)", stacklevel=2)
        return func(*args, **kwargs)


def _unkeyed_draw(func: Callable, args: tuple, kwargs: dict) -> bool:
    """True when ``func(*args, **kwargs)`` draws from the global generator."""
    if func is F.scaled_dot_product_attention:
        return float(kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0) or 0.0) > 0.0
    if func not in UNKEYED or kwargs.get("generator") is not None:
        return False
    if func in (F.alpha_dropout, F.feature_alpha_dropout):  # nothing drawn at evaluation or p = 0
        training = kwargs.get("training", args[2] if len(args) > 2 else False)
        return bool(training) and kwargs.get("p", args[1] if len(args) > 1 else 0.5) != 0
    return True


@contextlib.contextmanager
def keyed_random(keys: torch.Tensor | None) -> Iterator[None]:
    """Run a chunk's forward (and backward) with the nodes' streams ``keys``; ``None``:
    the global generator, as plain PyTorch."""
    if keys is None:
        yield
        return
    with node_streams(keys), NodeRandomMode():
        yield


__all__ = ["UNIFORM", "NORMAL", "DITHER", "node_keys", "fill", "node_rand", "active", "start", "take_call", "node_streams",
           "draw", "KEYED", "UNKEYED", "NodeRandomMode", "keyed_random"]
