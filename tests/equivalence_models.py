"""User models for the execution-equivalence tests (tests/train/test_equivalence.py): stochastic
layers (dropout), norms of every kind and a residual add, as a user would write them."""
from __future__ import annotations

import torch
from torch import nn


class BNDropNet(nn.Module):
    """Conv + BatchNorm + Dropout: per-node running statistics and dropout masks."""

    def __init__(self, input_shape, num_classes: int) -> None:
        super().__init__()
        c = input_shape[0]
        self.conv = nn.Conv2d(c, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(6 * 4 * 4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return self.fc(self.drop(h.flatten(1)))


class ResidualNormNet(nn.Module):
    """Depthwise conv, GroupNorm, GELU, Dropout2d, a residual add, LayerNorm."""

    def __init__(self, input_shape, num_classes: int) -> None:
        super().__init__()
        c = input_shape[0]
        self.stem = nn.Conv2d(c, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.gn = nn.GroupNorm(2, 8)
        self.drop2d = nn.Dropout2d(0.1)
        self.ln = nn.LayerNorm(8)
        self.head = nn.Linear(8, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        h = h + self.drop2d(nn.functional.gelu(self.gn(self.dw(h))))
        return self.head(self.ln(h.mean(dim=(2, 3))))


class PlainDropNet(nn.Module):
    """Plain conv / linear layers with dropout: runs on node-batched layers too."""

    def __init__(self, input_shape, num_classes: int) -> None:
        super().__init__()
        c = input_shape[0]
        self.conv = nn.Conv2d(c, 6, 3, padding=1)
        self.drop = nn.Dropout(0.25)
        self.fc = nn.Linear(6 * 4 * 4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        return self.fc(self.drop(h.flatten(1)))


class TwoConvDropNet(nn.Module):
    """Two convolutions, max-pool and dropout: under vmap the second convolution's 8-bit
    tensors have the node dim in front of a sample-major layout (not contiguous)."""

    def __init__(self, input_shape, num_classes: int) -> None:
        super().__init__()
        c = input_shape[0]
        self.conv1 = nn.Conv2d(c, 6, 3, padding=1)
        self.conv2 = nn.Conv2d(6, 8, 3, padding=1)
        self.drop = nn.Dropout(0.25)
        self.fc = nn.Linear(8 * 4 * 4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = nn.functional.max_pool2d(torch.relu(self.conv2(torch.relu(self.conv1(x)))), 2)
        return self.fc(self.drop(h.flatten(1)))


def make_two_conv_drop(input_shape, num_classes):
    return TwoConvDropNet(input_shape, num_classes)


def make_bn(input_shape, num_classes):
    return BNDropNet(input_shape, num_classes)


def make_residual(input_shape, num_classes):
    return ResidualNormNet(input_shape, num_classes)


def make_plain_drop(input_shape, num_classes):
    return PlainDropNet(input_shape, num_classes)


def make_bert(input_shape, num_classes, vocab_size: int = 64):
    """A tiny random HuggingFace BERT with dropout on (hidden and attention, eager attention:
    its dropout is ``F.dropout``, drawn from the nodes' streams)."""
    from transformers import BertConfig, BertForSequenceClassification

    cfg = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=16, num_labels=num_classes,
                     hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, attn_implementation="eager")
    return BertForSequenceClassification(cfg)


class MLPDrop(nn.Module):
    def __init__(self, input_shape, num_classes: int) -> None:
        super().__init__()
        d = 1
        for s in input_shape:
            d *= s
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(d, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def make_mlp_drop(input_shape, num_classes):
    return MLPDrop(input_shape, num_classes)


def smoothed_cross_entropy(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """A user-defined loss (``loss=tests.equivalence_models:smoothed_cross_entropy``)."""
    return nn.functional.cross_entropy(outputs, targets, label_smoothing=0.2)
