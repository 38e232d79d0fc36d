"""What a node's model is trained for: its loss, and the metrics that mean something for it.

A task turns one node's model outputs and targets into a scalar loss (``loss``), the
losses of a chunk of nodes ``outputs[m, b, ...]`` into ``[m]`` (``losses``: the one call
site every execution strategy uses; by default ``loss`` under ``torch.func.vmap``, so
``loss`` must be made of plain tensor ops, or a loop over the nodes), and sums what evaluation reports over a test batch
(``eval_sums``). Built in:

================  =============================================  ============================
``cross_entropy`` softmax cross-entropy, outputs ``[b, C]`` logits  accuracy (argmax = label)
``logistic``      binary logistic loss, outputs ``[b]``/``[b, 1]``   accuracy (output > 0 ⇔ label 1)
``mse``           mean squared error (regression)                  loss only
================  =============================================  ============================

A user's loss is any callable ``loss(outputs, targets) -> scalar`` (e.g.
``torch.nn.functional.huber_loss``, or ``pkg.module:fn`` on the command line). Whether
its runs also report accuracy is the option ``task`` (SPEC §8):

==================  ===================================================================
``auto`` (default)  a built-in loss decides (table above). A user's loss is
                    classification when the targets are integer class labels ``[N]``
                    and the model's outputs are ``[N, C]`` with C ≥ 2 (decided on the
                    first evaluation batch): accuracy = argmax(outputs) = label.
                    Otherwise (float targets, other shapes) it reports loss only.
``classification``  report accuracy: argmax over ``[N, C]`` outputs, or output > 0 ⇔
                    label 1 for one output per sample (``[N]``/``[N, 1]``); the
                    targets must be integer labels.
``regression``      loss only, whatever the targets.
==================  ===================================================================

A built-in loss contradicting an explicit ``task`` (``loss=mse task=classification``)
is refused with one line.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch.func import vmap

from .errors import ConfigError
from .registry import construct, losses

from .config import TASKS, check_task  # noqa: E402,F401  (torch-free: the CLI checks options before torch)


def class_outputs(outputs: torch.Tensor, targets: torch.Tensor) -> bool:
    """``task=auto`` for a user's loss: integer labels ``targets[N]`` and ``outputs[m, N, C]``, C ≥ 2."""
    return (not targets.is_floating_point() and targets.dtype != torch.bool and targets.dim() == 1
            and outputs.dim() == 3 and outputs.shape[1] == targets.shape[0] and outputs.shape[-1] >= 2)


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

    def error_sums(self, outputs: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Regression errors of ``outputs[m, N, ...]`` against ``targets[N, ...]`` on one batch:
        ``(Σ(ŷ − y)², Σ|ŷ − y|)`` per model, each ``[m]`` (float64, over every output element);
        None when one model's outputs do not hold one value per target element."""
        m = outputs.shape[0]
        out = outputs.detach().reshape(m, -1).double()
        y = targets.detach().reshape(1, -1).double()
        if out.shape[1] != y.shape[1]:
            return None
        err = out - y
        return (err * err).sum(1), err.abs().sum(1)


@losses.register("cross_entropy", order=0)
class CrossEntropy(Task):
    """Softmax cross-entropy; with ``label_smoothing`` ε the training loss is taken against
    (1 − ε)·one-hot + ε/C (Szegedy et al. 2016). Test losses (``eval_sums``) stay plain
    cross-entropy, so that runs with and without smoothing report comparable test losses."""

    name = "cross_entropy"
    classification = True

    def __init__(self, label_smoothing: float = 0.0) -> None:
        self.label_smoothing = float(label_smoothing)

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(outputs.reshape(-1, outputs.shape[-1]), targets.reshape(-1),
                               label_smoothing=self.label_smoothing)

    def correct(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return (outputs.argmax(-1) == targets).reshape(outputs.shape[0], -1).sum(1)

    def correct_mask(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """``[m, N]`` bool: model m classifies sample s right (per-node class-weighted accuracy)."""
        return (outputs.argmax(-1) == targets).reshape(outputs.shape[0], -1)

    def losses(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if type(self).loss is not CrossEntropy.loss:  # a subclass with its own loss: score with it
            return super().losses(outputs, targets)
        m = outputs.shape[0]
        per_sample = F.cross_entropy(outputs.reshape(-1, outputs.shape[-1]), targets.reshape(-1), reduction="none",
                                     label_smoothing=self.label_smoothing)
        return per_sample.view(m, -1).mean(1)

    def eval_sums(self, outputs: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        if type(self).loss is not CrossEntropy.loss:
            return super().eval_sums(outputs, targets)
        m, n = outputs.shape[0], targets.shape[0]
        flat = outputs.reshape(m * n, -1)
        loss = F.cross_entropy(flat, targets.repeat(m), reduction="none").view(m, n).sum(1)
        return loss, self.correct(outputs, targets)


@losses.register("logistic", order=1)
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


@losses.register("mse", order=2)
class MSE(Task):
    """Mean squared error over every output (regression; targets reshaped to the outputs)."""

    name = "mse"

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(outputs, targets.to(outputs.dtype).reshape(outputs.shape))


class CustomLoss(Task):
    """A user's ``loss(outputs, targets) -> scalar``; ``task`` says whether accuracy is
    reported (module docstring: ``auto`` decides on the first evaluation batch)."""

    def __init__(self, fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], name: str | None = None,
                 task: str = "auto") -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "custom")
        self.task = check_task(task)
        self.classification = task == "classification"
        self._decided = task != "auto"

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.fn(outputs, targets)

    def correct(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Argmax = label for ``[m, N, C]`` outputs (C ≥ 2); output > 0 ⇔ label 1 for one output per sample."""
        m = outputs.shape[0]
        if outputs.dim() >= 3 and outputs.shape[-1] >= 2:
            return (outputs.argmax(-1) == targets).reshape(m, -1).sum(1)
        return ((outputs.reshape(m, -1) > 0) == (targets.reshape(1, -1) > 0.5)).sum(1)

    def eval_sums(self, outputs: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        if not self._decided:
            self.classification, self._decided = class_outputs(outputs, targets), True
        return super().eval_sums(outputs, targets)


def __getattr__(name: str) -> Any:
    """``LOSSES``: the registered loss names (:data:`decent8.registry.losses`), read when asked."""
    if name == "LOSSES":
        return losses.names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_task(loss: "str | Callable | Task", task: str = "auto", integer_targets: bool | None = None,
              label_smoothing: float = 0.0) -> Task:
    """A :class:`Task` from a built-in name, an import path ``pkg.module:fn``, a callable or a
    Task, for the option ``task`` (module docstring). ``integer_targets``: whether the data
    set's targets are integer labels (None: unknown), checked against ``task=classification``.
    ``label_smoothing``: cross-entropy's ε (:class:`CrossEntropy`)."""
    check_task(task)
    if task == "classification" and integer_targets is False:
        raise ConfigError("task", "classification needs integer class labels, but the data set's targets are "
                                  "floating point; use task=regression or task=auto")
    if isinstance(loss, Task):
        built = loss
    elif isinstance(loss, str):   # a registered loss (a Task class or a function) or pkg.module:function
        entry = losses.entry(loss)
        if not (isinstance(entry.obj, type) and issubclass(entry.obj, Task)):
            return CustomLoss(entry.obj, name=loss, task=task)
        built = construct(entry.obj, config={"label_smoothing": label_smoothing}, group="loss", what=f"loss={loss}")
    elif callable(loss):
        return CustomLoss(loss, task=task)
    else:
        raise ConfigError("loss", f"must be a loss name, an import path or a callable, got {type(loss).__name__}")
    if isinstance(built, CustomLoss) and task != "auto" and built.task == "auto":
        built = CustomLoss(built.fn, name=built.name, task=task)
    elif task != "auto" and not isinstance(built, CustomLoss) and built.classification != (task == "classification"):
        kind = "classification" if built.classification else "regression"
        raise ConfigError("task", f"loss={built.name} is a {kind} loss; use task=auto or task={kind}")
    return built


__all__ = ["LOSSES", "TASKS", "check_task", "class_outputs", "Task", "CrossEntropy", "Logistic", "MSE", "CustomLoss", "make_task"]
