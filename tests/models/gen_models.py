"""Models generated from a small grammar of ops (tests/models/test_generated_models.py).

A model is ``Flatten → Linear(d, w) → op … op → Linear(w, classes)``; each op is one of
:data:`OPS`, drawn by a seeded generator. The op list of the model to build is set in
:data:`CURRENT` before ``build`` calls :func:`make` (``model=tests.models.gen_models:make``)."""
from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F
from torch import nn

#: op name → whether it draws random numbers
OPS: dict[str, bool] = {
    "relu": False, "gelu": False, "tanh": False, "selu": False,
    "rrelu": True,                   # nn.RReLU
    "dropout": True,                 # nn.Dropout
    "f_dropout": True,               # F.dropout(h, p, self.training)
    "alpha_dropout": True,           # nn.AlphaDropout
    "residual": False,               # h + Linear(h)
    "mask_batch": True,              # h · bernoulli(full_like(h, 0.8)) / 0.8
    "mask_features": True,           # h · bernoulli(full((w,), 0.8)) / 0.8: no batch axis
    "noise": True,                   # h + 0.1·randn_like(h) (h requires grad)
    "uniform_noise": True,           # h · (1 + 0.1·(rand_like(h) − ½))
    "stochastic_depth": True,        # h + keep · Linear(h) / 0.8, keep ~ bernoulli(full((b, 1), 0.8)) per sample
    "global_noise": True,            # h · (1 + 0.01·torch.rand(w)): the global generator (warned)
}

#: how often an op is drawn (1 unless given): the ops that take vmap chunks (RReLU) or node-batched
#: layers (the global generator) out of the comparison are rarer
WEIGHTS = {"rrelu": 0.4, "global_noise": 0.3}

#: the op list :func:`make` builds
CURRENT: list[str] = ["relu"]


def generate(rng: random.Random, min_ops: int = 2, max_ops: int = 5) -> list[str]:
    """One model's ops: at least one that draws."""
    names = list(OPS)
    weights = [WEIGHTS.get(n, 1.0) for n in names]
    while True:
        ops = rng.choices(names, weights, k=rng.randint(min_ops, max_ops))
        if any(OPS[o] for o in ops):
            return ops


class GenNet(nn.Module):
    def __init__(self, input_shape, num_classes: int, ops: list[str], width: int = 32) -> None:
        super().__init__()
        self.ops, self.width = list(ops), width
        self.flat = nn.Flatten()
        self.inp = nn.Linear(math.prod(input_shape), width)
        layers: dict[str, nn.Module] = {}
        for j, op in enumerate(self.ops):
            if op in ("residual", "stochastic_depth"):
                layers[str(j)] = nn.Linear(width, width)
            elif op in ("relu", "gelu", "tanh", "selu", "rrelu", "dropout", "alpha_dropout"):
                layers[str(j)] = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "selu": nn.SELU,
                                  "rrelu": nn.RReLU}.get(op, lambda: nn.Dropout(0.2) if op == "dropout"
                                                             else nn.AlphaDropout(0.2))()
        self.layers = nn.ModuleDict(layers)
        self.out = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(self.flat(x))
        for j, op in enumerate(self.ops):
            layer = self.layers[str(j)] if str(j) in self.layers else None
            if op == "residual":
                h = h + layer(h)
            elif op == "stochastic_depth":
                if self.training:
                    keep = torch.bernoulli(torch.full((h.shape[0], 1), 0.8, device=h.device))
                    h = h + keep * layer(h) / 0.8
                else:
                    h = h + layer(h)
            elif layer is not None:
                h = layer(h)
            elif op == "f_dropout":
                h = F.dropout(h, 0.25, self.training)
            elif not self.training:
                continue
            elif op == "mask_batch":
                h = h * torch.bernoulli(torch.full_like(h, 0.8)) / 0.8
            elif op == "mask_features":
                h = h * torch.bernoulli(torch.full((self.width,), 0.8, device=h.device)) / 0.8
            elif op == "noise":
                h = h + 0.1 * torch.randn_like(h)
            elif op == "uniform_noise":
                h = h * (1.0 + 0.1 * (torch.rand_like(h) - 0.5))
            elif op == "global_noise":
                h = h * (1.0 + 0.01 * torch.rand(self.width, device=h.device))
        return self.out(h)


def make(input_shape, num_classes):
    return GenNet(input_shape, num_classes, CURRENT)
