"""Per-node random streams: every random draw node i makes at step t comes from its own
stream, keyed by ``(seed, i, t)`` (docs/architecture.md, "Models": the math never depends on how
the nodes are executed).

A draw is the ``j``-th random call of node i's forward (and backward) in step t: its
generator is seeded with ``mix(key_i(t), j)``, and it fills node i's tensor in the
tensor's *logical* element order. So node i gets the same numbers whether it runs

* alone (the plain loop, or a distributed rank: one key),
* in a ``torch.func.vmap`` chunk (the operator's batching rule draws node by node along
  the batch dim), or
* merged sample-major with c other nodes in one batch ``[b·c, ...]`` (node-batched
  layers: each node's ``[b, ...]`` slice drawn on its own and interleaved),

eager or compiled (the draws are one operator, ``decent8::node_rand_v2``, that the
compiler calls as it is). A draw's node is decided by the tensor, not by where it runs:
under vmap a tensor without the node axis (made inside ``forward``) is one per node, so
each node draws its own (the chunk's batched node token reaches the operator's batching
rule); on node-batched layers a draw must be on a tensor with the merged batch axis, any
other is refused in one line naming the operator. What draws here:

* the 8-bit quantizer's stochastic rounding (:mod:`decent8.quant.quantizer`), forward and
  backward (the gradient quantizer keeps the call number of its forward);
* inside the model's forward, intercepted by :class:`NodeRandomMode` while a chunk runs:
  dropout (``F.dropout``, ``dropout1d/2d/3d``, ``alpha_dropout``,
  ``feature_alpha_dropout``, so every ``nn.*Dropout*``), ``F.rrelu`` (``nn.RReLU``; aten's
  rrelu has no vmap rule, so vmap chunks refuse it), ``torch.rand_like``,
  ``torch.randn_like``, ``torch.bernoulli``, ``Tensor.bernoulli``, the in-place
  ``Tensor.uniform_``, ``normal_``, ``bernoulli_``, ``exponential_`` (under vmap on a tensor
  with the node axis; without it, refused) and ``F.gumbel_softmax``. Compiled, the same
  (:func:`prepare_compile`).

Other random operators inside a model (``torch.rand(size)``, ``Tensor.random_``, the
attention dropout of ``scaled_dot_product_attention``, …) cannot be assigned to nodes:
they keep the global generator, and the first one met in a run gives a warning naming
it (their draws then depend on ``sim.chunk``; docs/execution.md "Which random operators
are per node").

Nothing here is stateful across steps, so a checkpoint needs no generator state.
"""
from __future__ import annotations

import contextlib
import math
import warnings
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from . import dither_kernel

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


_GENERATORS: dict[torch.device, torch.Generator] = {}


def _draw_seed(key: int, call: int) -> int:
    """The seed of draw ``call`` of the stream ``key``."""
    return _mix((key ^ (call * 0xD1B54A32D192ED03)) & _M64) >> 1


def _seeded(key: int, call: int, device: torch.device) -> torch.Generator:
    """The generator of draw ``call`` of the stream ``key`` (one reused generator per
    device, reseeded: a draw's numbers depend only on its seed)."""
    g = _GENERATORS.get(device)
    if g is None:
        g = _GENERATORS[device] = torch.Generator(device=device)
    g.manual_seed(_draw_seed(key, call))
    return g


def _dither_rows(ks: list[int], call: int, n: int, device: torch.device) -> torch.Tensor:
    """int16 ``[c, n]`` (a view of ``[c, ⌈n/4⌉]`` int64 words): row j is node j's dither codes,
    64 random bits → four 16-bit codes (as quantizer.dither_like). On the CPU one C loop
    draws every row (:mod:`decent8.dither_kernel`, the same codes)."""
    seeds = [_draw_seed(key, call) for key in ks]
    fast = dither_kernel.dither_rows(seeds, n, device)
    return fast if fast is not None else dither_kernel.torch_rows(seeds, n, device)


def draw_dither_rows(like: torch.Tensor, node_dim: int) -> torch.Tensor | None:
    """The next dither draw (:func:`draw` with ``DITHER``) as the int16 codes themselves,
    ``[c, n]``: row j is node j's codes for its slice of ``like`` along ``node_dim`` (one
    node's whole tensor when ``node_dim`` < 0 and one key), in that slice's logical order —
    no float copy and no move to ``like``'s layout, for a kernel that reads the codes per
    node. Eager only; None (nothing drawn) where :func:`draw` is needed instead (a transform
    or trace active, or several nodes' samples merged along dim 0)."""
    if torch._C._are_functorch_transforms_active() or _is_compiling():
        return None
    keys = _STATE.keys
    assert keys is not None, "no node streams are active"
    c = keys.numel()
    if node_dim < 0:
        if c != 1:
            return None
        n = like.numel()
    else:
        if like.shape[node_dim] != c:
            raise RuntimeError(f"{c} stream keys for {like.shape[node_dim]} nodes")
        n = like.numel() // c if c else 0
    keys, call = take_call()
    return _dither_rows(keys.tolist(), call, n, like.device)


def _draw_rows(ks: list[int], call: int, n: int, kind: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``[c, n]``: row j is node j's draw of n numbers (its tensor's elements in logical order)."""
    c = len(ks)
    if kind == DITHER:
        return _dither_rows(ks, call, n, device).to(dtype)
    out = torch.empty(c, n, dtype=dtype, device=device)
    for j, key in enumerate(ks):
        g = _seeded(key, call, device)
        out[j].normal_(generator=g) if kind == NORMAL else out[j].uniform_(generator=g)
    return out


def fill(keys: torch.Tensor, call: int, like: torch.Tensor, kind: int = UNIFORM, node_dim: int = -1) -> torch.Tensor:
    """Draws shaped like ``like`` (its float dtype): per node along ``node_dim`` when
    given (``>= 0``); otherwise ``like`` is one node's tensor (one key) or c nodes'
    samples merged sample-major along dim 0 (c keys: row ``s·c + i`` is node i's)."""
    dtype = like.dtype if like.is_floating_point() else torch.get_default_dtype()
    ks = keys.tolist()
    c = len(ks)
    if node_dim < 0:
        if c == 1:
            return _draw_rows(ks, call, like.numel(), kind, dtype, like.device).view(like.shape)
        if like.dim() == 0 or like.shape[0] % c:
            raise RuntimeError(f"a batch of {tuple(like.shape)} does not hold {c} nodes' samples")
        shape, node_dim = (like.shape[0] // c, c, *like.shape[1:]), 1
    else:
        shape = tuple(like.shape)
    if shape[node_dim] != c:
        raise RuntimeError(f"{c} stream keys for {shape[node_dim]} nodes")
    per_node = shape[:node_dim] + shape[node_dim + 1:]
    rows = _draw_rows(ks, call, int(torch.Size(per_node).numel()), kind, dtype, like.device)
    return rows.view(c, *per_node).movedim(0, node_dim).reshape(like.shape)


def _fill_op(keys: torch.Tensor, call: int, like: torch.Tensor, kind: int = UNIFORM, node_dim: int = -1,
             node: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`fill` as an operator; ``node`` (unread) is the vmap chunk's node token, so that
    a draw on a tensor without the node axis still reaches the batching rule."""
    return fill(keys, call, like, kind, node_dim)


if hasattr(torch.library, "custom_op"):  # torch >= 2.4: one operator for vmap and torch.compile
    node_rand = torch.library.custom_op("decent8::node_rand_v2", mutates_args=())(_fill_op)

    @node_rand.register_fake
    def _(keys: torch.Tensor, call: int, like: torch.Tensor, kind: int = UNIFORM, node_dim: int = -1,
          node: torch.Tensor | None = None) -> torch.Tensor:
        return torch.empty_like(like, dtype=like.dtype if like.is_floating_point() else torch.get_default_dtype())

    if hasattr(node_rand, "register_vmap"):
        @node_rand.register_vmap
        def _(info: Any, in_dims: tuple, keys: torch.Tensor, call: int, like: torch.Tensor, kind: int = UNIFORM,
              node_dim: int = -1, node: torch.Tensor | None = None) -> tuple[torch.Tensor, int]:
            """A ``torch.func.vmap`` chunk of nodes: the batch dim is the node axis, one
            draw per node from its own stream. A ``like`` without the node axis (a tensor
            made inside ``forward``: ``torch.full((w,), p)``, …) is one per node: each node
            draws its own (the node token makes the call batched)."""
            if in_dims[0] is not None or node_dim >= 0:
                raise RuntimeError("node streams: the keys are not batched and the node axis is the vmap dim")
            d = in_dims[2]
            phys = like.unsqueeze(0).expand(info.batch_size, *like.shape) if d is None else like.movedim(d, 0)
            return node_rand(keys, call, phys, kind, 0), 0
else:  # pragma: no cover - torch < 2.4
    node_rand = _fill_op


# --- the current chunk's streams --------------------------------------------------------------


class _State:
    """The running chunk's stream keys and the next call number (a plain object, so that
    ``torch.compile`` traces its updates; the simulator runs one chunk at a time)."""

    keys: torch.Tensor | None = None
    call = 0
    #: inside a vmap chunk's body: the batched node token ``[c]`` (one zero per node)
    node: torch.Tensor | None = None
    #: node-batched layers: the rows ``b·c`` of the merged batch (0 otherwise)
    rows = 0


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
        return node_rand(keys, call, like, kind, node_dim, _STATE.node)
    return fill(keys, call, like, kind, node_dim)  # eager: without the operator's dispatch cost


def in_vmap_body(fn: Callable[..., torch.Tensor], node: torch.Tensor, *args: Any) -> torch.Tensor:
    """``fn(*args)`` inside a ``torch.func.vmap`` chunk whose batched ``node`` token (one
    zero per node, vmapped with the inputs) marks every draw of the body as per node."""
    saved = _STATE.node
    _STATE.node = node
    try:
        return fn(*args)
    finally:
        _STATE.node = saved


def in_merged_batch(fn: Callable[..., torch.Tensor], rows: int, *args: Any) -> torch.Tensor:
    """``fn(*args)`` on node-batched layers, whose batch holds ``rows`` = b·c merged rows."""
    saved = _STATE.rows
    _STATE.rows = int(rows)
    try:
        return fn(*args)
    finally:
        _STATE.rows = saved


class UnattributedDraw(RuntimeError):
    """A model's random operator whose draw cannot be given to each node on this path."""


def _model_draw(op: str, like: torch.Tensor, kind: int = UNIFORM) -> torch.Tensor:
    """A draw of the model's own operator ``op``: per node on every path. On node-batched
    layers ``like`` must hold the merged batch on dim 0 (``b·c`` rows, node i's rows
    ``s·c + i``); a tensor without that axis (made inside ``forward``, a parameter) is one
    per node in the loop but one for all c nodes here: refused, naming ``op``."""
    rows = _STATE.rows
    if rows and (like.dim() == 0 or like.shape[0] != rows):
        raise UnattributedDraw(f"{op} draws on a tensor of shape {tuple(like.shape)} without the batch axis "
                               f"({rows} merged rows): node-batched layers cannot give each node its own draw; "
                               f"use sim.chunk=N (vmap) or 1")
    return draw(like, kind)


def _is_compiling() -> bool:
    probe = getattr(torch.compiler, "is_compiling", None)
    return bool(probe and probe())


# --- random operators inside a model -------------------------------------------------------------


def _dropout(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,
             feature_dims: int = 0, op: str = "dropout") -> torch.Tensor:
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
    mask = (_model_draw(op, like) >= p).to(input.dtype).mul_(scale)
    return input.mul_(mask) if inplace else input * mask


def _feature(dims: int) -> Callable[..., torch.Tensor]:
    def dropout_nd(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> torch.Tensor:
        return _dropout(input, p, training, inplace, feature_dims=dims, op=f"dropout{dims}d")
    return dropout_nd


#: SELU's α (alpha dropout keeps SELU's mean and variance; aten's ``_dropout_impl``)
_SELU_ALPHA = 1.7580993408473766


def _alpha(feature: bool) -> Callable[..., torch.Tensor]:
    def alpha_dropout(input: torch.Tensor, p: float = 0.5, training: bool = False,
                      inplace: bool = False) -> torch.Tensor:
        """Alpha dropout with the node's own mask: ``keep = [u ≥ p]``,
        ``a = ((α²p + 1)(1 − p))^(−1/2)``, ``x·a·keep + α·a·(p − 1 + keep)`` (per channel
        when ``feature``)."""
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        if not training or p == 0.0 or input.numel() == 0:
            return input
        if p == 1.0:
            return input.mul_(0.0) if inplace else input * 0.0
        like = input.detach()
        if feature and like.dim() > 2:
            like = like[(slice(None), slice(None)) + (slice(0, 1),) * (like.dim() - 2)]
        keep = (_model_draw("feature_alpha_dropout" if feature else "alpha_dropout", like) >= p).to(input.dtype)
        a = 1.0 / math.sqrt((_SELU_ALPHA ** 2 * p + 1.0) * (1.0 - p))
        b = (keep - 1.0).mul_(_SELU_ALPHA * a).add_(_SELU_ALPHA * a * p)
        noise = keep.mul_(a)
        return input.mul_(noise).add_(b) if inplace else input * noise + b
    return alpha_dropout


def _rrelu(input: torch.Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
           inplace: bool = False) -> torch.Tensor:
    """Randomized leaky ReLU with the node's own slopes: ``x`` where x > 0, else ``x·a``,
    a ~ U[lower, upper) per element (aten's ``rrelu_with_noise``; gradient 1 or a).
    Under vmap aten's ``rrelu`` has no batching rule (evaluation would fail there): it is
    called as it is, so a vmap chunk refuses the model (``sim.chunk=auto``: the loop)."""
    if not training or torch._C._are_functorch_transforms_active():
        return F.rrelu(input, lower, upper, training, inplace)
    a = _model_draw("rrelu", input.detach()).mul_(upper - lower).add_(lower)
    slope = torch.where(input.detach() > 0, torch.ones_like(a), a)
    return input.mul_(slope) if inplace else input * slope


def _like(input: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """The shape source of a ``*_like`` draw: detached (the draw has no gradient), in ``dtype``."""
    like = input.detach()
    return like if dtype is None else like.to(dtype)


def _rand_like(input: torch.Tensor, *, dtype: torch.dtype | None = None, **kwargs: Any) -> torch.Tensor:
    return _model_draw("torch.rand_like", _like(input, dtype), UNIFORM)


def _randn_like(input: torch.Tensor, *, dtype: torch.dtype | None = None, **kwargs: Any) -> torch.Tensor:
    return _model_draw("torch.randn_like", _like(input, dtype), NORMAL)


def _bernoulli(input: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    like = input.detach()
    if args or kwargs.get("p") is not None:  # bernoulli(input, p): a scalar probability
        p = args[0] if args else kwargs["p"]
        return (_model_draw("torch.bernoulli", like) < p).to(input.dtype)
    return (_model_draw("torch.bernoulli", like) < like).to(input.dtype)


def _arg(args: tuple, kwargs: dict, i: int, name: str, default: Any) -> Any:
    return args[i] if len(args) > i else kwargs.get(name, default)


def _fill_in_place(op: str, self: torch.Tensor, kind: int, values: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """``self`` filled in place with ``values(draw)``, the draw the node's own. Under vmap a
    tensor without the node axis (made inside ``forward``) cannot hold c nodes' draws:
    refused, naming ``op`` (an out-of-place draw, ``torch.rand_like``, can)."""
    if _STATE.node is not None and not torch._C._functorch.is_batchedtensor(self):
        raise UnattributedDraw(f"{op} fills a tensor of shape {tuple(self.shape)} without the node axis in place: "
                               f"a vmap chunk cannot give each node its own draw; draw out of place "
                               f"(torch.rand_like) or use sim.chunk=1")
    u = _model_draw(op, self.detach(), kind)
    return self.copy_(values(u))


def _uniform_(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    lo, hi = _arg(args, kwargs, 0, "from", 0.0), _arg(args, kwargs, 1, "to", 1.0)
    return _fill_in_place("Tensor.uniform_", self, UNIFORM, lambda u: u.mul_(hi - lo).add_(lo))


def _normal_(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    mean, std = _arg(args, kwargs, 0, "mean", 0.0), _arg(args, kwargs, 1, "std", 1.0)
    return _fill_in_place("Tensor.normal_", self, NORMAL, lambda z: z.mul_(std).add_(mean))


def _bernoulli_(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    p = _arg(args, kwargs, 0, "p", 0.5)
    return _fill_in_place("Tensor.bernoulli_", self, UNIFORM, lambda u: u < p)


def _exponential(u: torch.Tensor, lambd: float) -> torch.Tensor:
    """Exponential(λ) by inversion, ``−log(1 − u)/λ``, u kept off 0 (never an exact 0, as aten's)."""
    return torch.log1p(-u.clamp_(min=torch.finfo(u.dtype).tiny)).mul_(-1.0 / lambd)


def _exponential_(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    lambd = _arg(args, kwargs, 0, "lambd", 1.0)
    return _fill_in_place("Tensor.exponential_", self, UNIFORM, lambda u: _exponential(u, lambd))


def _gumbel_softmax(logits: torch.Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                    dim: int = -1) -> torch.Tensor:
    """``F.gumbel_softmax`` with the node's own Gumbel noise ``−log(E)``, E ~ Exponential(1)
    (torch's formula otherwise: softmax of ``(logits + g)/τ``; ``hard``: straight-through one-hot)."""
    e = _exponential(_model_draw("F.gumbel_softmax", logits.detach()), 1.0)
    y_soft = ((logits - e.log()) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = torch.zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


#: operators drawn from the node's stream
KEYED: dict[Callable, Callable] = {
    F.dropout: _dropout, F.dropout1d: _feature(1), F.dropout2d: _feature(2), F.dropout3d: _feature(3),
    F.alpha_dropout: _alpha(False), F.feature_alpha_dropout: _alpha(True), F.rrelu: _rrelu,
    torch.rand_like: _rand_like, torch.randn_like: _randn_like, torch.bernoulli: _bernoulli,
    torch.Tensor.bernoulli: _bernoulli, torch.Tensor.uniform_: _uniform_, torch.Tensor.normal_: _normal_,
    torch.Tensor.bernoulli_: _bernoulli_, torch.Tensor.exponential_: _exponential_,
    F.gumbel_softmax: _gumbel_softmax,
}

#: random operators that stay on the global generator (a warning names the first one met)
UNKEYED: tuple[Callable, ...] = tuple(f for f in (
    torch.rand, torch.randn, torch.randint, torch.randint_like, torch.randperm, torch.normal, torch.poisson,
    torch.multinomial, torch.rrelu, torch.rrelu_, F.rrelu_, torch.Tensor.random_,
    torch.Tensor.geometric_, torch.Tensor.log_normal_, torch.Tensor.cauchy_, torch.Tensor.multinomial,
) if f is not None)

_compile_ready = False


def prepare_compile() -> None:
    """Before ``torch.compile`` traces a chunk: dynamo calls a ``TorchFunctionMode`` for
    the functions torch lists as overridable only, and ``torch.rand_like`` /
    ``torch.randn_like`` (and ``torch.rand``, ``randn``, … of :data:`UNKEYED`) are listed
    as ignored, so a compiled graph would call them as they are: global-generator draws
    where eager mode draws from the nodes' streams (or warns). They become graph breaks
    (``torch._dynamo.disallow_in_graph``): run eagerly between the compiled graphs, under
    the mode, as in eager mode. (Process-wide: another compiled function calling them
    also breaks its graph there; its results are unchanged.)"""
    global _compile_ready
    if _compile_ready:
        return
    import torch._dynamo
    from torch.overrides import get_ignored_functions

    ignored = get_ignored_functions()
    for f in (*KEYED, *UNKEYED):
        if f in ignored:
            torch._dynamo.disallow_in_graph(f)
    _compile_ready = True


#: dynamo's warning at each graph break of :func:`prepare_compile` (expected: not the user's to act on)
GRAPH_BREAK_WARNING = r"Dynamo does not know how to trace the builtin `torch\._VariableFunctionsClass\.(rand|randn|randint|randperm|normal)"

_warned: set[str] = set()


class NodeRandomMode(TorchFunctionMode):
    """While a chunk runs: :data:`KEYED` operators draw from the nodes' streams; the first
    :data:`UNKEYED` one met gives a warning (a draw with an explicit ``generator`` is the
    caller's own and passes silently). ``drew``: whether the forward called any random
    operator (:func:`may_draw`'s probe)."""

    def __init__(self) -> None:
        super().__init__()
        self.drew = False

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if _STATE.keys is not None:
            impl = KEYED.get(func)
            if impl is not None and kwargs.get("generator") is None:
                self.drew = True
                return impl(*args, **kwargs)
            if _unkeyed_draw(func, args, kwargs):
                self.drew = True
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
    if func in (torch.rrelu, torch.rrelu_, F.rrelu_):  # nothing drawn at evaluation
        return bool(kwargs.get("training", args[3] if len(args) > 3 else False))
    return True


#: module types whose forward is known: torch's own layers (random ones are found by the
#: probe below) and decent8's (which draw only through its quantizers)
_KNOWN_PACKAGES = ("torch.nn.modules.", "decent8.")


def may_draw(module: torch.nn.Module) -> bool | None:
    """Whether ``module``'s forward may call random operators itself (then a chunk runs
    under :class:`NodeRandomMode`, which costs Python time per operator): True for a layer
    of the user's (or another library's), whose forward decent8 cannot read; None ("probe")
    for a model of torch's and decent8's layers only: its first training chunk runs under
    the mode, which records whether any random operator was called (``nn.RReLU``,
    ``nn.Dropout``, an attention's dropout, …) — the operator found, not the layer's package.
    :class:`~decent8.models.stacked.StackedModel` keeps the answer."""
    for m in module.modules():
        if not type(m).__module__.startswith(_KNOWN_PACKAGES):
            return True
    return None


@contextlib.contextmanager
def keyed_random(keys: torch.Tensor | None, intercept: bool | None = True) -> Iterator[NodeRandomMode | None]:
    """Run a chunk's forward (and backward) with the nodes' streams ``keys``; ``None``:
    the global generator, as plain PyTorch. ``intercept`` (True or None, :func:`may_draw`):
    route the model's own random operators (dropout, …) to the streams; yields the mode."""
    if keys is None:
        yield None
        return
    mode = NodeRandomMode() if intercept is not False else None
    with node_streams(keys), (mode if mode is not None else contextlib.nullcontext()):
        yield mode


__all__ = ["UNIFORM", "NORMAL", "DITHER", "node_keys", "fill", "node_rand", "active", "start", "take_call", "node_streams",
           "draw", "draw_dither_rows", "in_vmap_body", "in_merged_batch", "UnattributedDraw", "KEYED", "UNKEYED", "NodeRandomMode",
           "may_draw", "keyed_random", "prepare_compile", "GRAPH_BREAK_WARNING"]
