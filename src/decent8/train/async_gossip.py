"""Event-driven training for asynchronous gossip, ``algorithm=adpsgd`` (SPEC §3, §12).

The simulator's n models ``z[n, d]`` are updated one *event* at a time, in the order
of simulated time, instead of in lock-step rounds (the update itself is
:mod:`decent8.algorithms.adpsgd`'s). Node i cycles through

    start at s:    read x̂_i = x_i, draw its next batch ξ (its own stream: the sampler's
                   per-node permutations, :meth:`NodeSampler.node_epoch_indices`),
                   g_i = ∇F_i(x̂_i; ξ) + λ·x̂_i, pick its partner j
    finish at f = s + C_i(m) + A_ij:
                   x_i, x_j ← (x_i + x_j)/2;  x_i ← x_i − lr·d_i;  restart at f

with m node i's computation count, C_i(m) the device model's compute time of node i at
its m-th computation (base time × node factor × stragglers × per-step log-normal jitter,
:class:`~decent8.timing.device.DeviceModel`) and A_ij the pairwise exchange of one
model each way, max over the two directions of α + ε + b/β (:class:`~decent8.timing.
network.NetworkModel`; one message per uplink, so no sharing factor). The node waits for
its exchange before it computes again (``clock.overlap`` is not modelled here); its
partner is not interrupted (AD-PSGD's communication thread averages while the partner
computes). Events are processed in order of f (ties: the smaller node id), so
concurrent averages involving the same node are serialised — the atomicity the
algorithm assumes. The simulated wall-clock of the run is the time of the last event.

An *epoch* is n · steps_per_epoch events: the same number of gradients as an epoch of a
synchronous algorithm, but fast nodes compute more of them than slow ones. The learning
rate follows the schedule at the fractional epoch of each event.

Staleness per event (:mod:`decent8.algorithms.adpsgd`): ``node`` = writes to x_i by its
neighbours between i's read and its write, ``global`` = events in between. Every
metrics row carries the mean and max of both over the events since the previous row.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np
import torch

from ..algorithms.adpsgd import ADPSGD, momentum_direction_
from ..errors import ConfigError
from ..models.stacked import take
from ..optim.local_momentum import LocalMomentum
from ..seeding import derive_seed

_STATE_ARRAYS = ("finish", "count", "version", "read_version", "read_event", "partner")


def _one(x: Any) -> Any:
    """A node's batch ``[b, ...]`` as a one-node stack ``[1, b, ...]`` (tensor or dict)."""
    return {k: v.unsqueeze(0) for k, v in x.items()} if isinstance(x, dict) else x.unsqueeze(0)


def check_runnable(c) -> None:
    """One line for the components AD-PSGD cannot run (the builder calls it, before any
    run folder exists)."""
    if c.algorithm.runner != "event_driven":
        raise TypeError(f"AsyncGossipRunner runs algorithms that declare runner = 'event_driven', not "
                        f"{type(c.algorithm).__name__}")
    if not isinstance(c.optimizer, LocalMomentum):
        raise ConfigError("optimizer.kind", "adpsgd runs with optimizer.kind=local (local momentum SGD)")
    if c.model.buffers is not None:
        raise ConfigError("model", "adpsgd does not support models with running statistics (BatchNorm, "
                                   "precision=int8 ranges): a node's statistics would be updated out of order")
    if getattr(c.timer.clock, "faults", None) is not None:
        raise ConfigError("faults.node_drop", "faults are not modelled for adpsgd")


class AsyncGossipRunner:
    """Runs AD-PSGD's events for the engine's models; the loop calls :meth:`run_epoch`
    instead of its synchronous steps (train/loop.py)."""

    def __init__(self, c, engine, x_train: Any, y_train: torch.Tensor,
                 make_augment: Callable[[list[int]], Callable]) -> None:
        check_runnable(c)
        self.c, self.engine, self.x_train, self.y_train = c, engine, x_train, y_train
        self.alg: ADPSGD = c.algorithm
        self.opt: LocalMomentum = c.optimizer
        self.n = engine.z.shape[0]
        self.steps = c.sampler.steps_per_epoch
        self.batch = c.sampler.batch_size
        self.per_epoch = self.n * self.steps
        self.device_model = c.timer.clock.device
        self.network = c.timer.clock.network
        self.message_bytes = float(c.compressor.nbytes())
        self.wire_bytes = self.message_bytes * c.timer.clock.message_scale
        self._make_augment = make_augment
        self._augments: dict[int, Callable] = {}
        self._rows: dict[int, tuple[int, torch.Tensor]] = {}
        n = self.n
        self.finish = np.zeros(n)                        # simulated time of each node's next event
        self.count = np.zeros(n, dtype=np.int64)          # computations started per node
        self.version = np.zeros(n, dtype=np.int64)        # writes to x_i so far
        self.read_version = np.zeros(n, dtype=np.int64)   # version[i] when i read x̂_i
        self.read_event = np.zeros(n, dtype=np.int64)     # events processed when i read x̂_i
        self.partner = np.zeros(n, dtype=np.int64)        # the neighbour of i's pending event
        self.grads = torch.zeros_like(engine.z)           # g_i at x̂_i (pending)
        self.losses = torch.zeros(n, dtype=torch.float64)
        self.events = 0
        self.time = 0.0
        self.started = False
        self.stale = np.zeros(5)        # since the last row: Σ node, max node, Σ global, max global, events
        self.stale_total = np.zeros(5)  # the same over the run
        self.measured_compute_s = 0.0

    # --- one node ------------------------------------------------------------------
    def _node_batch(self, i: int, m: int) -> torch.Tensor:
        """Indices of node i's m-th batch: step m mod S of its epoch ⌊m/S⌋ stream."""
        e, s = divmod(m, self.steps)
        cached = self._rows.get(i)
        if cached is None or cached[0] != e:
            cached = (e, self.c.sampler.node_epoch_indices(i, e))
            self._rows[i] = cached
        return cached[1][s * self.batch:(s + 1) * self.batch]

    def _augment(self, i: int) -> Callable:
        if i not in self._augments:
            self._augments[i] = self._make_augment([i])
        return self._augments[i]

    def _exchange_s(self, i: int, j: int, m: int) -> float:
        """A_ij: one model each way between i and j, the slower direction."""
        net = self.network
        eps = (np.random.default_rng(derive_seed(net.seed, "async-exchange", i, m)).exponential(net.jitter_s, 2)
               if net.jitter_s > 0 else np.zeros(2))
        there = net.alpha[j, i] + eps[0] + self.wire_bytes / net.beta[j, i]
        back = net.alpha[i, j] + eps[1] + self.wire_bytes / net.beta[i, j]
        return float(max(there, back))

    def _start(self, i: int, t: float) -> None:
        """Node i reads its model at time t and computes its next gradient."""
        m = int(self.count[i])
        model, z = self.c.model, self.engine.z
        idx = self._node_batch(i, m).to(z.device)
        xb = self._augment(i)(_one(take(self.x_train, idx)), m)
        yb = self.y_train[idx].unsqueeze(0)
        ids, model.node_ids = model.node_ids, [i]  # node i's random streams (dropout, …)
        t0 = time.perf_counter()
        try:
            loss, g = model.loss_and_grad(z[i:i + 1], xb, yb, step=m)
        finally:
            model.node_ids = ids
        measured = time.perf_counter() - t0
        self.measured_compute_s += measured
        if self.opt.weight_decay:
            g.add_(z[i:i + 1], alpha=self.opt.weight_decay)
        self.grads[i].copy_(g[0])
        self.losses[i] = float(loss[0])
        j = self.alg.neighbour(i, m)
        compute = float(self.device_model.compute_times(m, measured, 1)[i])
        self.partner[i] = j
        self.finish[i] = t + compute + self._exchange_s(i, j, m)
        self.read_version[i] = self.version[i]
        self.read_event[i] = self.events
        self.count[i] = m + 1

    def _event(self, lr: float) -> float:
        """The next event in simulated time; returns the loss of the gradient it applied."""
        i = int(np.argmin(self.finish))
        j = int(self.partner[i])
        node_stale = int(self.version[i] - self.read_version[i])
        global_stale = int(self.events - self.read_event[i])
        d = momentum_direction_(self.opt.buf[i], self.grads[i], self.opt.momentum, self.opt.nesterov)
        self.alg.apply_event(self.engine.z, i, j, d, lr)
        self.version[i] += 2  # the average and the gradient step
        self.version[j] += 1
        bytes_sent = self.c.comm.bytes_sent
        bytes_sent[i] += self.message_bytes
        bytes_sent[j] += self.message_bytes
        rec = np.array([node_stale, node_stale, global_stale, global_stale, 1.0])
        for acc in (self.stale, self.stale_total):
            acc[[0, 2, 4]] += rec[[0, 2, 4]]
            acc[[1, 3]] = np.maximum(acc[[1, 3]], rec[[1, 3]])
        self.time = float(self.finish[i])
        self.events += 1
        loss = float(self.losses[i])
        self._start(i, self.time)
        return loss

    # --- the loop's interface ---------------------------------------------------------
    def run_epoch(self, epoch: int, schedule: Callable[[float], float]) -> tuple[torch.Tensor, float]:
        """Process the events of ``epoch`` (up to event (epoch + 1)·n·S); returns the
        epoch's summed loss in the loop's units (mean loss × steps) and the last lr."""
        if not self.started:
            for i in range(self.n):
                self._start(i, 0.0)
            self.started = True
        lr = schedule(float(epoch))
        total, done = 0.0, 0
        self.measured_compute_s = 0.0
        while self.events < (epoch + 1) * self.per_epoch:
            lr = schedule(epoch + (self.events - epoch * self.per_epoch) / self.per_epoch)
            total += self._event(lr)
            done += 1
        timer = self.c.timer
        timer.clock.sim_time_s = self.time
        timer.clock.rounds = self.events
        rec = np.array([self.measured_compute_s, 0.0, float(self.steps)])
        timer.measured += rec
        timer.total += rec
        mean = total / max(done, 1)
        return torch.tensor(mean * self.steps, device=self.engine.z.device), lr

    def metrics(self) -> dict[str, float]:
        """Staleness over the events since the previous call (for the metrics row)."""
        s, self.stale = self.stale, np.zeros(5)
        k = max(s[4], 1.0)
        return {"events": self.events, "staleness_node_mean": s[0] / k, "staleness_node_max": int(s[1]),
                "staleness_global_mean": s[2] / k, "staleness_global_max": int(s[3])}

    def summary(self) -> dict[str, float]:
        """Staleness over the whole run and the events per node (summary.json)."""
        s = self.stale_total
        k = max(s[4], 1.0)
        return {"events": self.events, "staleness_node_mean": s[0] / k, "staleness_node_max": int(s[1]),
                "staleness_global_mean": s[2] / k, "staleness_global_max": int(s[3]),
                "gradients_per_node": self.count.tolist()}

    def state_dict(self) -> dict[str, Any]:
        return {**{k: torch.from_numpy(getattr(self, k).copy()) for k in _STATE_ARRAYS},
                "grads": self.grads.cpu().clone(), "losses": self.losses.clone(), "events": self.events,
                "time": self.time, "started": self.started, "stale": self.stale.tolist(),
                "stale_total": self.stale_total.tolist()}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        if not state:
            return
        for k in _STATE_ARRAYS:
            getattr(self, k)[:] = state[k].numpy()
        self.grads.copy_(state["grads"])
        self.losses.copy_(state["losses"])
        self.events, self.time, self.started = int(state["events"]), float(state["time"]), bool(state["started"])
        self.stale[:] = state["stale"]
        self.stale_total[:] = state["stale_total"]
