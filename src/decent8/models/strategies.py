"""How a chunk of nodes runs: execution strategies behind one interface (docs/architecture.md
"Models", docs/execution.md).

The k nodes' models run in chunks; a strategy says how one chunk of m nodes computes its
outputs ``[m, b, ...]`` from the chunk's parameter rows (``named``: every tensor stacked
``[m, ...]``) and inputs ``x[m, b, ...]``:

=====================  ==============================================================
:class:`Loop`          one node at a time, the user's module called as it is (c = 1)
:class:`VMap` (c)      c nodes in one ``torch.func.vmap`` call
:class:`NodeBatched`   c nodes' samples merged into one batch through node-batched
(c)                    layers (one grouped convolution / batched matmul per layer)
=====================  ==============================================================

Each may be compiled (``sim.compile``: the chunk's forward + backward through
``torch.compile``, :class:`~decent8.models.stacked.StackedModel`). None of them changes
the math: the loss is always ``task.losses`` of the outputs, and every random draw of a
node comes from its own stream (:mod:`decent8.streams`), so a config computes the same
thing whichever strategy runs it (up to float summation order; tests/train/test_equivalence.py).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import torch
from torch.func import vmap

from .. import streams
from ..data.dataset import take
from .node_batched import node_batched

if TYPE_CHECKING:
    from .stacked import StackedModel

Inputs = Any  # a tensor, or a dict of tensors, each with the same leading axes


def batch_size(x: Inputs, dim: int = 0) -> int:
    if isinstance(x, dict):
        return next(iter(x.values())).shape[dim]
    return x.shape[dim]


@dataclass(frozen=True)
class Strategy:
    """How a chunk of ``chunk`` nodes runs; ``compiled``: through ``torch.compile``."""

    chunk: int = 1
    compiled: bool = False

    #: the ``sim.chunk`` family (``vmap`` covers the loop: c = 1)
    execution = "vmap"

    @property
    def spec(self) -> str:
        """The ``sim.chunk`` value that selects this strategy (``1``, ``8``, ``layers:8``)."""
        return str(self.chunk)

    @property
    def name(self) -> str:
        return type(self).__name__.lower()

    def outputs(self, model: "StackedModel", named: dict[str, torch.Tensor], x: Inputs, m: int,
                shared: bool = False) -> torch.Tensor:
        """Outputs ``[m, b, ...]`` of the chunk's m nodes (``shared``: the same ``x[N, ...]``
        for every node, evaluation)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Loop(Strategy):
    """One node at a time: the module's own ``forward`` on the node's parameters."""

    def outputs(self, model: "StackedModel", named: dict[str, torch.Tensor], x: Inputs, m: int,
                shared: bool = False) -> torch.Tensor:
        outs = []
        for i in range(m):
            row = {n: v[i] for n, v in named.items()}
            outs.append(model.forward_one(row, x if shared else take(x, i)))
        return torch.stack(outs)


@dataclass(frozen=True)
class VMap(Strategy):
    """c nodes in one ``torch.func.vmap`` call over their parameter rows."""

    def outputs(self, model: "StackedModel", named: dict[str, torch.Tensor], x: Inputs, m: int,
                shared: bool = False) -> torch.Tensor:
        # each node's token (a zero) is vmapped with its inputs: a draw on a tensor made inside
        # forward, without the node axis, is still one per node (decent8.streams)
        fn: Callable = vmap(functools.partial(streams.in_vmap_body, model.forward_one),
                            in_dims=(0, 0, None if shared else 0), randomness="different")
        return fn(torch.zeros(m), named, x)


@dataclass(frozen=True)
class NodeBatched(Strategy):
    """c nodes' samples merged sample-major through node-batched layers (:mod:`.node_batched`)."""

    execution = "layers"

    @property
    def spec(self) -> str:
        return f"layers:{self.chunk}"

    def outputs(self, model: "StackedModel", named: dict[str, torch.Tensor], x: Inputs, m: int,
                shared: bool = False) -> torch.Tensor:
        if m == 1:  # a last chunk of one node: the module as it is
            return Loop().outputs(model, named, x, m, shared)
        merged = merge_nodes(x, m, shared)
        with node_batched(model.node_aware, m):
            out = streams.in_merged_batch(model.forward_one, batch_size(merged), named, merged)
        return out.view(-1, m, *out.shape[1:]).transpose(0, 1)


def merge_nodes(x: Inputs, m: int, shared: bool) -> Inputs:
    """``x[m, b, ...]`` as one batch ``[b·m, ...]``, sample-major (row ``s·m + i`` is node
    i's sample s); ``shared``: the same ``x[N, ...]`` for all m nodes."""
    if isinstance(x, dict):
        return {n: merge_nodes(v, m, shared) for n, v in x.items()}
    if shared:
        return x.unsqueeze(1).expand(x.shape[0], m, *x.shape[1:]).reshape(m * x.shape[0], *x.shape[1:])
    return x.transpose(0, 1).reshape(m * x.shape[1], *x.shape[2:])


#: the plain loop, one node at a time
LOOP = Loop()


def strategy_for(execution: str, chunk: int, compiled: bool = False) -> Strategy:
    """The strategy of a ``sim.chunk`` family and size: ``("vmap", 1)`` is the loop."""
    if execution == "layers" and chunk > 1:
        return NodeBatched(chunk, compiled)
    if chunk <= 1:
        return Loop(1, compiled)
    return VMap(chunk, compiled)


__all__ = ["Strategy", "Loop", "VMap", "NodeBatched", "LOOP", "merge_nodes", "strategy_for"]
