"""The wire log of one training step and of one consensus round of a run, for pricing it
on other networks after the fact (:mod:`decent8.experiments.tta`).

The run is built from its config (:func:`decent8.train.build.build`); one training step on
the first batch of epoch 0 and one final consensus round of the run's kind are observed by
the run's :class:`~decent8.timing.clock.TrafficRecorder`.
"""
from __future__ import annotations

from typing import Any

from .build import Components, build
from .engine import Engine


def step_log(cfg: Any) -> tuple[Components, Any, Any]:
    """(components, the wire log of one training step, the log of one consensus round)."""
    c = build(cfg)
    engine = Engine(c.model, c.algorithm, c.optimizer, c.comm, c.x0)
    idx = c.sampler.epoch_indices(0)
    batch = idx[:, 0]
    engine.train_step(c.dataset.x_train[batch].to(c.device), c.dataset.y_train[batch].to(c.device), 0.01)
    log = c.timer.recorder.pop_log()
    engine.consensus = c.cfg.algorithm.consensus  # the run's kind of final round (compressed or exact)
    engine.consensus_round()
    return c, log, c.timer.recorder.pop_log()
