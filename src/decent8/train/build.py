"""Build every component of a run from its resolved config (:mod:`.resolve`; SPEC §8).

Construction only: data, partition, topology, communicator, model, compressor,
algorithm, optimizer and the simulated clock. Nothing is written anywhere until
:func:`build` has returned: a bad option raises a one-line
:class:`~decent8.errors.ConfigError` and leaves no run folder behind.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from ..algorithms import algorithm_class, algorithm_info
from ..algorithms.base import Algorithm, AlgorithmContext
from ..comm.base import Communicator
from ..comm.simulator import SimulatorCommunicator
from ..compression import make_compressor
from ..compression.base import Compressor
from ..compression.payload import Payload
from .. import user_code
from ..plugins import is_import_path
from ..compression.wire import INT8_WIRE, value_bits_of, wire_compression  # noqa: F401  (re-exported: train.build.wire_compression)
from ..config import TrainConfig, is_frozen
from ..cost.memory import RunMemory, run_memory
from ..data.dataset import ArrayDataset
from ..data.partition import make_partition
from ..data.sampler import NodeSampler
from ..errors import ConfigError
from ..models import MODELS, StackedModel, init_parameters, make_model
from ..models.execution import parse_chunk, parse_compile
from ..models.zoo import check_precision
from ..task import CrossEntropy, make_task
from .user_metrics import load_metrics
from .byzantine import ByzantineRun, edge_slots, make_byzantine
from .notices import check_regression_loss, push_sum_notice, say
from .norm_stats import warn_if_skewed
from ..quant.quantizer import QuantSpec
from ..optim import LRSchedule, make_optimizer
from ..seeding import derive_seed, node_generators
from ..topology import Topology, topology_from_config
from ..timing import FaultySimulatorCommunicator, Timer, check_faults, make_timer

from .run_data import id_dict_inputs, load_dataset, pretrained_folder  # noqa: F401  (re-exported)
from .resolve import (check_scalars, d2_default_gamma, default_gamma, default_lr, option_value,  # noqa: F401
                      is_resolved, resolve, resolve_algorithm_defaults, resolve_with_defaults)
from .validate import (BACKENDS, MAX_EPOCHS, MAX_SEED, MAX_STEP, MAX_TIMEOUT_S, MIN_DECAY_EVERY,  # noqa: F401
                       SCHEDULES, _interval, _number, check_plain)
from ..comm.block import BlockCommunicator
from ..comm.placement import make_placement
from ..comm.distributed import DistributedCommunicator
from .async_gossip import check_runnable


@dataclass
class Components:
    cfg: TrainConfig
    device: torch.device
    dataset: ArrayDataset
    parts: list[np.ndarray]
    topology: Topology
    push_sum: bool
    gamma: float
    #: options filled from the per-algorithm defaults ({option: value}; also in summary.json)
    defaults: dict
    comm: Communicator
    model: StackedModel
    x0: torch.Tensor
    compressor: Compressor
    algorithm: Algorithm
    optimizer: object
    schedule: LRSchedule
    sampler: NodeSampler
    timer: Timer | None = None      # the simulated clock (decent8.timing, SPEC §12)
    byzantine: ByzantineRun | None = None   # Byzantine nodes and the robust rule (train/byzantine.py)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise ConfigError("device", f"unknown device {name!r}; allowed: auto, cpu, cuda, cuda:N") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", f"{name!r} requested but CUDA is not available here; use device=cpu")
    if dev.type not in ("cpu", "cuda"):
        raise ConfigError("device", f"unsupported device {name!r}; allowed: auto, cpu, cuda, cuda:N")
    if dev.type == "cpu" and dev.index not in (None, 0):
        raise ConfigError("device", f"{name!r}: there is one CPU device; use device=cpu")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ConfigError("device", f"{name!r}: only {torch.cuda.device_count()} CUDA device(s) here "
                                    f"(cuda:0 … cuda:{torch.cuda.device_count() - 1})")
    return dev


def int8_exact_models(algorithm: str, compression: str, wire: str) -> bool:
    """True when the 8-bit wire (``compression.wire=int8``, or ``auto`` at ``precision=int8``)
    turned the dense wire of an algorithm that never compresses into 8-bit models (D-PSGD,
    SGP); such algorithms without an 8-bit wire format are refused in one line
    (:meth:`~decent8.algorithms.AlgorithmInfo.int8_wire`; ``compression.wire=fp32`` runs them)."""
    return wire != compression and algorithm_info(algorithm).int8_wire(algorithm, compression)


def quant_spec(cfg: TrainConfig) -> QuantSpec | None:
    """The 8-bit training settings (None for precision=fp32); validates precision and quant.*."""
    check_precision(cfg.precision)
    q = cfg.quant
    spec = QuantSpec(bits=q.bits, grad_bits=q.grad_bits, stochastic=q.stochastic, eval_stochastic=q.eval_stochastic)
    return spec if cfg.precision == "int8" else None


def _process_bytes() -> int:
    """Resident memory of this process (Linux: /proc/self/statm; 0 where unknown)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _memory_bytes(device: torch.device) -> int | None:
    """Memory a run on ``device`` can reach, None if unknown. CUDA: the device's; CPU: what
    this process holds plus the memory the system still has available (Linux MemAvailable;
    elsewhere physical memory)."""
    try:
        if device.type == "cuda":
            return int(torch.cuda.get_device_properties(device).total_memory)
        try:
            with open("/proc/meminfo") as f:
                info = dict(line.split(":", 1) for line in f)
            return int(info["MemAvailable"].split()[0]) * 1024 + _process_bytes()
        except (OSError, KeyError, ValueError):
            return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError, RuntimeError):
        return None


def estimate_memory(cfg: TrainConfig, parameters: int, local_nodes: int, edge_slots: int = 0) -> RunMemory:
    """The nodes' state of the run, from the declarations of its algorithm, optimizer and
    wire compressor (:func:`decent8.cost.memory.run_memory`); ``edge_slots``: the in-edge slots
    of a run with per-edge mixing (:func:`decent8.train.byzantine.edge_slots`)."""
    c, o = cfg.compression, cfg.optimizer
    wire = c.name if is_import_path(c.name) else wire_compression(c.name, cfg.precision, c.wire, value_bits_of(c.params))
    return run_memory(parameters, local_nodes, cfg.algorithm.name, o.kind, wire, momentum=o.momentum or 0.0,
                      weight_decay=o.weight_decay, checkpoint=cfg.checkpoint, edge_slots=edge_slots)


def _fewer(cfg: TrainConfig, mem: RunMemory, room: int) -> list[str]:
    """What to change so that the state fits in ``room`` bytes (one-line suggestions). The node
    count leaves 10 % of the room free: measured peaks run 5–10 % above the estimate
    (tests/cost/test_run_memory.py)."""
    out = []
    most = int(0.9 * room) // max(1, mem.parameters * mem.per_parameter)
    if most >= 1 and cfg.backend == "simulator":
        out.append(f"nodes={most:,} or fewer")
    if cfg.checkpoint and mem.checkpoint > mem.step:
        out.append(f"checkpoint=false ({mem.step} B)")
    out.append("a smaller model.width")
    if cfg.backend == "simulator":
        out.append("backend=distributed with dist.ranks=R (each process holds n/R nodes)")
    return out


def check_model_size(cfg: TrainConfig, input_shape, num_classes: int, qspec, device: torch.device, local_nodes: int,
                     vocab_size: int | None = None, edge_slots: int = 0) -> int | None:
    """Count the model's parameters without allocating them (on the meta device) and stop
    with one line when the nodes' state cannot fit in memory (``model.width=1000000``,
    ``nodes=10000``): this process's resident memory (the data set, torch) plus
    :func:`estimate_memory` against :func:`_memory_bytes`. Returns the estimated peak in
    bytes (None: not estimated). Built-in models only: a user's factory is built once, for real."""
    if cfg.model.name not in MODELS:
        return None
    try:
        with torch.device("meta"):
            module = make_model(cfg.model.name, input_shape, num_classes, cfg.model.width,
                                norm=cfg.model.norm, precision=cfg.precision, quant=qspec, vocab_size=vocab_size)
        params = sum(p.numel() for p in module.parameters())
    except ConfigError:
        raise
    except Exception:  # a model that cannot be built on the meta device: the real build decides
        return None
    mem = estimate_memory(cfg, params, local_nodes, edge_slots)
    held = _process_bytes() if device.type == "cpu" else 0
    need = held + mem.total
    have = _memory_bytes(device)
    if have is not None and need > have:
        option = "nodes" if held + mem.parameters * mem.per_parameter <= have else "model.width"
        what = f"{local_nodes:,} node(s) of {cfg.model.name}" + (f" width {cfg.model.width}" if cfg.model.width else "")
        raise ConfigError(option, f"{what} ({params:,} parameters) need about {need / 1e9:.3g} GB "
                                  f"({mem.describe()}; {held / 1e9:.2g} GB held), more than the {have / 1e9:.3g} GB "
                                  f"of {device.type} memory available; use {', '.join(_fewer(cfg, mem, have - held))}")
    return need


def check_parts(parts, nodes: int, n: int) -> list[np.ndarray]:
    """A user's split: ``nodes`` non-empty lists of training-row indices in ``[0, n)``."""
    parts = [np.asarray(p, dtype=np.int64).reshape(-1) for p in parts]
    if len(parts) != nodes:
        raise ConfigError("parts", f"need one index list per node ({nodes}), got {len(parts)}")
    for i, p in enumerate(parts):
        if p.size == 0:
            raise ConfigError("parts", f"node {i} has no training samples")
        if p.min() < 0 or p.max() >= n:
            raise ConfigError("parts", f"node {i} has indices outside [0, {n})")
    return parts


def checked_user_compressor(compressor: Compressor, name: str, x0: torch.Tensor) -> Compressor:
    """A user's compressor, checked at every call (a :class:`~decent8.compression.Payload`
    from ``encode``; ``decode``: floating ``[k, d]``; ``decode_sparse``: None or
    ``(columns, values)`` of equal shape) and probed once on the initial parameters."""
    d = compressor.layout.dim

    def payload(out, args):
        return None if isinstance(out, Payload) else f"{type(out).__name__}, not a decent8.compression.Payload"

    def dense(out, args):
        k = args[0].num_nodes
        if not isinstance(out, torch.Tensor):
            return f"{type(out).__name__}, not a tensor"
        if tuple(out.shape) != (k, d) or not out.is_floating_point():
            return f"a {out.dtype} tensor of shape {tuple(out.shape)}; expected floating point of shape {(k, d)}"
        return None

    def sparse(out, args):
        if out is None:
            return None
        ok = (isinstance(out, tuple) and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out)
              and out[0].shape == out[1].shape and out[0].dim() == 2 and out[0].shape[0] == args[0].num_nodes
              and not out[0].is_floating_point())
        return None if ok else "something other than None or (integer columns [k, K], values [k, K])"

    user_code.guard(compressor, "compression", name, ("encode", "decode", "decode_sparse"),
                    {"encode": payload, "decode": dense, "decode_sparse": sparse})
    probe = compressor.encode(x0.detach().reshape(1, d).float(), [torch.Generator().manual_seed(0)])
    compressor.decode(probe)
    compressor.decode_sparse(probe)
    return compressor


def build(cfg: TrainConfig, comm: Communicator | None = None, *, module: "torch.nn.Module | None" = None,
          dataset: ArrayDataset | None = None, loss=None, parts: list[np.ndarray] | None = None,
          defaults: dict | None = None, metrics=None) -> Components:
    """Construct the run from a resolved config (:func:`~.resolve.resolve`); a config not yet
    resolved is resolved first, the one path every caller takes. ``comm`` defaults to the
    simulator (or the backend the config names); ``cfg`` is not changed: the components
    hold the frozen resolved config (``Components.cfg``: what config.yaml records).

    The Python API (:mod:`decent8.api`) may hand over the model (an initialised
    ``nn.Module``), the data set, the loss, the metrics (callables) and the per-node index
    lists instead of their config options. ``defaults``: the options the resolution filled (summary.json),
    when ``cfg`` was resolved by the caller."""
    check_scalars(cfg)
    qspec = quant_spec(cfg)
    device = resolve_device(cfg.device)
    torch.manual_seed(derive_seed(cfg.seed, "torch"))
    pretrained_dir = pretrained_folder(cfg)
    if dataset is None:
        dataset = load_dataset(cfg, module_given=module is not None)
    elif cfg.model.name == "hf" and module is None:
        dataset = id_dict_inputs(dataset)
    topology = topology_from_config(cfg.topology, cfg.nodes, cfg.seed)
    if not (is_frozen(cfg) and is_resolved(cfg)):
        cfg, defaults = resolve_with_defaults(cfg, dataset, module_given=module is not None, topology=topology)
    defaults = dict(defaults or {})

    if cfg.nodes > len(dataset.y_train):
        raise ConfigError("nodes", f"{cfg.nodes} nodes but only {len(dataset.y_train)} training samples")
    if cfg.data.batch_size > len(dataset.y_train):
        raise ConfigError("data.batch_size", f"must be at most the {len(dataset.y_train)} training samples of "
                                             f"{cfg.data.name}, got {cfg.data.batch_size}")
    if parts is None:
        parts = make_partition(
            cfg.partition.name, dataset.partition_labels, cfg.nodes, cfg.seed,
            skew=cfg.skew, alpha=cfg.partition.alpha, shards_per_node=cfg.partition.shards_per_node,
            reference=cfg.partition.reference, users=dataset.users_train,
        )
    else:
        parts = check_parts(parts, cfg.nodes, len(dataset.y_train))
    empty = [i for i, p in enumerate(parts) if len(p) == 0]
    if empty:
        raise ConfigError("nodes", f"node {empty[0]} gets no training samples ({len(empty)} of {cfg.nodes} nodes are "
                                   f"empty with {len(dataset.y_train)} samples, partition={cfg.partition.name}); "
                                   f"use fewer nodes")
    t = cfg.topology
    algorithm_type = algorithm_class(cfg.algorithm.name)
    info = algorithm_info(cfg.algorithm.name)
    push_sum = info.resolve_push_sum(cfg.algorithm.name, cfg.algorithm.push_sum, topology.is_doubly_stochastic)
    topology.validate_for(push_sum)

    faults = check_faults(cfg, external_comm=comm is not None)
    if comm is None:
        if cfg.backend == "distributed" and cfg.dist.ranks is not None:  # blocks of nodes on R ranks
            owner = make_placement(cfg.dist.placement, cfg.nodes, cfg.dist.ranks, cfg.seed)
            comm = BlockCommunicator(topology, owner, device, cfg.dist_timeout_s)
            device = comm.device  # cuda → cuda:LOCAL_RANK
        elif cfg.backend == "distributed":  # one process per node, started by torchrun or `decent8 launch`
            comm = DistributedCommunicator(topology, device, cfg.dist_timeout_s)
            device = comm.device  # cuda → cuda:LOCAL_RANK
        elif faults.active:
            comm = FaultySimulatorCommunicator(topology, faults, push_sum, device)
        else:
            comm = SimulatorCommunicator(topology, device)

    task = make_task(cfg.loss if loss is None else loss, cfg.task,
                     integer_targets=not dataset.is_regression, label_smoothing=cfg.label_smoothing)
    if cfg.label_smoothing and not isinstance(task, CrossEntropy):   # a loss given to the API as a callable
        raise ConfigError("label_smoothing", f"applies to loss=cross_entropy only, not {task.name}; "
                                             "use label_smoothing=0")
    check_regression_loss(task, dataset, cfg.loss)   # real-valued targets: suggest loss=mse (train/notices.py)
    task.user_metrics = load_metrics(cfg.metrics if metrics is None else metrics)  # train/user_metrics.py
    parse_chunk(cfg.sim.chunk)    # the execution options are resolved after build (train/loop.py)
    parse_compile(cfg.sim.compile)
    byzantine = make_byzantine(cfg, comm, topology, push_sum, algorithm_type, faults.active)
    if byzantine is not None and byzantine.flips_labels and (dataset.is_regression or not task.classification):
        raise ConfigError("byzantine.attack", "label_flip flips class labels; this run has no classes")
    if module is None:
        model_name = cfg.model.name   # resolved: the default cnn on token ids is the text classifier
        if model_name != "hf":  # a pretrained transformer is sized by its checkpoint
            check_model_size(cfg, dataset.input_shape, dataset.num_classes, qspec, device, comm.k, dataset.vocab_size,
                             edge_slots=edge_slots(byzantine, topology, comm.local_nodes))
        module = make_model(model_name, dataset.input_shape, dataset.num_classes, cfg.model.width,
                            norm=cfg.model.norm, precision=cfg.precision, quant=qspec, vocab_size=dataset.vocab_size,
                            pretrained_dir=pretrained_dir, seed=derive_seed(cfg.seed, "init"))
        if pretrained_dir is None:  # a checkpoint's weights stay; model=hf seeds its new head itself
            init_parameters(module, derive_seed(cfg.seed, "init"))
    model = StackedModel(module, device, nodes=comm.k, task=task, seed=cfg.seed, node_ids=comm.local_nodes)
    warn_if_skewed(module, cfg.model.norm_stats, cfg.partition.name, cfg.skew)
    x0 = model.flat_parameters()

    c = cfg.compression
    wire = wire_compression(c.name, cfg.precision, c.wire, value_bits_of(c.params))
    compressor = make_compressor(wire, model.layout, params=dict(c.params))
    if is_import_path(c.name):   # a user's compressor: checked at its boundary, probed before any run folder
        compressor = checked_user_compressor(compressor, c.name, x0)
    gamma = float(cfg.algorithm.gamma)   # resolved (resolve.py: the default, or the topology's for D²)
    generators = node_generators(cfg.seed, "compress", comm.local_nodes)
    try:
        eight_bit_models = int8_exact_models(cfg.algorithm.name, c.name, wire)
    except ConfigError:   # the 8-bit wire was asked for at precision=fp32: name that option
        if cfg.precision == "int8":
            raise
        raise ConfigError("compression.wire", f"int8 is not defined for algorithm '{cfg.algorithm.name}' (it "
                                              f"exchanges exact fp32 models); use compression.wire=fp32") from None
    options = {key: option_value(cfg, option) for key, option in info.options.items()}
    context = AlgorithmContext(
        comm, make_compressor("identity", model.layout) if eight_bit_models else compressor, gamma, push_sum,
        generators, t.name, t.params.get("rows"), t.params.get("cols"), options, params=dict(cfg.algorithm.params), info=info,
        wire_compressor=compressor if eight_bit_models else None)   # D-PSGD at int8: 8-bit models on the wire
    if is_import_path(cfg.algorithm.name):   # a user's algorithm: one line for what it raises
        name = cfg.algorithm.name
        algorithm = user_code.call("algorithm", f"{name}.create", algorithm_type.from_context, context)
        if not isinstance(algorithm, Algorithm):
            raise user_code.UserCodeError("algorithm", f"{name}.create returned {type(algorithm).__name__}, "
                                                       f"not an instance of decent8.algorithms.Algorithm")
        user_code.guard(algorithm, "algorithm", name, ("init_state", "update", "consensus_step", "debiased",
                                                       "local_direction", "state_dict", "load_state_dict",
                                                       "exact_consensus_step"))
    else:
        algorithm = algorithm_type.from_context(context)

    if byzantine is not None and byzantine.robust is not None:
        algorithm.robust = byzantine.robust   # D-PSGD mixes through it (algorithms/dpsgd.py)

    o = cfg.optimizer
    optimizer = make_optimizer(info.optimizer_for(cfg.algorithm.name, o.kind), o.momentum, o.nesterov, o.weight_decay,
                               betas=o.betas, eps=o.eps)
    schedule = LRSchedule(lr=o.lr, warmup_epochs=o.warmup_epochs, warmup_lr=o.warmup_lr, kind=o.schedule,
                          milestones=list(o.milestones), decay=o.decay, every=o.decay_every,
                          total_epochs=float(cfg.epochs))
    sampler = NodeSampler(parts, comm.local_nodes, cfg.data.batch_size, cfg.seed, device)
    timer = make_timer(cfg, topology, comm, compressor, model.dim, faults)
    components = Components(cfg, device, dataset, parts, topology, push_sum, gamma, defaults, comm, model, x0,
                            compressor, algorithm, optimizer, schedule, sampler, timer, byzantine)
    if algorithm_type.runner == "event_driven":   # the event runner's refusals, before any run folder
        check_runnable(components)
    if comm.is_main:
        say(push_sum_notice(cfg, info, topology, push_sum))
    return components
