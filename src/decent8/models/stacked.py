"""All k nodes' models: one plain ``nn.Module``, one flat ``[k, d]`` parameter buffer (ARCHITECTURE "model").

Node i's model is the user's module with row i of the flat buffer substituted for its
parameters (``torch.func.functional_call``); gossip and the wire see only the flat
buffer. Buffers (BatchNorm running statistics, the 8-bit activation ranges, …) are per
node too: the module's floating-point buffers are stacked at construction into one
flat ``[k, nb]`` tensor (:attr:`StackedModel.buffers`) whose row views go into
``functional_call`` with the parameters; the layers update them in place in training.
They are not gossiped; the averaged model is evaluated with the node-averaged buffers.
(Integer buffers such as BatchNorm's ``num_batches_tracked`` stay shared.)

Execution: the k nodes run in chunks of ``c`` nodes (:attr:`StackedModel.chunk`). A
chunk of c > 1 is one ``torch.func.vmap`` call over the chunk's parameter rows
(``randomness="different"``: every node draws its own dropout masks and dither); c = 1
is a plain loop over nodes without vmap. Models made of the layers of
:mod:`.node_batched` can also run a chunk through node-batched layers (one grouped
convolution / batched matmul per layer; :attr:`StackedModel.execution` ``"layers"``).
The math does not depend on c or on the execution; the speed does, by model, node count
and device — :func:`decent8.models.execution.choose_chunk` measures it
(``sim.chunk=auto``). Inputs are tensors or dicts of tensors with a leading node axis
``[k, b, ...]``; the loss comes from a :class:`~decent8.task.Task`.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import torch
from torch import nn
from torch.func import functional_call, vmap

from ..data.dataset import take  # noqa: F401  (re-exported: models.stacked.take)
from ..errors import ConfigError, first_line
from ..layout import ParamLayout
from ..task import CrossEntropy, Task
from .node_batched import node_aware_layers, node_batched

Inputs = Any  # a tensor, or a dict of tensors, each with the same leading axes


def batch_size(x: Inputs, dim: int = 0) -> int:
    if isinstance(x, dict):
        return next(iter(x.values())).shape[dim]
    return x.shape[dim]


class StackedModel:
    def __init__(self, module: nn.Module, device: torch.device | str = "cpu", nodes: int | None = None,
                 task: Task | None = None, chunk: int = 1) -> None:
        self.module = module.to(device)
        self.device = torch.device(device)
        self.task = task or CrossEntropy()
        self.chunk = int(chunk)
        #: how a chunk of c > 1 nodes runs: ``"vmap"`` (one torch.func.vmap call) or
        #: ``"layers"`` (node-batched layers, :mod:`.node_batched`)
        self.execution = "vmap"
        #: ``sim.compile``: the compiled form of :meth:`_chunk_loss` (None: eager)
        self._compiled_loss: Callable | None = None
        self._compile_strict = True
        self._compile_ok = False
        #: why compiling failed under ``sim.compile=auto`` (the run then went on eagerly)
        self.compile_failure = ""
        self._node_aware = node_aware_layers(self.module)
        self.layout = ParamLayout.from_module(self.module)
        named = [(n, b) for n, b in self.module.named_buffers() if b.is_floating_point()]
        #: layout of the per-model buffers (None when the module has none)
        self.buffer_layout: ParamLayout | None = ParamLayout((n, tuple(b.shape)) for n, b in named) if named else None
        #: per-node buffers ``[k, nb]`` (allocated for ``nodes``, or at the first call)
        self.buffers: torch.Tensor | None = None
        if self.buffer_layout is not None and nodes is not None:
            self.init_buffers(nodes)

    # -- buffers ------------------------------------------------------------------------

    def init_buffers(self, k: int) -> None:
        """Give each of ``k`` nodes a copy of the template module's buffers."""
        if self.buffer_layout is None:
            return
        flat = torch.cat([b.detach().reshape(-1) for n, b in self.module.named_buffers() if b.is_floating_point()])
        self.buffers = flat.to(self.device).unsqueeze(0).repeat(k, 1)

    def buffers_for(self, m: int) -> torch.Tensor | None:
        """Buffers for ``m`` models: the per-node ones (m = k), or their node mean (m = 1)."""
        if self.buffer_layout is None:
            return None
        if self.buffers is None:
            self.init_buffers(m)
        assert self.buffers is not None
        if self.buffers.shape[0] == m:
            return self.buffers
        if m == 1:
            return self.buffers.mean(0, keepdim=True)
        raise ValueError(f"{m} models but buffers for {self.buffers.shape[0]} nodes")

    def buffers_state(self) -> torch.Tensor | None:
        """The per-node buffers ``[k, nb]`` (a copy, for checkpoints), or None."""
        return None if self.buffers is None else self.buffers.detach().cpu().clone()

    def load_buffers_state(self, state: torch.Tensor | None) -> None:
        if state is None or self.buffer_layout is None:
            return
        if self.buffers is None or self.buffers.shape != state.shape:
            self.buffers = state.to(self.device).clone()
        else:
            self.buffers.copy_(state)

    @property
    def dim(self) -> int:
        return self.layout.dim

    def flat_parameters(self) -> torch.Tensor:
        """The template module's current parameters as one ``[d]`` vector."""
        return torch.cat([p.detach().reshape(-1) for p in self.module.parameters()]).to(self.device)

    # -- execution ----------------------------------------------------------------------

    def _named(self, params: torch.Tensor, buffers: torch.Tensor | None) -> dict[str, torch.Tensor]:
        named = self.layout.unflatten(params)
        if self.buffer_layout is not None and buffers is not None:
            named.update(self.buffer_layout.unflatten(buffers))
        return named

    def _chunk_buffers(self, buffers: torch.Tensor | None, i0: int, i1: int, c: int) -> dict[str, torch.Tensor]:
        """Buffers of nodes ``i0:i1`` by name: row views of the flat buffer in the loop
        (layers update them in place); contiguous copies for a vmap call, whose batching
        rules do not write in-place updates through strided views (see :meth:`_write_back`)."""
        if buffers is None or self.buffer_layout is None:
            return {}
        named = self.buffer_layout.unflatten(buffers[i0:i1])
        return {n: v.clone() for n, v in named.items()} if self._vmapped(c) else named

    def _vmapped(self, c: int) -> bool:
        return c > 1 and self.execution == "vmap"

    def _write_back(self, buffers: torch.Tensor | None, bufs: dict[str, torch.Tensor], i0: int, i1: int, c: int) -> None:
        if not self._vmapped(c) or buffers is None or self.buffer_layout is None:
            return
        with torch.no_grad():
            for slot in self.buffer_layout:
                buffers[i0:i1, slot.offset : slot.end].copy_(bufs[slot.name].reshape(i1 - i0, -1))

    def _chunks(self, m: int, chunk: int | None = None):
        c = max(1, min(int(chunk or self.chunk), m))
        for i0 in range(0, m, c):
            yield i0, min(m, i0 + c)

    def _apply(self, fn: Callable, named: dict[str, torch.Tensor], args: tuple, in_dims: tuple, single: bool):
        """``fn(named_row, *args_row)`` for every row of a chunk: a plain call for one node
        (``single``), one vmap call otherwise (rows along dim 0 of ``named`` and of the
        args whose ``in_dims`` is 0)."""
        if single:
            row = {n: v[0] for n, v in named.items()}
            sliced = tuple(take(a, 0) if d == 0 else a for a, d in zip(args, in_dims))
            out = fn(row, *sliced)
            return _unsqueeze(out)
        return vmap(fn, in_dims=(0,) + in_dims, randomness="different")(named, *args)

    def _layers_forward(self, named: dict[str, torch.Tensor], x: Inputs, m: int, shared: bool = False) -> torch.Tensor:
        """Outputs ``[m, b, ...]`` of m nodes through node-batched layers: their samples
        merged sample-major into one batch (``shared``: the same ``x[N, ...]`` for every node)."""
        with node_batched(self._node_aware, m):
            out = self._forward_fn(named, _merge_nodes(x, m, shared))
        return out.view(-1, m, *out.shape[1:]).transpose(0, 1)

    def _chunk_forward(self, named: dict[str, torch.Tensor], x: Inputs, m: int, c: int, shared: bool = False):
        if self.execution == "layers":
            return self._layers_forward(named, x, m, shared)
        return self._apply(self._forward_fn, named, (x,), (None if shared else 0,), c == 1)

    def _chunk_loss(self, named: dict[str, torch.Tensor], x: Inputs, y: torch.Tensor, m: int, c: int) -> torch.Tensor:
        if self.execution == "layers":
            return self.task.losses(self._layers_forward(named, x, m), y)
        return self._apply(self._loss_fn, named, (x, y), (0, 0), c == 1)

    def compile(self, strict: bool = True) -> None:
        """``sim.compile``: each chunk's loss runs through ``torch.compile``, so its forward
        and (through AOTAutograd) its backward are compiled graphs, the 8-bit quantizer's
        elementwise passes fused with their neighbours; evaluation stays eager. The first
        call of each chunk shape compiles (seconds to minutes; cached on the machine).
        Random operators draw from the eager generators (inductor's ``fallback_random``;
        the quantizer's dither is the eager one, :func:`decent8.quant.quantizer.dither_codes`),
        so the draws, the checkpointed RNG state and resuming are those of eager mode.
        ``strict=False`` (``sim.compile=auto``): if compiling fails in the first step, the
        model's buffers and the RNG are restored and the run goes on eagerly
        (``compile_failure`` says why); once a whole step has run compiled, nothing is
        snapshotted any more."""
        self._compiled_loss = torch.compile(self._chunk_loss, dynamic=False)
        self._compile_strict = strict
        self._compile_ok = False
        self.compile_failure = ""

    @property
    def compiled(self) -> bool:
        return self._compiled_loss is not None

    def _run_chunk_loss(self, named: dict[str, torch.Tensor], *args) -> torch.Tensor:
        if self._compiled_loss is None:
            return self._chunk_loss(named, *args)
        import torch._dynamo.exc as dynamo_exc
        import torch._inductor.config as inductor_config

        # auto: until one whole step (every chunk shape) has run compiled, keep what a
        # failed call may have changed
        saved = None if self._compile_strict or self._compile_ok else self._snapshot(named)
        try:
            with inductor_config.patch(fallback_random=True):
                return self._compiled_loss(named, *args)
        except Exception as e:
            if saved is not None:  # auto: back to eager, where a real error shows again
                self._compiled_loss = None
                self.compile_failure = f"{type(e).__name__}: {first_line(e)}"
                warnings.warn(f"sim.compile=auto: torch.compile failed ({self.compile_failure}); running eagerly")
                self._restore_snapshot(named, saved)
                return self._chunk_loss(named, *args)
            if isinstance(e, dynamo_exc.TorchDynamoException):
                raise ConfigError("sim.compile", f"torch.compile cannot compile this model ({first_line(e)}); "
                                                 f"use sim.compile=false") from None
            raise

    def _snapshot(self, named: dict[str, torch.Tensor]) -> tuple:
        bufs = {n: v.detach().clone() for n, v in named.items() if not v.requires_grad}
        cuda = torch.cuda.get_rng_state() if torch.cuda.is_available() and self.device.type == "cuda" else None
        return bufs, torch.get_rng_state(), cuda

    def _restore_snapshot(self, named: dict[str, torch.Tensor], saved: tuple) -> None:
        bufs, cpu_rng, cuda_rng = saved
        with torch.no_grad():
            for n, v in bufs.items():
                named[n].copy_(v)
        torch.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state(cuda_rng)

    def _forward_fn(self, named: dict[str, torch.Tensor], x: Inputs) -> torch.Tensor:
        if isinstance(x, dict):  # keyword inputs (input_ids=…, attention_mask=…)
            out = functional_call(self.module, named, (), x)
        else:
            out = functional_call(self.module, named, (x,))
        return model_output(out)

    def _loss_fn(self, named: dict[str, torch.Tensor], x: Inputs, y: torch.Tensor) -> torch.Tensor:
        return self.task.loss(self._forward_fn(named, x), y)

    def forward(self, params: torch.Tensor, x: Inputs, buffers: torch.Tensor | None = None,
                chunk: int | None = None) -> torch.Tensor:
        """Outputs ``[k, b, ...]`` of the k models ``params[k, d]`` on inputs ``x[k, b, ...]``
        (training or eval mode as the module is set; in training the buffers update in place)."""
        k = params.shape[0]
        c = int(chunk or self.chunk)
        buffers = self.buffers_for(k) if buffers is None else buffers
        outs = []
        for i0, i1 in self._chunks(k, c):
            named = self.layout.unflatten(params[i0:i1])
            bufs = self._chunk_buffers(buffers, i0, i1, c)
            outs.append(self._chunk_forward({**named, **bufs}, take(x, slice(i0, i1)), i1 - i0, c))
            self._write_back(buffers, bufs, i0, i1, c)
        return torch.cat(outs, 0)

    def loss_and_grad(self, params: torch.Tensor, x: Inputs, y: torch.Tensor,
                      chunk: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-node loss ``[k]`` and its gradient ``[k, d]`` for batches ``x[k, b, ...]``, ``y[k, b, ...]``.

        One backward per chunk, so memory holds one chunk's activations at a time. Each
        parameter tensor of the chunk is its own leaf (views of the flat buffer), and
        the gradients are written into the flat ``[k, d]`` gradient.
        """
        self.module.train()
        k = params.shape[0]
        buffers = self.buffers_for(k)
        grad = torch.empty_like(params)
        losses = torch.empty(k, device=params.device, dtype=params.dtype)
        c = int(chunk or self.chunk)
        for i0, i1 in self._chunks(k, c):
            leaves = {n: v.detach().requires_grad_(True) for n, v in self.layout.unflatten(params[i0:i1]).items()}
            bufs = self._chunk_buffers(buffers, i0, i1, c)
            with torch.enable_grad():
                loss = self._run_chunk_loss({**leaves, **bufs}, take(x, slice(i0, i1)), y[i0:i1], i1 - i0, c)
                self._write_back(buffers, bufs, i0, i1, c)
                check_loss(loss, i1 - i0)
                gs = torch.autograd.grad(loss.sum(), list(leaves.values()), allow_unused=True)
            for slot, v, g in zip(self.layout, leaves.values(), gs):
                dst = grad[i0:i1, slot.offset : slot.end]
                if g is None:
                    dst.zero_()
                else:
                    dst.copy_(g.reshape(i1 - i0, -1))
            losses[i0:i1] = loss.detach().reshape(-1)
        self._compile_ok = self._compiled_loss is not None  # every chunk shape compiled and ran
        return losses, grad

    @torch.no_grad()
    def logits(self, params: torch.Tensor, x: Inputs, chunk: int = 1024,
               buffers: torch.Tensor | None = None) -> torch.Tensor:
        """Eval-mode outputs ``[k, N, ...]`` of every node's model on the same inputs ``x[N, ...]``.

        Each node uses its own buffers; a single model (k = 1, e.g. the averaged one)
        uses the node-averaged buffers unless ``buffers`` is given. ``chunk`` bounds the
        samples per call.
        """
        self.module.eval()
        try:
            k = params.shape[0]
            buffers = self.buffers_for(k) if buffers is None else buffers
            n = batch_size(x)
            rows = []
            for i0, i1 in self._chunks(k):
                named = self._named(params[i0:i1], None if buffers is None else buffers[i0:i1])
                parts = [self._chunk_forward(named, take(x, slice(j, j + chunk)), i1 - i0, self.chunk, shared=True)
                         for j in range(0, n, chunk)]
                rows.append(torch.cat(parts, 1))
            return torch.cat(rows, 0)
        finally:
            self.module.train()


def _merge_nodes(x: Inputs, m: int, shared: bool) -> Inputs:
    """``x[m, b, ...]`` as one batch ``[b·m, ...]``, sample-major (row ``s·m + i`` is node
    i's sample s); ``shared``: the same ``x[N, ...]`` for all m nodes."""
    if isinstance(x, dict):
        return {n: _merge_nodes(v, m, shared) for n, v in x.items()}
    if shared:
        return x.unsqueeze(1).expand(x.shape[0], m, *x.shape[1:]).reshape(m * x.shape[0], *x.shape[1:])
    return x.transpose(0, 1).reshape(m * x.shape[1], *x.shape[2:])


def model_output(out: Any) -> torch.Tensor:
    """The tensor a task scores: the output itself, or the ``logits`` of a HuggingFace-style
    output object / dict, or the first element of a tuple."""
    if isinstance(out, torch.Tensor):
        return out
    logits = getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    if isinstance(out, dict) and isinstance(out.get("logits"), torch.Tensor):
        return out["logits"]
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    from ..errors import ConfigError
    raise ConfigError("model", f"the model returned {type(out).__name__}; a tensor (or an object with .logits) is expected")


def _unsqueeze(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return out.unsqueeze(0)
    if isinstance(out, dict):
        return {k: _unsqueeze(v) for k, v in out.items()}
    if isinstance(out, (tuple, list)):
        return type(out)(_unsqueeze(v) for v in out)
    return out


def check_loss(loss: Any, m: int) -> None:
    """The per-node loss must be one scalar per node (one line naming the option otherwise)."""
    from ..errors import ConfigError

    if not isinstance(loss, torch.Tensor) or loss.numel() != m:
        shape = tuple(loss.shape[1:]) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise ConfigError("loss", f"must return one scalar per node, got a value of shape {shape} per node")
