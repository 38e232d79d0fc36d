"""Range checks of a config's plain options, without torch (SPEC §10: one line per mistake).

:func:`check_plain` needs only the config: the CLI runs it before importing the
training code, so ``decent8 train nodes=0`` answers in well under a second.
:func:`decent8.train.build.check_scalars` runs it and then the checks that need the
component registries (algorithm names, the node limit, the run name).
"""
from __future__ import annotations

import math

from ..config import TASKS, WIRES, TrainConfig, check_task  # noqa: F401  (TASKS re-exported)
from ..errors import ConfigError, choice_error
from .eval_nodes import check_node_chunk, parse_eval_nodes
from .tb_log import check_mode
from .tracking import parse_tracking

BACKENDS = ("simulator", "distributed")
SCHEDULES = ("step", "cosine", "constant", "onecycle")
#: seeds go to numpy / scikit-learn, which take 32-bit unsigned integers
MAX_SEED = 2**32 - 1
#: larger step sizes overflow float32 at once (and are never meant)
MAX_STEP = 1e4
MAX_EPOCHS = 10**6
MAX_TIMEOUT_S = 7 * 86400.0
#: optimizer.decay_every below this many epochs would decay the lr by 0.1 a million times an epoch
MIN_DECAY_EVERY = 1e-3
#: model.norm_stats (train/norm_stats.py) and task (task.py)
NORM_STATS = ("local", "gossip", "average")
#: algorithm.consensus: the final rounds' kind (train/engine.py Engine.consensus_round)
CONSENSUS = ("compressed", "exact")


def check_norm_stats(value: object) -> str:
    if value not in NORM_STATS:
        raise choice_error("model.norm_stats", value, NORM_STATS)
    return str(value)


def _number(option: str, value: object, *, lo: float | None = None, lo_open: bool = False,
            hi: float | None = None, hi_open: bool = False, integer: bool = False, allowed: str = "") -> None:
    """One range check: a finite number (an integer if asked) in the given interval."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and integer and value != int(value):
        ok = False
    if ok and lo is not None:
        ok = value > lo if lo_open else value >= lo
    if ok and hi is not None:
        ok = value < hi if hi_open else value <= hi
    if not ok:
        kind = "an integer" if integer else "a finite number"
        raise ConfigError(option, f"must be {allowed or kind + ' ' + _interval(lo, lo_open, hi, hi_open)}, got {value!r}")


def _interval(lo: float | None, lo_open: bool, hi: float | None, hi_open: bool) -> str:
    if lo is not None and hi is not None:
        return f"in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{'>' if lo_open else '>='} {lo:g}"
    if hi is not None:
        return f"{'<' if hi_open else '<='} {hi:g}"
    return ""


def check_plain(cfg: TrainConfig) -> None:
    """The checks of :func:`~decent8.train.build.check_scalars` that need no registry."""
    _number("seed", cfg.seed, lo=0, hi=MAX_SEED, integer=True)
    if not isinstance(cfg.out_dir, str) or not cfg.out_dir.strip() or "\0" in cfg.out_dir:
        raise ConfigError("out_dir", f"must be a folder path, got {cfg.out_dir!r}")
    if cfg.nodes < 2:
        raise ConfigError("nodes", f"need at least 2 nodes, got {cfg.nodes}")
    if not 0.0 <= cfg.skew <= 1.0:
        raise ConfigError("skew", f"must be in [0, 1], got {cfg.skew}")
    _number("epochs", cfg.epochs, lo=1, hi=MAX_EPOCHS, integer=True)
    if cfg.eval_every < 1:
        raise ConfigError("eval_every", f"must be >= 1, got {cfg.eval_every}")
    parse_eval_nodes(cfg.eval.nodes, cfg.nodes)
    check_node_chunk(cfg.eval.node_chunk)
    d = cfg.data
    if d.batch_size < 1:
        raise ConfigError("data.batch_size", f"must be >= 1, got {d.batch_size}")
    _number("data.eval_batch_size", d.eval_batch_size, lo=1, integer=True)
    _number("data.test_fraction", d.test_fraction, lo=0, lo_open=True, hi=1, hi_open=True)
    _number("data.seq_len", d.seq_len, lo=1, integer=True)
    _number("data.vocab_size", d.vocab_size, lo=1, integer=True)
    if cfg.model.width is not None:
        _number("model.width", cfg.model.width, lo=1, integer=True)
    _number("partition.alpha", cfg.partition.alpha, lo=0, lo_open=True)
    _number("partition.shards_per_node", cfg.partition.shards_per_node, lo=1, integer=True)
    check_norm_stats(cfg.model.norm_stats)
    check_task(cfg.task)
    _number("label_smoothing", cfg.label_smoothing, lo=0, hi=1, hi_open=True)
    if cfg.label_smoothing and cfg.loss != "cross_entropy":
        raise ConfigError("label_smoothing", f"applies to loss=cross_entropy only, not loss={cfg.loss}; "
                                             "use label_smoothing=0 or loss=cross_entropy")
    if cfg.compression.wire not in WIRES:
        raise choice_error("compression.wire", cfg.compression.wire, WIRES)
    if cfg.backend not in BACKENDS:
        raise choice_error("backend", cfg.backend, BACKENDS)
    _number("algorithm.consensus_rounds", cfg.algorithm.consensus_rounds, lo=0, hi=MAX_EPOCHS, integer=True)
    if cfg.algorithm.consensus not in CONSENSUS:
        raise choice_error("algorithm.consensus", cfg.algorithm.consensus, CONSENSUS)
    if cfg.algorithm.gamma is not None:
        _number("algorithm.gamma", cfg.algorithm.gamma, lo=0, lo_open=True, hi=MAX_STEP)
    o = cfg.optimizer
    if o.lr is not None:  # null: default_lr once the topology is known
        _number("optimizer.lr", o.lr, lo=0, lo_open=True, hi=MAX_STEP)
    if o.momentum is not None:  # null: the algorithm's default (resolve_algorithm_defaults)
        _number("optimizer.momentum", o.momentum, lo=0, hi=1, hi_open=True)
    _number("optimizer.weight_decay", o.weight_decay, lo=0, hi=MAX_STEP)
    if o.schedule not in SCHEDULES:
        raise choice_error("optimizer.schedule", o.schedule, SCHEDULES)
    _number("optimizer.warmup_epochs", o.warmup_epochs, lo=0)
    if o.schedule == "onecycle" and not 0 < o.warmup_epochs < cfg.epochs:
        raise ConfigError("optimizer.warmup_epochs", f"optimizer.schedule=onecycle rises to optimizer.lr over the "
                                                     f"warm-up: must be in (0, epochs={cfg.epochs}), got {o.warmup_epochs}")
    if o.warmup_epochs > 0:
        _number("optimizer.warmup_lr", o.warmup_lr, lo=0, lo_open=True, hi=MAX_STEP,
                allowed="a finite number in (0, 10000] when optimizer.warmup_epochs > 0")
    if not 0 < o.decay <= 1:
        raise ConfigError("optimizer.decay", f"must be in (0, 1], got {o.decay}")
    check_mode(cfg.tensorboard)
    parse_tracking(getattr(cfg, "tracking", None))
    for m in o.milestones:
        _number("optimizer.milestones", m, lo=0, allowed="a list of finite epochs >= 0")
    if o.decay_every != 0:
        _number("optimizer.decay_every", o.decay_every, lo=MIN_DECAY_EVERY,
                allowed=f"0 (off) or a finite number of epochs >= {MIN_DECAY_EVERY:g}")
    _number("dist_timeout_s", cfg.dist_timeout_s, lo=0, lo_open=True, hi=MAX_TIMEOUT_S)
