"""Choices decent8 makes for the user that change what runs, said in one line, and the
one-line advice for a loss that cannot fit the data set's targets."""
from __future__ import annotations

import sys
from typing import Any

from ..errors import ConfigError


def push_sum_notice(cfg: Any, info: Any, topology: Any, push_sum: bool) -> str | None:
    """The notice when ``algorithm.push_sum=auto`` switched push-sum on (SPEC §3: a W that
    is not doubly stochastic needs the weights ω to de-bias z/ω); None otherwise. ``info``: the
    algorithm's :class:`~decent8.algorithms.AlgorithmInfo`."""
    if not push_sum or info.forced_push_sum:
        return None
    if str(cfg.algorithm.push_sum).lower() not in ("auto", "none"):
        return None
    why = ("an irregular graph with topology.weights=uniform; topology.weights=metropolis makes it doubly stochastic"
           if getattr(topology, "is_undirected", False) else "a directed graph")
    return (f"decent8: notice: push-sum is on (algorithm.push_sum=auto): W of topology={cfg.topology.name} is not "
            f"doubly stochastic ({why}); algorithm.push_sum=true keeps push-sum without this notice")


def say(line: str | None) -> None:
    if line:
        sys.stderr.write(line + "\n")


def check_regression_loss(task: Any, dataset: Any, loss_option: str) -> None:
    """A classification loss on real-valued targets ``[N]`` is refused, suggesting ``loss=mse``."""
    if not dataset.is_regression or not getattr(task, "classification", False):
        return
    y = dataset.y_train
    binary = bool(((y == 0) | (y == 1)).all()) if y.numel() else True
    if task.name == "logistic" and binary:     # float 0/1 labels: a logistic regression
        return
    raise ConfigError("loss", f"loss={loss_option} is a classification loss, but the data set's targets are real "
                              f"numbers {list(y.shape)} (regression); use loss=mse, or a regression loss of your "
                              f"own (loss=pkg.module:fn, e.g. a Huber loss)")


__all__ = ["push_sum_notice", "say", "check_regression_loss"]
