"""All k nodes' models as one flat ``[k, d]`` parameter buffer (ARCHITECTURE "model").

One template ``nn.Module`` built from node-batched layers (:mod:`decent8.nn`) defines
the architecture; node i's parameters are row i of the flat buffer. ``functional_call``
substitutes stacked views ``[k, *shape]`` of that buffer for the module's parameters,
one forward/backward runs all k models at once (batched matmuls, grouped convs — no
Python loop over nodes), and the gradient comes back as one flat ``[k, d]`` tensor.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from ..layout import ParamLayout


class StackedModel:
    def __init__(self, module: nn.Module, device: torch.device | str = "cpu") -> None:
        self.module = module.to(device)
        self.device = torch.device(device)
        self.layout = ParamLayout.from_module(self.module)

    @property
    def dim(self) -> int:
        return self.layout.dim

    def flat_parameters(self) -> torch.Tensor:
        """The template module's current parameters as one ``[d]`` vector."""
        return torch.cat([p.detach().reshape(-1) for p in self.module.parameters()]).to(self.device)

    def forward(self, params: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[k, b, C]`` of the k models ``params[k, d]`` on inputs ``x[k, b, ...]``."""
        return functional_call(self.module, self.layout.unflatten(params), (x,))

    def loss_and_grad(self, params: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-node mean cross-entropy ``[k]`` and its gradient ``[k, d]`` for batches ``x[k, b, ...]``, ``y[k, b]``."""
        self.module.train()
        p = params.detach().requires_grad_(True)
        with torch.enable_grad():
            logits = self.forward(p, x)
            k, b = y.shape
            loss = F.cross_entropy(logits.reshape(k * b, -1), y.reshape(-1), reduction="none").view(k, b).mean(1)
            (grad,) = torch.autograd.grad(loss.sum(), p)
        return loss.detach(), grad

    @torch.no_grad()
    def logits(self, params: torch.Tensor, x: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
        """Eval-mode logits ``[k, N, C]`` of every node's model on the same inputs ``x[N, ...]``."""
        self.module.eval()
        k = params.shape[0]
        outs = [
            self.forward(params, x[i : i + chunk].unsqueeze(0).expand(k, *x[i : i + chunk].shape))
            for i in range(0, x.shape[0], chunk)
        ]
        self.module.train()
        return torch.cat(outs, dim=1)
