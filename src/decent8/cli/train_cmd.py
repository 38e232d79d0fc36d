"""``decent8 train``: one run from a YAML config and key=value overrides."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ..config import load_config, to_yaml
from ..errors import ConfigError, Interrupted, Terminated
from .common import format_table, human_bytes
from ..train.user_metrics import user_keys
from ..train.resume_trust import restated_code
from ..train.resume_trust import check_resume_code
from ..train.validate import check_plain
from ..algorithms import algorithm_info

# the training code (torch, matplotlib) is imported in run(), after the plain options are
# checked: `decent8 train --help` and `decent8 train nodes=0` answer without it


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train n nodes (the default: digits, 8 nodes, directed ring, skew 0.8, Choco-SGD, 99%% top-k)",
                       description="Train with a YAML config and key=value overrides, e.g. "
                                   "`decent8 train algorithm=choco compression=topk compression.ratio=0.99 "
                                   "topology=directed_ring nodes=8 skew=0.8`.")
    p.add_argument("args", nargs="*", help="an optional config.yaml, then key=value overrides")
    p.add_argument("--resume", metavar="RUN_DIR",
                   help="continue a run from its last checkpoint (code its config names, model=pkg.module:factory "
                        "or loss=…, is imported only if named again: --resume RUN_DIR model=pkg.module:factory)")
    p.add_argument("--trust-config", action="store_true",
                   help="with --resume: import the code the run folder's config.yaml names without naming it again "
                        "(never code inside the run folder)")
    p.add_argument("--quiet", action="store_true", help="no progress bar, no table; only the run folder's path is printed")
    p.add_argument("--print-config", action="store_true",
                   help="print the resolved config (defaults, the data set's defaults, YAML, overrides) as YAML and exit; "
                        "nothing runs")
    p.add_argument("--check", action="store_true",
                   help="validate only: build everything (data, partition, topology, model, compressor; with "
                        "--resume also the checkpoint), train nothing, write nothing")
    p.set_defaults(func=run)


def split_args(args: list[str]) -> tuple[str | None, list[str]]:
    path = None
    if args and "=" not in args[0]:
        path, args = args[0], args[1:]
    return path, list(args)


def _pct(v: float) -> str:
    return f"{100 * v:.2f} %"


def _value(summary: dict[str, Any], key: str) -> Any:
    """A number of the summary, or None when it is missing or not a number (a regression
    run has no accuracy; an old or edited summary.json may lack anything)."""
    v = summary.get(key)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _row(summary: dict[str, Any], label: str, keys: tuple[str, ...], fmt: Any) -> tuple[str, str]:
    values = [_value(summary, k) for k in keys]
    return label, ("n/a" if any(v is None for v in values) else fmt(*values))


#: (label, summary keys, formatter) of a classification run's quality rows
_ACCURACY_ROWS = (
    ("mean node accuracy", ("mean_node_accuracy",), _pct),
    ("averaged-model accuracy", ("averaged_model_accuracy",), _pct),
    ("node accuracy min / max", ("min_node_accuracy", "max_node_accuracy"),
     lambda lo, hi: f"{100 * lo:.2f} / {100 * hi:.2f} %"),
)
#: a regression run (a float-target loss such as loss=mse) has no accuracy: its test losses
_LOSS_ROWS = (
    ("mean node test loss", ("mean_node_loss",), lambda v: f"{v:.4g}"),
    ("averaged-model test loss", ("averaged_model_loss",), lambda v: f"{v:.4g}"),
    ("final train loss", ("final_train_loss",), lambda v: f"{v:.4g}"),
)
#: a regression run's error metrics: the mean over the node models / the averaged model
_REGRESSION_ROWS = tuple(
    (f"test {label} (node mean / averaged)", (f"mean_node_{key}", f"averaged_model_{key}"),
     lambda a, b: f"{a:.4g} / {b:.4g}")
    for label, key in (("RMSE", "rmse"), ("MAE", "mae"), ("R²", "r2")))
_COMMON_ROWS = (
    ("consensus distance", ("consensus_distance",), lambda v: f"{v:.3e}"),
    ("bytes sent per node", ("bytes_sent_per_node",), lambda v: f"{human_bytes(v)} ({v:.0f} B)"),
    ("message size", ("message_bytes", "parameters"), lambda b, p: f"{b} B ({p} parameters)"),
    ("spectral gap", ("spectral_gap",), lambda v: f"{v:.6f}"),
    ("wall time", ("wall_time_s",), lambda v: f"{v:.1f} s"),
)


def _user_rows(summary: dict[str, Any]) -> list[tuple[str, tuple[str, ...], Any]]:
    """The user's metrics (``metrics=``, train/user_metrics.py): node mean / averaged model."""
    names = [k[len("averaged_model_"):] for k in user_keys(summary) if k.startswith("averaged_model_")]
    return [(f"{name} (node mean / averaged)", (f"mean_node_{name}", f"averaged_model_{name}"),
             lambda a, b: f"{a:.4g} / {b:.4g}") for name in names]


def rounds_line(summary: dict[str, Any]) -> str | None:
    """The final consensus rounds: how many, which kind (``algorithm.consensus``), and the mean
    node / averaged-model accuracy (test loss without accuracy) before → after them; None
    for a run without final rounds."""
    rounds = _value(summary, "consensus_rounds")
    if not rounds:
        return None
    before = summary.get("before_consensus_rounds")
    before = before if isinstance(before, dict) else {}
    acc = _value(summary, "mean_node_accuracy") is not None
    keys = (("mean node", "mean_node_accuracy"), ("averaged", "averaged_model_accuracy")) if acc else \
        (("mean node loss", "mean_node_loss"), ("averaged loss", "averaged_model_loss"))
    fmt = (lambda v: f"{100 * v:.2f}") if acc else (lambda v: f"{v:.4g}")
    parts = [f"{label} {fmt(_value(before, k))} → {fmt(_value(summary, k))}{' %' if acc else ''}"
             for label, k in keys if _value(before, k) is not None and _value(summary, k) is not None]
    head = f"{int(rounds)} {summary.get('consensus') or 'compressed'}"
    return head + (f": {', '.join(parts)}" if parts else "")


def summary_table(summary: dict[str, Any]) -> str:
    """The end-of-run table: accuracies for a classifier, test losses for a regression run
    (no accuracy in its summary); a missing metric shows as n/a, never an error."""
    quality = _ACCURACY_ROWS if _value(summary, "mean_node_accuracy") is not None else _LOSS_ROWS
    if _value(summary, "mean_node_rmse") is not None:
        quality = (*quality, *_REGRESSION_ROWS)
    rows = [_row(summary, *spec) for spec in (*quality, *_user_rows(summary), *_COMMON_ROWS)]
    line = rounds_line(summary)
    if line is not None:
        rows.insert(len(quality), ("final consensus rounds", line))
    return format_table(("metric", "value"), rows)


def _interrupted(e: KeyboardInterrupt, run_dir: Path | None, resumable: bool) -> KeyboardInterrupt:
    """Ctrl-C / SIGTERM: an :class:`Interrupted` naming the run folder when one was written."""
    from ..train.run_dir import CONFIG
    if run_dir is None or not (run_dir / CONFIG).is_file():
        return e
    return Interrupted(run_dir, resumable, sigterm=isinstance(e, Terminated))


def resume_arguments(ns: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of a resume: the code named again, ``--trust-config``."""
    if ns.trust_config and not ns.resume:
        raise ConfigError("--trust-config", "only applies with --resume RUN_DIR")
    if not ns.resume:
        return {}
    if ns.print_config:
        raise ConfigError("resume", "takes no --print-config: the run folder's config.yaml is the config")
    path_arg, overrides = split_args(ns.args)
    if path_arg is not None:
        raise ConfigError("resume", f"takes no config file ({path_arg!r}): the run folder's config.yaml is used as saved")
    return {"named_code": restated_code(overrides, ns.resume), "trust_config": ns.trust_config}


def _refuse_code_early(run_dir: str, trust: dict[str, Any]) -> None:
    """The resume's code check (:mod:`decent8.train.resume_trust`) before torch is imported:
    a refused resume answers at once. A config that does not load here is left to the full
    resume, which names what is wrong with it."""

    try:
        cfg = load_config(str(Path(run_dir) / "config.yaml"))
    except (ConfigError, OSError, ValueError):
        return
    check_resume_code(cfg, run_dir, trust.get("named_code"), bool(trust.get("trust_config")))


def run(ns: argparse.Namespace) -> int:
    if ns.args and not ns.resume and not ns.print_config:  # the plain options first, before torch is imported
        check_plain(load_config(*split_args(ns.args)))
    trust = resume_arguments(ns)
    if ns.resume:
        _refuse_code_early(ns.resume, trust)
    from ..train.loop import check, train
    if getattr(ns, "check", False):
        if ns.resume:
            c, path = check(None, resume=ns.resume, **trust)
        else:
            path_arg, overrides = split_args(ns.args)
            c, path = check(load_config(path_arg, overrides))
        if not ns.quiet:
            cfg = c.cfg
            print(f"config OK: {cfg.algorithm.name} · {c.compressor.name} · {cfg.topology.name} · {cfg.nodes} nodes · "
                  f"{cfg.model.name} ({c.model.dim} parameters) on {cfg.data.name} "
                  f"({len(c.dataset.y_train)} samples, {c.sampler.steps_per_epoch} steps/epoch) · "
                  f"{'resume ' if ns.resume else 'run folder '}{path}")
        return 0
    if ns.resume:
        try:
            summary, path = train(None, resume=ns.resume, quiet=ns.quiet, **trust)  # type: ignore[arg-type]
        except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM
            raise _interrupted(e, Path(ns.resume), True) from None
    else:
        path_arg, overrides = split_args(ns.args)
        cfg = load_config(path_arg, overrides)
        if ns.print_config:
            print(to_yaml(cfg), end="")
            return 0
        started: dict = {}
        try:
            summary, path = train(cfg, quiet=ns.quiet, started=started)
        except KeyboardInterrupt as e:   # train() fills in the run folder once it exists
            raise _interrupted(e, started.get("run_dir"), cfg.checkpoint) from None
    one_of_many = summary.get("backend") == "distributed" and os.environ.get("RANK", "0") != "0"
    if ns.quiet and not one_of_many:      # scripts still need the path
        print(path, flush=True)
    if not ns.quiet and not one_of_many:  # with one process per node, rank 0 reports
        head = algorithm_info(summary["algorithm"]).headline(summary)   # ring all-reduce: no γ, its own wire format
        print(f"{head} · {summary['topology']} · {summary['nodes']} nodes · {summary.get('partition') or 'skew %g' % summary['skew']} · "
              f"{summary['model']} ({summary.get('precision', 'fp32')}) on {summary['dataset']} · {summary['epochs']} epochs")
        print(summary_table(summary))
        print(f"run folder: {path}")
    return 0
