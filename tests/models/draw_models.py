"""User models whose forward draws random numbers in the ways a node-stream promise can break:
draws on tensors without the batch axis, random ``torch.nn`` modules in a plain
``nn.Sequential``, noise on activations that need a gradient (tests/models/test_node_draws.py)."""
from __future__ import annotations

import math

import torch
from torch import nn


def _flat(input_shape) -> int:
    return math.prod(input_shape)


class FeatureMaskNet(nn.Module):
    """One Bernoulli feature mask per node, drawn on a tensor made in ``forward`` (no batch axis)."""

    def __init__(self, input_shape, num_classes: int, width: int = 32) -> None:
        super().__init__()
        self.width = width
        self.flat = nn.Flatten()
        self.fc1 = nn.Linear(_flat(input_shape), width)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.fc1(self.flat(x)))
        if self.training:
            h = h * torch.bernoulli(torch.full((self.width,), 0.8, device=h.device)) / 0.8
        return self.fc2(h)


class WeightNoiseNet(nn.Module):
    """Noise on a parameter-shaped tensor: ``rand_like`` of the first layer's weight."""

    def __init__(self, input_shape, num_classes: int, width: int = 32) -> None:
        super().__init__()
        self.fc1 = nn.Linear(_flat(input_shape), width)
        self.fc2 = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.fc1.weight
        if self.training:
            w = w * (1.0 + 0.1 * (torch.rand_like(w) - 0.5))
        h = torch.relu(nn.functional.linear(x.flatten(1), w, self.fc1.bias))
        return self.fc2(h)


class ActivationNoiseNet(nn.Module):
    """``randn_like`` / ``rand_like`` on activations that need a gradient (noise injection)."""

    def __init__(self, input_shape, num_classes: int, width: int = 32) -> None:
        super().__init__()
        self.flat = nn.Flatten()
        self.fc1 = nn.Linear(_flat(input_shape), width)
        self.fc2 = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(self.flat(x))
        if self.training:
            h = h + 0.1 * torch.randn_like(h) + 0.05 * torch.rand_like(h)
        return self.fc2(torch.relu(h))


def make_feature_mask(input_shape, num_classes):
    return FeatureMaskNet(input_shape, num_classes)


def make_weight_noise(input_shape, num_classes):
    return WeightNoiseNet(input_shape, num_classes)


def make_activation_noise(input_shape, num_classes):
    return ActivationNoiseNet(input_shape, num_classes)


def make_rrelu_sequential(input_shape, num_classes):
    """A plain ``nn.Sequential`` with an ``nn.RReLU``: only ``torch.nn`` modules."""
    return nn.Sequential(nn.Flatten(), nn.Linear(_flat(input_shape), 32), nn.RReLU(), nn.Linear(32, num_classes))


def make_alpha_dropout_sequential(input_shape, num_classes):
    """``nn.AlphaDropout`` between SELU layers: only ``torch.nn`` modules."""
    return nn.Sequential(nn.Flatten(), nn.Linear(_flat(input_shape), 32), nn.SELU(), nn.AlphaDropout(0.2),
                         nn.Linear(32, num_classes))


def make_feature_mask_24(input_shape, num_classes):
    """The feature mask with a width (24) that no merged batch of the tests has as its length."""
    return FeatureMaskNet(input_shape, num_classes, width=24)


def make_plain_sequential(input_shape, num_classes):
    """torch's layers only, none random: the probe finds no draw."""
    return nn.Sequential(nn.Flatten(), nn.Linear(_flat(input_shape), 16), nn.ReLU(), nn.Linear(16, num_classes))


class InPlaceDrawNet(nn.Module):
    """In-place draws on tensors with the batch axis (``uniform_``, ``normal_``, ``bernoulli_``,
    ``exponential_``) and ``F.gumbel_softmax``."""

    def __init__(self, input_shape, num_classes: int, width: int = 32) -> None:
        super().__init__()
        self.flat = nn.Flatten()
        self.fc1 = nn.Linear(_flat(input_shape), width)
        self.fc2 = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(self.flat(x))
        if self.training:
            h = h * (1.0 + 0.1 * torch.empty_like(h).uniform_(-0.5, 0.5)) + 0.1 * torch.empty_like(h).normal_()
            h = h * torch.empty_like(h).bernoulli_(0.8) / 0.8 + 0.01 * torch.empty_like(h).exponential_()
            h = h + nn.functional.gumbel_softmax(h, tau=1.0)
        return self.fc2(torch.relu(h))


class InPlaceFeatureNet(FeatureMaskNet):
    """One in-place Bernoulli feature mask per node on a tensor made in ``forward`` (no batch axis)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.fc1(self.flat(x)))
        if self.training:
            h = h * torch.empty(self.width, device=h.device).bernoulli_(0.8) / 0.8
        return self.fc2(h)


def make_inplace_draws(input_shape, num_classes):
    return InPlaceDrawNet(input_shape, num_classes)


def make_inplace_feature_mask(input_shape, num_classes):
    return InPlaceFeatureNet(input_shape, num_classes, width=24)
