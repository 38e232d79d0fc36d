"""Resolve a config: every value a run uses, decided once and frozen (SPEC §8).

The stages of a run are ``resolve(config) → resolved config`` (this module: every
default, the algorithm's options, γ, the learning rate, the model's name — what
config.yaml records), ``build(resolved) → components`` (:mod:`.build`, construction
only) and the run (:mod:`.loop`). The resolved config is frozen
(:func:`decent8.config.freeze`); the one thing measured after building — how the
simulator executes the nodes (``sim.chunk``, ``sim.compile``), timed on the built model —
and the run folder's name enter through :func:`decent8.config.evolve`, which returns a
new frozen config. ``resolve`` is idempotent: a resolved config (or its config.yaml)
resolves to itself.
"""
from __future__ import annotations

from ..algorithms import algorithm_class, algorithm_info
from ..algorithms.allreduce import RESETS
from ..compression import OPTIONS, compressor_class, compressor_options
from ..compression.wire import resolve_wire, value_bits_of, wire_compression
from ..plugins import is_import_path
from ..registry import keyword_options
from ..config import TrainConfig, freeze, is_frozen, thaw
from ..data.dataset import ArrayDataset
from ..errors import ConfigError, choice_error
from ..topology import Topology, topology_from_config, topology_options
from .run_data import load_dataset
from .validate import MAX_STEP, _number, check_plain
from ..algorithms.d2 import topology_gamma as d2_topology_gamma
from .run_dir import check_run_name
from ..topology.graphs import MAX_NODES


def resolve_algorithm_defaults(cfg: TrainConfig) -> dict[str, object]:
    """Fill the options ``cfg`` leaves null from the algorithm's
    :attr:`~decent8.algorithms.AlgorithmInfo.defaults` (an algorithm's documented good
    settings are what a plain ``decent8 train algorithm=NAME`` uses; a value the user sets
    always wins), in ``cfg`` — an editable copy under resolution; returns
    ``{option: value}`` of those filled."""
    table = dict(algorithm_info(cfg.algorithm.name).defaults)
    filled: dict[str, object] = {}
    for option, value in table.items():
        group, name = option.split(".")
        section = getattr(cfg, group)
        if getattr(section, name) is None:
            setattr(section, name, value)
            filled[option] = value
    return filled


def default_gamma(algorithm: str, compression: str, ratio: float, optimizer: str = "local",
                  momentum: float = 0.0, push_sum: bool = False) -> float:
    """Consensus step γ when the config leaves it null.

    1 without compression (and for 8-bit quantization, which loses little). For top-k,
    Choco-SGD takes 5·(1 − ratio) (0.05 at 99 %, tuned on the short digits runs), while
    Deep-Squeeze / Sparse-Push, which gossip compressed *weights*, take 1 − ratio (0.01,
    the reference code's value; 0.05 diverges on digits). Random-k keeps far less of the
    signal: 1 − ratio. The paper's long CIFAR-10 runs used 0.01 at 99 % top-k for both;
    its presets set γ explicitly.

    With quasi-global momentum (``optimizer=qgm``, momentum β) a compressed γ (< 1) is
    multiplied by 1 − β: QGM's buffer m̂ ← β·m̂ + (1 − β)·(x_before − x_after)/lr takes
    in every gossip displacement Δ and its Nesterov step lr·β²·m̂ re-applies it, so a
    steady displacement Δ per step moves x by D = Δ + β²·D = Δ/(1 − β²) (5.3·Δ at
    β = 0.9). Without a factor Choco + QGM with 99 % top-k (γ 0.05) diverged in epoch
    19 on digits (seed 3); of the two factors tried on seeds 0–4, 1 − β²
    (γ 0.0095: 57–87 %) and 1 − β (γ 0.005: 86–94 %), the second is the default;
    docs/results/defaults.md has the runs.

    Under push-sum (a W that is not doubly stochastic: directed, irregular graphs) a
    compressed Choco step takes 2·(1 − ratio) (0.02 at 99 %), together with the smaller
    learning rate of :func:`default_lr`: the weights ω are mixed exactly with the same γ
    while the numerators z are mixed through the lagging compressed copies, and a 5-node
    ring with one chord diverged at γ 0.05 (lr 0.1). At lr 0.1, γ 0.01 reached 94.4–95.8 %
    and γ 0.02 fell to 56 % at one chunk size; at lr 0.05, γ 0.02 trains to ≥ 95 % on two
    irregular digraphs for every seed and chunk size tried (docs/results/defaults.md).
    """
    gamma = algorithm_info(algorithm).default_gamma(compressor_class(compression), ratio, push_sum)
    if optimizer == "qgm" and gamma < 1.0:
        gamma *= 1.0 - float(momentum)
    return round(gamma, 10)


def d2_default_gamma(topology: Topology) -> float:
    """D²'s γ when ``algorithm.gamma`` is null (:func:`decent8.algorithms.d2.topology_gamma`)."""
    return d2_topology_gamma(topology)


def default_lr(push_sum: bool, gamma: float) -> float:
    """Learning rate when ``optimizer.lr`` is null (and the data set sets none): 0.1, the
    digits main job's; 0.05 under push-sum with compressed gossip (γ < 1), where lr 0.1
    with γ 0.02 fell to 56 % on a 5-node digraph at one chunk size (likely cause: the
    compressed numerators and the exactly mixed weights ω drift apart; see
    :func:`default_gamma` and docs/results/defaults.md)."""
    return 0.05 if push_sum and gamma < 1.0 else 0.1


def check_scalars(cfg: TrainConfig) -> None:
    """Range checks of plain options (the component factories check their own):
    :func:`~.validate.check_plain` (no torch needed; the CLI runs it first), then the
    run name, the node limit and the algorithm's own options."""

    check_plain(cfg)
    if cfg.name is not None:
        check_run_name(cfg.name)
    if cfg.nodes > MAX_NODES:
        raise ConfigError("nodes", f"at most {MAX_NODES:,} nodes, got {cfg.nodes}")
    algorithm_type = algorithm_class(cfg.algorithm.name)  # a registered name or an importable Algorithm subclass
    if algorithm_type.runner == "event_driven" and cfg.backend != "simulator":  # before any rendezvous
        raise ConfigError("backend", f"{cfg.algorithm.name} runs in the simulator only (backend=simulator): its "
                                     f"atomic pairwise averages need one-sided communication (docs/algorithms.md §13)")
    algorithm_type.resolve_params(algorithm_type.split_params(cfg.algorithm.params)[1])
    _number("allreduce.eta_s", cfg.allreduce.eta_s, lo=0, lo_open=True, hi=MAX_STEP)
    _number("allreduce.K", cfg.allreduce.K, lo=0, integer=True)
    if cfg.allreduce.reset not in RESETS:
        raise choice_error("allreduce.reset", cfg.allreduce.reset, RESETS)


def option_value(cfg: TrainConfig, option: str) -> object:
    """The value of a dotted option (``allreduce.eta_s``) in ``cfg``."""
    value: object = cfg
    for part in option.split("."):
        if not hasattr(value, part):
            raise ConfigError("algorithm", f"{cfg.algorithm.name} declares option {option!r}, which the config "
                                           f"does not have")
        value = getattr(value, part)
    return value


def text_model_name(cfg: TrainConfig, dataset: ArrayDataset) -> str:
    """The model a config's name selects for this data set: the default ``cnn`` becomes
    the bag-of-embeddings classifier ``text`` on token ids."""
    if cfg.model.name == "cnn" and dataset.vocab_size is not None and not isinstance(dataset.x_train, dict):
        return "text"
    return cfg.model.name


def resolved_compression(c, precision: str) -> tuple[str, dict]:
    """The concrete ``compression.wire`` and the keyword arguments of the named compressor
    (:func:`~decent8.compression.compressor_options`: ``compression.<kwarg>=value`` with every
    other one at its default, as config.yaml records them), plus the group's shared options
    given for its 8-bit counterpart on an int8 wire (``compression=identity
    compression.stochastic=true`` at ``precision=int8``: quantize's). A user's compressor
    (``pkg.module:Class``) keeps the options as given: its module is imported when the run
    builds it."""
    wire = resolve_wire(c.name, precision, c.wire, value_bits_of(c.params))
    if is_import_path(c.name):
        return wire, dict(c.params)
    options = compressor_options(c.name, c.params)
    on_wire = wire_compression(c.name, precision, wire, value_bits_of(c.params))
    takes = keyword_options(compressor_class(on_wire), skip=1)
    options.update({k: v for k, v in c.params.items() if k in OPTIONS and k not in options and k in takes})
    return wire, options


def resolved_topology(t) -> dict:
    """The keyword arguments of the named topology function as config.yaml records them
    (:func:`~decent8.topology.topology_options`: ``topology.<kwarg>=value`` with every other one
    at its default). A user's topology (``pkg.module:function``) keeps the options as given."""
    return dict(t.params) if is_import_path(t.name) else topology_options(t.name, t.params)


def resolved_algorithm_params(a) -> dict:
    """``algorithm.params`` as config.yaml records it: every constructor keyword argument of the
    algorithm (``mu`` of gut), the ones not given at their defaults, and the declared ``params``
    given (:meth:`~decent8.algorithms.Algorithm.split_params`)."""
    keywords, declared = algorithm_class(a.name).split_params(a.params)
    return {**keywords, **declared}


def is_resolved(cfg: TrainConfig) -> bool:
    """True when nothing in ``cfg`` is left to the defaults (γ, lr, the compressor's, the
    topology's and the algorithm's options set)."""
    table = algorithm_info(cfg.algorithm.name).defaults
    c = cfg.compression
    return (cfg.algorithm.gamma is not None and cfg.optimizer.lr is not None
            and resolved_compression(c, cfg.precision) == (c.wire, dict(c.params))
            and resolved_topology(cfg.topology) == dict(cfg.topology.params)
            and resolved_algorithm_params(cfg.algorithm) == dict(cfg.algorithm.params)
            and all(getattr(getattr(cfg, o.split(".")[0]), o.split(".")[1]) is not None for o in table))


def resolve_with_defaults(cfg: TrainConfig, dataset: ArrayDataset | None = None, *, module_given: bool = False,
                          topology: Topology | None = None) -> tuple[TrainConfig, dict[str, object]]:
    """:func:`resolve`, and ``{option: value}`` of the options it filled from the
    algorithm's defaults and the learning rate's (summary.json's ``algorithm_defaults``)."""
    check_scalars(cfg)
    if is_frozen(cfg) and is_resolved(cfg):
        return cfg, {}
    cfg = thaw(cfg)
    defaults = resolve_algorithm_defaults(cfg)
    if not module_given and cfg.model.name == "cnn":
        if dataset is None:
            dataset = load_dataset(cfg)
        cfg.model.name = text_model_name(cfg, dataset)
    cfg.topology.params = resolved_topology(cfg.topology)        # config.yaml: every option of the graph
    cfg.algorithm.params = resolved_algorithm_params(cfg.algorithm)  # ... and of the algorithm
    if topology is None:
        topology = topology_from_config(cfg.topology, cfg.nodes, cfg.seed)
    info = algorithm_info(cfg.algorithm.name)
    push_sum = info.resolve_push_sum(cfg.algorithm.name, cfg.algorithm.push_sum, topology.is_doubly_stochastic)
    c = cfg.compression
    c.wire, c.params = resolved_compression(c, cfg.precision)   # config.yaml: the concrete wire and options
    if cfg.algorithm.gamma is None:
        by_topology = info.topology_gamma(topology)
        if by_topology is not None:   # D²: γ from the graph (recorded like an algorithm default)
            cfg.algorithm.gamma = defaults["algorithm.gamma"] = by_topology
        else:
            wire = wire_compression(c.name, cfg.precision, c.wire, value_bits_of(c.params))
            cfg.algorithm.gamma = default_gamma(cfg.algorithm.name, wire, c.params.get("ratio", OPTIONS["ratio"]),
                                                cfg.optimizer.kind, cfg.optimizer.momentum, push_sum)
    if cfg.optimizer.lr is None:
        cfg.optimizer.lr = defaults["optimizer.lr"] = default_lr(push_sum, cfg.algorithm.gamma)
    return freeze(cfg), defaults


def resolve(cfg: TrainConfig, dataset: ArrayDataset | None = None, *, module_given: bool = False) -> TrainConfig:
    """The frozen resolved copy of ``cfg`` (module docstring); ``cfg`` is not changed.
    ``dataset``: the run's data, when already loaded (the model's name depends on it);
    ``module_given``: the Python API hands over the model, so its name stays."""
    return resolve_with_defaults(cfg, dataset, module_given=module_given)[0]
