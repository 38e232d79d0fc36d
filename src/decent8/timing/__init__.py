"""Network and device model, simulated wall-clock and faults (SPEC §12).

* :mod:`.network` — per-link latency/bandwidth, profiles, shared uplinks, jitter;
* :mod:`.device` — per-node compute time per step (FLOPs / throughput, fixed,
  measured), FP32 vs 8-bit, stragglers;
* :mod:`.clock` — :class:`~.clock.TrafficRecorder` (an observer of the communicator
  that logs the wire traffic of each step) and :class:`~.clock.SimClock` (turns a step's log into simulated seconds);
* :mod:`.faults` — node dropout / link failure per round with re-weighted mixing;
* :mod:`.plots` — accuracy vs simulated time and vs bytes.

:func:`make_timer` builds all of it from a run's config; the training loop calls
:meth:`Timer.after_step` after every step and puts ``sim_time_s`` (and the measured
compute / communication split) in every metrics line and the summary.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np
import torch

from ..errors import ConfigError
from ..comm.base import Communicator
from .clock import SimClock, TrafficRecorder, StepLog, gossip_time, ring_hops_time
from .device import DeviceModel, device_from_config
from .faults import FaultModel, FaultySimulatorCommunicator, faulty_weights
from .network import PROFILES, NetworkModel, cross_rank_profile
from ..seeding import derive_seed
from ..cost.counts import count_model
from ..cost.counts import build_for_cost
from ..layout import ParamLayout
from ..algorithms import algorithm_info
from ..topology.graphs import DENSE_MAX_NODES
from ..comm.placement import make_placement
from ..compression import make_compressor
from ..compression.wire import value_bits_of, wire_compression


# Building a model to count it initialises its layers from the global torch RNG, which
# training later draws from (stochastic rounding); fork_rng keeps the run's stream the
# same whether or not the count was cached.
@functools.lru_cache(maxsize=32)
def _train_flops(model: str, norm, batch: int, dataset, width, image_size) -> float:
    with torch.random.fork_rng(devices=[]):
        adds, mults = count_model(model, norm, "fp32", batch, dataset, width, image_size).total("training")
    return float(adds + mults)


@functools.lru_cache(maxsize=32)
def _reference_layout(model: str, precision: str):
    try:
        with torch.random.fork_rng(devices=[]):
            net, _, _ = build_for_cost(model, None, precision)
    except ConfigError as e:
        raise ConfigError("clock.as_model", e.message) from None
    return ParamLayout.from_module(net)


def check_faults(cfg, external_comm: bool) -> FaultModel:
    """The fault model of a run; faults only in the simulator, for gossip algorithms."""
    f = FaultModel(cfg.nodes, cfg.faults.node_drop, cfg.faults.link_drop, derive_seed(cfg.seed, "faults"))
    if f.active:
        opt = "faults.node_drop" if cfg.faults.node_drop else "faults.link_drop"
        if cfg.backend != "simulator" or external_comm:
            raise ConfigError(opt, "faults are simulated: only with backend=simulator")
        if not algorithm_info(cfg.algorithm.name).tolerates_faults:
            raise ConfigError(opt, f"a ring all-reduce ({cfg.algorithm.name}) cannot lose messages; "
                                   f"faults need a gossip algorithm")
        if cfg.nodes > DENSE_MAX_NODES:
            raise ConfigError(opt, f"faults draw dense n × n delivery masks: at most {DENSE_MAX_NODES} nodes, "
                                   f"got {cfg.nodes}")
    return f


class Timer:
    """The run's clock plus measured per-step compute / communication wall time.

    Host syncs (CUDA): only ``device_model=measured`` needs each step's own compute time,
    so only then (:attr:`step_sync`) does the loop wait for the device after every step
    and the communicator after every communication call. Otherwise steps run without a
    host sync: their host-side times count what the host waited for, and at the end of
    each epoch (where the loop reads the train loss, so it waits for the device anyway)
    the time the device still needed is added as compute (:meth:`add_backlog`). The
    compute / communication split is then exact on a CPU (every op is synchronous) and
    approximate on CUDA (communication calls count until their launch).
    """

    def __init__(self, comm: Communicator, clock: SimClock, device: DeviceModel) -> None:
        self.comm = comm
        #: the wire traffic of each step, as the communicator reports it
        self.recorder = comm.observe(TrafficRecorder())
        self.clock = clock
        self.device = device
        self.measured = np.zeros(3)   # Σ compute s, Σ comm s, steps (since the last interval read)
        self.total = np.zeros(3)      # the same over the whole run
        #: wait for the device after every step (only the measured device model needs it)
        self.step_sync = device.kind == "measured"
        comm.sync_calls = comm.sync_calls and self.step_sync

    def add_backlog(self, seconds: float) -> None:
        """Count ``seconds`` (the wait for the device after unsynced steps) as compute time."""
        self.measured[0] += max(float(seconds), 0.0)
        self.total[0] += max(float(seconds), 0.0)

    @property
    def sim_time_s(self) -> float:
        return self.clock.sim_time_s

    def after_step(self, step: int, measured_step_s: float, measured_comm_s: float) -> float:
        """Advance the clock by training step ``step``; returns its simulated seconds."""
        compute_s = max(measured_step_s - measured_comm_s, 0.0)
        rec = np.array([compute_s, measured_comm_s, 1.0])
        self.measured += rec
        self.total += rec
        c = self.device.compute_times(step, compute_s, self.comm.k)
        return self.clock.advance(self.recorder.pop_log(), c)

    def after_round(self) -> float:
        """Advance the clock by a gossip-only round (no computation)."""
        return self.clock.advance(self.recorder.pop_log(), np.zeros(self.clock.topology.n))

    def interval(self) -> tuple[float, float]:
        """Mean measured (compute, comm) seconds per step since the last call."""
        c, m, k = self.measured
        self.measured[:] = 0
        return (c / k, m / k) if k else (float("nan"), float("nan"))

    def run_means(self) -> tuple[float, float]:
        c, m, k = self.total
        return (c / k, m / k) if k else (float("nan"), float("nan"))

    def state_dict(self) -> dict:
        return {**self.clock.state_dict(), "total": self.total.tolist()}

    def load_state_dict(self, state: dict | None) -> None:
        if state:
            self.clock.load_state_dict(state)
            self.total[:] = state.get("total", [0.0, 0.0, 0.0])

    def describe(self) -> dict:
        return {"network": self.clock.network.describe(), "device_model": self.device.describe(),
                "overlap": self.clock.overlap, "message_scale": self.clock.message_scale,
                "ring_scale": self.clock.ring_scale}


def make_timer(cfg, topology, comm: Communicator, compressor, dim: int, faults: FaultModel) -> Timer:
    """Network, device and clock of a run (validates the network, device_model and clock groups)."""
    net = NetworkModel.from_config(cfg.network, topology.n, derive_seed(cfg.seed, "network"))
    dist_cfg = getattr(cfg, "dist", None)
    cross = None if dist_cfg is None else cross_rank_profile(dist_cfg)
    if cross is not None and dist_cfg.ranks is not None:  # links between ranks: their own profile (SPEC §12)
        net.apply_placement(make_placement(dist_cfg.placement, topology.n, int(dist_cfg.ranks), cfg.seed), *cross)
    as_model = cfg.clock.as_model
    if not isinstance(cfg.clock.overlap, bool):
        raise ConfigError("clock.overlap", f"must be true or false, got {cfg.clock.overlap!r}")
    message_scale = ring_scale = 1.0
    if as_model is not None:
        ref = _reference_layout(as_model, cfg.precision)
        c = cfg.compression
        ref_comp = make_compressor(wire_compression(c.name, cfg.precision, c.wire, value_bits_of(c.params)), ref,
                                   params=dict(c.params))
        message_scale = ref_comp.nbytes() / compressor.nbytes()
        ring_scale = ref.dim / dim

    def flops():
        model = as_model or cfg.model.name
        same = as_model is None
        return _train_flops(model, cfg.model.norm if same else None, int(cfg.data.batch_size),
                            cfg.data.name if same else None, cfg.model.width if same else None,
                            cfg.data.image_size if same else None)

    def flops_checked() -> float:
        try:
            return flops()
        except ConfigError:
            raise
        except Exception as e:  # a model the cost model cannot trace
            raise ConfigError("device_model", f"cannot count the FLOPs of model {as_model or cfg.model.name!r} "
                                              f"({e}); use device_model=fixed or measured") from None

    dcfg = cfg.device_model
    if dcfg.name == "auto":
        try:
            flops_checked()
            kind = "flops"
        except ConfigError:
            if as_model is not None:
                raise
            kind = "measured"
        dcfg = dataclasses.replace(dcfg, name=kind)
    device = device_from_config(dcfg, topology.n, cfg.precision, derive_seed(cfg.seed, "device"), flops_checked)
    clock = SimClock(topology, net, device, faults, cfg.clock.overlap, message_scale, ring_scale)
    return Timer(comm, clock, device)


__all__ = ["NetworkModel", "PROFILES", "DeviceModel", "device_from_config", "FaultModel", "FaultySimulatorCommunicator",
           "faulty_weights", "TrafficRecorder", "SimClock", "StepLog", "gossip_time", "ring_hops_time",
           "Timer", "make_timer", "check_faults"]
