"""All k nodes' models as one flat ``[k, d]`` parameter buffer (ARCHITECTURE "model").

One template ``nn.Module`` built from node-batched layers (:mod:`decent8.nn`) defines
the architecture; node i's parameters are row i of the flat buffer. ``functional_call``
substitutes stacked views ``[k, *shape]`` of that buffer for the module's parameters,
one forward/backward runs all k models at once (batched matmuls, grouped convs — no
Python loop over nodes), and the gradient comes back as one flat ``[k, d]`` tensor.

Buffers (running statistics: the activation quantizers' running min/max, Range BN's
running mean/scale, …) are per node too: registered on the module with their
per-model shape, they are stacked at construction into one flat ``[k, nb]`` tensor
(:attr:`StackedModel.buffers`, laid out by :attr:`StackedModel.buffer_layout`) whose
views ``[k, *shape]`` go into ``functional_call`` with the parameters; layers update
them in place in training. They are not gossiped; the averaged model is evaluated
with the node-averaged buffers. A model without buffers takes the plain path.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from ..layout import ParamLayout


class StackedModel:
    def __init__(self, module: nn.Module, device: torch.device | str = "cpu", nodes: int | None = None) -> None:
        self.module = module.to(device)
        self.device = torch.device(device)
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

    def forward(self, params: torch.Tensor, x: torch.Tensor, buffers: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``[k, b, C]`` of the k models ``params[k, d]`` on inputs ``x[k, b, ...]``.

        ``buffers[k, nb]`` defaults to :meth:`buffers_for` ``(k)``; in training mode the
        layers update them in place.
        """
        return self._call(self.layout.unflatten(params), x, params.shape[0], buffers)

    def _call(self, named: dict[str, torch.Tensor], x: torch.Tensor, k: int,
              buffers: torch.Tensor | None = None) -> torch.Tensor:
        if self.buffer_layout is not None:
            if buffers is None:
                buffers = self.buffers_for(k)
            named = {**named, **self.buffer_layout.unflatten(buffers)}
        return functional_call(self.module, named, (x,))

    def loss_and_grad(self, params: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-node mean cross-entropy ``[k]`` and its gradient ``[k, d]`` for batches ``x[k, b, ...]``, ``y[k, b]``."""
        self.module.train()
        k, b = y.shape
        # One leaf per parameter tensor (views of the flat buffer): autograd hands back each
        # tensor's gradient on its own, and one concatenation makes the [k, d] gradient. (A
        # single leaf over the flat buffer would make autograd zero-fill and add a whole
        # [k, d] tensor per parameter tensor.)
        leaves = {n: v.detach().requires_grad_(True) for n, v in self.layout.unflatten(params).items()}
        with torch.enable_grad():
            logits = self._call(leaves, x, params.shape[0])
            loss = F.cross_entropy(logits.reshape(k * b, -1), y.reshape(-1), reduction="none").view(k, b).mean(1)
            grads = torch.autograd.grad(loss.sum(), list(leaves.values()), allow_unused=True)
        grad = torch.cat([(torch.zeros_like(v) if g is None else g).reshape(params.shape[0], -1)
                          for v, g in zip(leaves.values(), grads)], dim=1)
        return loss.detach(), grad

    @torch.no_grad()
    def logits(self, params: torch.Tensor, x: torch.Tensor, chunk: int = 1024,
               buffers: torch.Tensor | None = None) -> torch.Tensor:
        """Eval-mode logits ``[k, N, C]`` of every node's model on the same inputs ``x[N, ...]``.

        Each node uses its own buffers; a single model (k = 1, e.g. the averaged one)
        uses the node-averaged buffers unless ``buffers`` is given.
        """
        self.module.eval()
        k = params.shape[0]
        outs = [
            self.forward(params, x[i : i + chunk].unsqueeze(0).expand(k, *x[i : i + chunk].shape), buffers)
            for i in range(0, x.shape[0], chunk)
        ]
        self.module.train()
        return torch.cat(outs, dim=1)
