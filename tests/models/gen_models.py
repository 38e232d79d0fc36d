"""Models generated from a small grammar of ops (tests/models/test_generated_models.py).

A model is ``Flatten → Linear(d, w) → op … op → Linear(w, classes)``; each op is one of
:data:`OPS` (linear, conv, norms, activations incl. random ones, dropout variants, residual
adds, masks with and without the batch axis, noise injection out of place and in place,
Gumbel-softmax, stochastic depth, a global-generator draw), drawn by a seeded generator. The op list of the model to build is set in
:data:`CURRENT` before ``build`` calls :func:`make` (``model=tests.models.gen_models:make``)."""
from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F
from torch import nn

from decent8.models.norms import EvoNormS0

#: op name → whether it draws random numbers
OPS: dict[str, bool] = {
    "relu": False, "gelu": False, "tanh": False, "selu": False,
    "rrelu": True,                   # nn.RReLU
    "conv2d": False,                 # h as [b, 2, 4, 4] → Conv2d(2, 2, 3, padding=1) → flat
    "conv1d": False,                 # h as [b, 4, 8] → Conv1d(4, 4, 3, padding=1) → flat
    "batchnorm": False,              # nn.BatchNorm1d (running statistics: per-node buffers)
    "groupnorm": False,              # nn.GroupNorm(4, w)
    "layernorm": False,              # nn.LayerNorm(w)
    "evonorm": False,                # decent8's EvoNormS0(w)
    "dropout": True,                 # nn.Dropout
    "f_dropout": True,               # F.dropout(h, p, self.training)
    "alpha_dropout": True,           # nn.AlphaDropout
    "dropout2d": True,               # h as [b, 2, 4, 4] → nn.Dropout2d (per channel) → flat
    "residual": False,               # h + Linear(h)
    "mask_batch": True,              # h · bernoulli(full_like(h, 0.8)) / 0.8
    "mask_features": True,           # h · bernoulli(full((w,), 0.8)) / 0.8: no batch axis
    "noise": True,                   # h + 0.1·randn_like(h) (h requires grad)
    "uniform_noise": True,           # h · (1 + 0.1·(rand_like(h) − ½))
    "inplace_uniform": True,         # h · (1 + 0.1·empty_like(h).uniform_(−½, ½))
    "inplace_normal": True,          # h + 0.1·empty_like(h).normal_()
    "inplace_bernoulli": True,       # h · empty_like(h).bernoulli_(0.8) / 0.8
    "inplace_features": True,        # h · empty(w).bernoulli_(0.8) / 0.8: in place, no batch axis
    "gumbel": True,                  # h + F.gumbel_softmax(h, tau=1)
    "stochastic_depth": True,        # h + keep · Linear(h) / 0.8, keep ~ bernoulli(full((b, 1), 0.8)) per sample
    "global_noise": True,            # h · (1 + 0.01·torch.rand(w)): the global generator (warned)
}

#: how often an op is drawn (1 unless given): the ops that take vmap chunks (RReLU, an in-place
#: draw without the batch axis) or node-batched layers (the global generator) out of the
#: comparison are rarer
WEIGHTS = {"rrelu": 0.4, "global_noise": 0.3, "inplace_features": 0.4}

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


#: the layers of the ops that hold one
LAYERS = {
    "relu": lambda w: nn.ReLU(), "gelu": lambda w: nn.GELU(), "tanh": lambda w: nn.Tanh(), "selu": lambda w: nn.SELU(),
    "rrelu": lambda w: nn.RReLU(), "dropout": lambda w: nn.Dropout(0.2), "alpha_dropout": lambda w: nn.AlphaDropout(0.2),
    "residual": lambda w: nn.Linear(w, w), "stochastic_depth": lambda w: nn.Linear(w, w),
    "conv2d": lambda w: nn.Conv2d(2, 2, 3, padding=1), "conv1d": lambda w: nn.Conv1d(4, 4, 3, padding=1),
    "dropout2d": lambda w: nn.Dropout2d(0.25), "batchnorm": lambda w: nn.BatchNorm1d(w),
    "groupnorm": lambda w: nn.GroupNorm(4, w), "layernorm": lambda w: nn.LayerNorm(w), "evonorm": lambda w: EvoNormS0(w),
}
#: ops whose layer sees h reshaped: op → the per-sample shape
SHAPED = {"conv2d": (2, 4, 4), "conv1d": (4, 8), "dropout2d": (2, 4, 4)}


class GenNet(nn.Module):
    def __init__(self, input_shape, num_classes: int, ops: list[str], width: int = 32) -> None:
        super().__init__()
        self.ops, self.width = list(ops), width
        self.flat = nn.Flatten()
        self.inp = nn.Linear(math.prod(input_shape), width)
        self.layers = nn.ModuleDict({str(j): LAYERS[op](width) for j, op in enumerate(self.ops) if op in LAYERS})
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
            elif op in SHAPED:
                h = layer(h.reshape(h.shape[0], *SHAPED[op])).flatten(1)
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
            elif op == "inplace_uniform":
                h = h * (1.0 + 0.1 * torch.empty_like(h).uniform_(-0.5, 0.5))
            elif op == "inplace_normal":
                h = h + 0.1 * torch.empty_like(h).normal_()
            elif op == "inplace_bernoulli":
                h = h * torch.empty_like(h).bernoulli_(0.8) / 0.8
            elif op == "inplace_features":
                h = h * torch.empty(self.width, device=h.device).bernoulli_(0.8) / 0.8
            elif op == "gumbel":
                h = h + F.gumbel_softmax(h, tau=1.0)
            elif op == "global_noise":
                h = h * (1.0 + 0.01 * torch.rand(self.width, device=h.device))
        return self.out(h)


def make(input_shape, num_classes):
    return GenNet(input_shape, num_classes, CURRENT)
