"""All k nodes' models: one plain ``nn.Module``, one flat ``[k, d]`` parameter buffer (docs/architecture.md "Models").

Node i's model is the user's module with row i of the flat buffer substituted for its
parameters (``torch.func.functional_call``); gossip and the wire see only the flat
buffer. Buffers (BatchNorm running statistics, the 8-bit activation ranges, …) are per
node too: the module's floating-point buffers are stacked at construction into one
flat ``[k, nb]`` tensor (:attr:`StackedModel.buffers`) whose row views go into
``functional_call`` with the parameters; the layers update them in place in training.
They are not gossiped; the averaged model is evaluated with the node-averaged buffers.
(Integer buffers such as BatchNorm's ``num_batches_tracked`` stay shared.)

Execution: the k nodes run in chunks, each the way the model's execution strategy says
(:mod:`.strategies`: a loop, ``torch.func.vmap`` chunks, node-batched layers; eager or
compiled), set with :meth:`StackedModel.use` — :func:`decent8.models.execution.choose_chunk`
measures which is fastest (``sim.chunk=auto``). The math does not depend on it: the loss
is always ``task.losses`` of the chunk's outputs, and in training every random draw of
node i at step t (dropout, the 8-bit stochastic rounding, ``rand_like``, …) comes from
the node's own stream keyed by ``(seed, i, t)`` (:mod:`decent8.streams`). Inputs are
tensors or dicts of tensors with a leading node axis ``[k, b, ...]``; the loss comes
from a :class:`~decent8.task.Task`.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable, Sequence

import torch
from torch import nn
from torch.func import functional_call

from .. import streams
from ..data.dataset import take  # noqa: F401  (re-exported: models.stacked.take)
from ..errors import ConfigError, first_line
from ..layout import ParamLayout
from ..task import CrossEntropy, Task
from .node_batched import node_aware_layers
from .strategies import Strategy, batch_size, merge_nodes, strategy_for  # noqa: F401  (merge_nodes, batch_size re-exported)

Inputs = Any  # a tensor, or a dict of tensors, each with the same leading axes


class StackedModel:
    def __init__(self, module: nn.Module, device: torch.device | str = "cpu", nodes: int | None = None,
                 task: Task | None = None, chunk: int = 1, seed: int = 0,
                 node_ids: Sequence[int] | None = None) -> None:
        self.module = module.to(device)
        self.device = torch.device(device)
        self.task = task or CrossEntropy()
        #: how each chunk of nodes runs (:mod:`.strategies`; set with :meth:`use`)
        self.strategy: Strategy = strategy_for("vmap", int(chunk))
        #: the run seed and the global ids of the local nodes: node i's random stream at
        #: step t is keyed by (seed, node_ids[i], t) (:mod:`decent8.streams`)
        self.seed = int(seed)
        self.node_ids: list[int] | None = None if node_ids is None else [int(i) for i in node_ids]
        #: ``sim.compile``: the compiled form of :meth:`_chunk_loss` (None: eager)
        self._compiled_loss: Callable | None = None
        self._compile_strict = True
        self._compile_ok = False
        #: why compiling failed under ``sim.compile=auto`` (the run then went on eagerly)
        self.compile_failure = ""
        #: the layers node-batched execution gives a node-aware forward (:mod:`.node_batched`)
        self.node_aware = node_aware_layers(self.module)
        #: whether the module may call random operators itself (dropout, RReLU, …: routed to
        #: the streams); None until the first training chunk has shown it (:func:`streams.may_draw`)
        self.may_draw: bool | None = streams.may_draw(self.module)
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

    def use(self, strategy: Strategy) -> None:
        """Run every chunk the way ``strategy`` says (compiled if the model is compiled)."""
        self.strategy = dataclasses.replace(strategy, compiled=self.compiled)

    @property
    def chunk(self) -> int:
        """Nodes per chunk of the current strategy."""
        return self.strategy.chunk

    @property
    def execution(self) -> str:
        """``vmap`` (c = 1: the loop) or ``layers`` (node-batched layers)."""
        return self.strategy.execution

    def stream_keys(self, i0: int, i1: int, step: int) -> torch.Tensor:
        """The random-stream keys of local nodes ``i0:i1`` at step ``step``."""
        nodes = range(i0, i1) if self.node_ids is None else self.node_ids[i0:i1]
        return streams.node_keys(self.seed, nodes, step)

    def _named(self, params: torch.Tensor, buffers: torch.Tensor | None) -> dict[str, torch.Tensor]:
        named = self.layout.unflatten(params)
        if self.buffer_layout is not None and buffers is not None:
            named.update(self.buffer_layout.unflatten(buffers))
        return named

    def _chunk_buffers(self, buffers: torch.Tensor | None, i0: int, i1: int) -> dict[str, torch.Tensor]:
        """Buffers of nodes ``i0:i1`` by name, each its own contiguous copy that the layers
        update in place (:meth:`_write_back` puts them back): vmap's batching rules do not
        write in-place updates through strided row views, and views of one row share a
        version counter, so one layer's update (an 8-bit range) would invalidate what
        another (BatchNorm's running statistics) saved for backward."""
        if buffers is None or self.buffer_layout is None:
            return {}
        return {n: v.clone() for n, v in self.buffer_layout.unflatten(buffers[i0:i1]).items()}

    def _write_back(self, buffers: torch.Tensor | None, bufs: dict[str, torch.Tensor], i0: int, i1: int) -> None:
        if buffers is None or self.buffer_layout is None:
            return
        with torch.no_grad():
            for slot in self.buffer_layout:
                buffers[i0:i1, slot.offset : slot.end].copy_(bufs[slot.name].reshape(i1 - i0, -1))

    @staticmethod
    def _chunks(m: int, c: int):
        c = max(1, min(int(c), m))
        for i0 in range(0, m, c):
            yield i0, min(m, i0 + c)

    def _chunk_loss(self, named: dict[str, torch.Tensor], x: Inputs, y: torch.Tensor, m: int, strategy: Strategy,
                    keys: torch.Tensor | None) -> torch.Tensor:
        """The per-node losses ``[m]`` of one chunk: the strategy's outputs scored by the task
        (the one place a loss is computed), the draws from the nodes' streams ``keys``."""
        streams.start(keys)
        return self.task.losses(strategy.outputs(self, named, x, m), y)

    def compile(self, strict: bool = True) -> None:
        """``sim.compile``: each chunk's loss runs through ``torch.compile``, so its forward
        and (through AOTAutograd) its backward are compiled graphs, the 8-bit quantizer's
        elementwise passes fused with their neighbours; evaluation stays eager. The first
        call of each chunk shape compiles (seconds to minutes; cached on the machine).
        The nodes' draws are one operator the compiler calls as it is
        (:mod:`decent8.streams`), so they are those of eager mode; other random operators
        draw from the eager generators (inductor's ``fallback_random``).
        ``strict=False`` (``sim.compile=auto``): if compiling fails in the first step, the
        model's buffers and the RNG are restored and the run goes on eagerly
        (``compile_failure`` says why); once a whole step has run compiled, nothing is
        snapshotted any more."""
        streams.prepare_compile()
        self._compiled_loss = torch.compile(self._chunk_loss, dynamic=False)
        self._compile_strict = strict
        self._compile_ok = False
        self.compile_failure = ""
        self.strategy = dataclasses.replace(self.strategy, compiled=True)

    def decompile(self) -> None:
        """Undo :meth:`compile`: chunks run eagerly again."""
        self._compiled_loss = None
        self.strategy = dataclasses.replace(self.strategy, compiled=False)

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
            with inductor_config.patch(fallback_random=True), warnings.catch_warnings():
                warnings.filterwarnings("ignore", streams.GRAPH_BREAK_WARNING)  # (prepare_compile's breaks)
                return self._compiled_loss(named, *args)
        except Exception as e:
            if saved is not None:  # auto: back to eager, where a real error shows again
                self._compiled_loss = None
                self.strategy = dataclasses.replace(self.strategy, compiled=False)
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

    def forward_one(self, named: dict[str, torch.Tensor], x: Inputs) -> torch.Tensor:
        """The module's output on ``x`` with the parameters and buffers ``named`` (one node's,
        or stacked ones inside a strategy's transform)."""
        if isinstance(x, dict):  # keyword inputs (input_ids=…, attention_mask=…)
            out = functional_call(self.module, named, (), x)
        else:
            out = functional_call(self.module, named, (x,))
        return model_output(out)

    def forward(self, params: torch.Tensor, x: Inputs, buffers: torch.Tensor | None = None,
                strategy: Strategy | None = None, step: int | None = None) -> torch.Tensor:
        """Outputs ``[k, b, ...]`` of the k models ``params[k, d]`` on inputs ``x[k, b, ...]``
        (training or eval mode as the module is set; in training the buffers update in
        place). ``step``: draw from the nodes' streams of that step (None: the global generator)."""
        k = params.shape[0]
        strategy = strategy or self.strategy
        buffers = self.buffers_for(k) if buffers is None else buffers
        outs = []
        for i0, i1 in self._chunks(k, strategy.chunk):
            named = self.layout.unflatten(params[i0:i1])
            bufs = self._chunk_buffers(buffers, i0, i1)
            keys = None if step is None else self.stream_keys(i0, i1, step)
            with streams.keyed_random(keys, self.may_draw) as mode:  # (numbers its draws from 0)
                outs.append(strategy.outputs(self, {**named, **bufs}, take(x, slice(i0, i1)), i1 - i0))
            self._write_back(buffers, bufs, i0, i1)
            self._probed(mode)
        return torch.cat(outs, 0)

    def loss_and_grad(self, params: torch.Tensor, x: Inputs, y: torch.Tensor, strategy: Strategy | None = None,
                      step: int | None = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-node loss ``[k]`` and its gradient ``[k, d]`` for batches ``x[k, b, ...]``, ``y[k, b, ...]``
        at training step ``step``, which keys the nodes' random streams (None: the draws come
        from the global generator, as in plain PyTorch — what the streams cost is measured so).

        One backward per chunk, so memory holds one chunk's activations at a time. Each
        parameter tensor of the chunk is its own leaf (views of the flat buffer), and
        the gradients are written into the flat ``[k, d]`` gradient.
        """
        self.module.train()
        k = params.shape[0]
        buffers = self.buffers_for(k)
        grad = torch.empty_like(params)
        losses = torch.empty(k, device=params.device, dtype=params.dtype)
        strategy = strategy or self.strategy
        for i0, i1 in self._chunks(k, strategy.chunk):
            leaves = {n: v.detach().requires_grad_(True) for n, v in self.layout.unflatten(params[i0:i1]).items()}
            bufs = self._chunk_buffers(buffers, i0, i1)
            keys = None if step is None else self.stream_keys(i0, i1, step)
            with torch.enable_grad(), streams.keyed_random(keys, self.may_draw) as mode:
                loss = self._run_chunk_loss({**leaves, **bufs}, take(x, slice(i0, i1)), y[i0:i1], i1 - i0, strategy,
                                            keys)
                self._write_back(buffers, bufs, i0, i1)
                check_loss(loss, i1 - i0)
                gs = torch.autograd.grad(loss.sum(), list(leaves.values()), allow_unused=True)
            for slot, v, g in zip(self.layout, leaves.values(), gs):
                dst = grad[i0:i1, slot.offset : slot.end]
                if g is None:
                    dst.zero_()
                elif g.dim() > 1:  # a strided copy; g.reshape would first copy a transposed g (bmm's backward)
                    dst.unflatten(1, g.shape[1:]).copy_(g)
                else:
                    dst.copy_(g.reshape(i1 - i0, -1))
            losses[i0:i1] = loss.detach().reshape(-1)
            self._probed(mode)
        self._compile_ok = self._compiled_loss is not None  # every chunk shape compiled and ran
        return losses, grad

    def _probed(self, mode: streams.NodeRandomMode | None) -> None:
        """After a training chunk ran under the probe (``may_draw`` None): keep whether the
        model called a random operator, so that a model that draws nothing runs without the
        interception from now on."""
        if self.may_draw is None and mode is not None and self.module.training:
            self.may_draw = True if mode.drew else False

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
            for i0, i1 in self._chunks(k, self.strategy.chunk):
                named = self._named(params[i0:i1], None if buffers is None else buffers[i0:i1])
                parts = [self.strategy.outputs(self, named, take(x, slice(j, j + chunk)), i1 - i0, shared=True)
                         for j in range(0, n, chunk)]
                rows.append(torch.cat(parts, 1))
            return torch.cat(rows, 0)
        finally:
            self.module.train()


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
    raise ConfigError("model", f"the model returned {type(out).__name__}; a tensor (or an object with .logits) is expected")


def check_loss(loss: Any, m: int) -> None:
    """The per-node loss must be one scalar per node (one line naming the option otherwise)."""

    if not isinstance(loss, torch.Tensor) or loss.numel() != m:
        shape = tuple(loss.shape[1:]) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise ConfigError("loss", f"must return one scalar per node, got a value of shape {shape} per node")
