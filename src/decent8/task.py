"""What a node's model is trained for: its loss, and the metrics that mean something for it.

A task turns one node's model outputs and targets into a scalar loss (``loss``; it
runs per node, or under ``torch.func.vmap`` for a chunk of nodes, so it must be
made of plain tensor ops), and sums what evaluation reports over a test batch
(``eval_sums``). Built in:

================  =============================================  ============================
``cross_entropy`` softmax cross-entropy, outputs ``[b, C]`` logits  accuracy (argmax = label)
``logistic``      binary logistic loss, outputs ``[b]``/``[b, 1]``   accuracy (output > 0 ⇔ label 1)
``mse``           mean squared error (regression)                  loss only
================  =============================================  ============================

A user's loss is any callable ``loss(outputs, targets) -> scalar`` (e.g.
``torch.nn.functional.huber_loss``); it reports loss only.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch.func import vmap

from .errors import ConfigError, choice_error

LOSSES = ("cross_entropy", "logistic", "mse")


class Task:
    """A loss and, for classification, accuracy."""

    name: str = "custom"
    #: True when accuracy means something (classification)
    classification: bool = False

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def correct(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Number of correct predictions per model of ``outputs[m, N, ...]`` (classification only)."""
        raise NotImplementedError

    def losses(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Per-node losses ``[m]`` of ``outputs[m, b, ...]`` against ``targets[m, b, ...]``."""
        try:
            return vmap(self.loss)(outputs, targets)
        except Exception:  # a user loss that vmap cannot batch: one node at a time
            return torch.stack([self.loss(o, t) for o, t in zip(outputs, targets)])

    def eval_sums(self, outputs: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(loss·N, correct)`` per model, each ``[m]``, for ``outputs[m, N, ...]`` on one batch."""
        n = targets.shape[0]
        try:
            losses = vmap(self.loss, in_dims=(0, None))(outputs, targets)
        except Exception:  # a user loss that vmap cannot batch: one model at a time
            losses = torch.stack([self.loss(o, targets) for o in outputs])
        return losses.reshape(-1) * n, (self.correct(outputs, targets) if self.classification else None)


class CrossEntropy(Task):
    name = "cross_entropy"
    classification = True

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(outputs.reshape(-1, outputs.shape[-1]), targets.reshape(-1))

    def correct(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return (outputs.argmax(-1) == targets).reshape(outputs.shape[0], -1).sum(1)

    def correct_mask(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """``[m, N]`` bool: model m classifies sample s right (per-node class-weighted accuracy)."""
        return (outputs.argmax(-1) == targets).reshape(outputs.shape[0], -1)

    def losses(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        m = outputs.shape[0]
        per_sample = F.cross_entropy(outputs.reshape(-1, outputs.shape[-1]), targets.reshape(-1), reduction="none")
        return per_sample.view(m, -1).mean(1)

    def eval_sums(self, outputs: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        m, n = outputs.shape[0], targets.shape[0]
        flat = outputs.reshape(m * n, -1)
        loss = F.cross_entropy(flat, targets.repeat(m), reduction="none").view(m, n).sum(1)
        return loss, self.correct(outputs, targets)


class Logistic(Task):
    """Binary logistic regression: ``log(1 + exp(−y'·f))`` with ``y' = 2y − 1``, labels y ∈ {0, 1}."""

    name = "logistic"
    classification = True

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(outputs.reshape(-1), targets.reshape(-1).to(outputs.dtype))

    def correct(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        m = outputs.shape[0]
        return ((outputs.reshape(m, -1) > 0) == (targets.reshape(1, -1) > 0.5)).sum(1)

    def correct_mask(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        m = outputs.shape[0]
        return (outputs.reshape(m, -1) > 0) == (targets.reshape(1, -1) > 0.5)


class MSE(Task):
    """Mean squared error over every output (regression; targets reshaped to the outputs)."""

    name = "mse"

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(outputs, targets.to(outputs.dtype).reshape(outputs.shape))


class CustomLoss(Task):
    """A user's ``loss(outputs, targets) -> scalar``."""

    def __init__(self, fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "custom")

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.fn(outputs, targets)


_BUILTIN = {"cross_entropy": CrossEntropy, "logistic": Logistic, "mse": MSE}


def make_task(loss: "str | Callable | Task") -> Task:
    """A :class:`Task` from a built-in name, an import path ``pkg.module:fn``, a callable or a Task."""
    if isinstance(loss, Task):
        return loss
    if isinstance(loss, str):
        if loss in _BUILTIN:
            return _BUILTIN[loss]()
        from .models.user import is_import_path, load_factory
        if is_import_path(loss):
            return CustomLoss(load_factory(loss, option="loss"), name=loss)
        raise choice_error("loss", loss, LOSSES + ("pkg.module:function",))
    if callable(loss):
        return CustomLoss(loss)
    raise ConfigError("loss", f"must be a loss name, an import path or a callable, got {type(loss).__name__}")


__all__ = ["LOSSES", "Task", "CrossEntropy", "Logistic", "MSE", "CustomLoss", "make_task"]
