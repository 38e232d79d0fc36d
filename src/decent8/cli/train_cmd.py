"""``decent8 train``: one run from a YAML config and key=value overrides."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ..config import load_config, to_yaml
from ..errors import ConfigError, Interrupted, Terminated
from .common import format_table, human_bytes

# the training code (torch, matplotlib) is imported in run(), after the plain options are
# checked: `decent8 train --help` and `decent8 train nodes=0` answer without it


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train n nodes (the default: digits, 8 nodes, directed ring, skew 0.8, Choco-SGD, 99%% top-k)",
                       description="Train with a YAML config and key=value overrides, e.g. "
                                   "`decent8 train algorithm=choco compression=topk compression.ratio=0.99 "
                                   "topology=directed_ring nodes=8 skew=0.8`.")
    p.add_argument("args", nargs="*", help="an optional config.yaml, then key=value overrides")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last checkpoint")
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


def summary_table(summary: dict[str, Any]) -> str:
    rows = [
        ("mean node accuracy", f"{100 * summary['mean_node_accuracy']:.2f} %"),
        ("averaged-model accuracy", f"{100 * summary['averaged_model_accuracy']:.2f} %"),
        ("node accuracy min / max", f"{100 * summary['min_node_accuracy']:.2f} / {100 * summary['max_node_accuracy']:.2f} %"),
        ("consensus distance", f"{summary['consensus_distance']:.3e}"),
        ("bytes sent per node", f"{human_bytes(summary['bytes_sent_per_node'])} ({summary['bytes_sent_per_node']:.0f} B)"),
        ("message size", f"{summary['message_bytes']} B ({summary['parameters']} parameters)"),
        ("spectral gap", f"{summary['spectral_gap']:.6f}"),
        ("wall time", f"{summary['wall_time_s']:.1f} s"),
    ]
    return format_table(("metric", "value"), rows)


def _interrupted(run_dir: Path | None, resumable: bool) -> KeyboardInterrupt:
    """Ctrl-C: an :class:`Interrupted` naming the run folder when one was written."""
    from ..train.run_dir import CONFIG
    if run_dir is None or not (run_dir / CONFIG).is_file():
        return KeyboardInterrupt()
    return Interrupted(run_dir, resumable)


def run(ns: argparse.Namespace) -> int:
    from ..train.validate import check_plain
    if ns.args and not ns.resume and not ns.print_config:  # the plain options first, before torch is imported
        cfg = load_config(*split_args(ns.args))
        check_plain(cfg)
    from ..algorithms import ALLREDUCE_ALGORITHMS
    from ..train.loop import check, train
    if ns.resume and ns.args:
        from ..errors import ConfigError
        raise ConfigError("resume", "takes no config or overrides: the run folder's config.yaml is used as saved")
    if getattr(ns, "check", False):
        if ns.resume:
            c, path = check(None, resume=ns.resume)
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
        if ns.args or ns.print_config:
            raise ConfigError("resume", "takes no config or overrides: the run folder's config.yaml is used as saved")
        try:
            summary, path = train(None, resume=ns.resume, quiet=ns.quiet)  # type: ignore[arg-type]
        except Terminated:
            raise
        except KeyboardInterrupt:
            raise _interrupted(Path(ns.resume), True) from None
    else:
        path_arg, overrides = split_args(ns.args)
        cfg = load_config(path_arg, overrides)
        if ns.print_config:
            print(to_yaml(cfg), end="")
            return 0
        try:
            summary, path = train(cfg, quiet=ns.quiet)
        except Terminated:
            raise
        except KeyboardInterrupt:   # train() fills in cfg.name once the folder exists
            raise _interrupted(Path(cfg.out_dir) / cfg.name if cfg.name else None, cfg.checkpoint) from None
    one_of_many = summary.get("backend") == "distributed" and os.environ.get("RANK", "0") != "0"
    if ns.quiet and not one_of_many:      # scripts still need the path
        print(path, flush=True)
    if not ns.quiet and not one_of_many:  # with one process per node, rank 0 reports
        if summary["algorithm"] in ALLREDUCE_ALGORITHMS:      # ring all-reduce: no γ, its own wire format
            head = f"{summary['algorithm']} (ring all-reduce) · {summary['compression']}"
        else:
            head = (f"{summary['algorithm']} ({'push-sum, ' if summary['push_sum'] else ''}γ={summary['gamma']:g}) · "
                    f"{summary['compression']}")
        print(f"{head} · {summary['topology']} · {summary['nodes']} nodes · {summary.get('partition') or 'skew %g' % summary['skew']} · "
              f"{summary['model']} ({summary.get('precision', 'fp32')}) on {summary['dataset']} · {summary['epochs']} epochs")
        print(summary_table(summary))
        print(f"run folder: {path}")
    return 0
