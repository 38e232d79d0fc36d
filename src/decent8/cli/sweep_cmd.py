"""``decent8 sweep``: the command line of the sweep engine (:mod:`decent8.experiments.sweep`):
a preset or config file, grid overrides, ``--cell`` alternatives, ``--jobs``, ``--list``."""
from __future__ import annotations

import argparse

from ..experiments.presets import list_presets
from ..experiments.sweep import run_sweep


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run a grid of configs (or a paper preset) and print a results table",
                       description="e.g. `decent8 sweep paper/table3_resnet20_ring8 scale=0.05 data.root=cifar10.tar.gz "
                                   "--jobs 2` or `decent8 sweep --cell \"algorithm=dpsgd compression=identity\" "
                                   "--cell \"algorithm=choco compression=topk\" skew=0,0.9`")
    p.add_argument("args", nargs="*", help="an optional preset name (paper/…) or config.yaml, then key=value or "
                                           "key=v1,v2,... overrides; scale=S (0 < S <= 1) shrinks every run")
    p.add_argument("--cell", action="append", default=[], metavar="\"k=v k=v\"",
                   help="one alternative that sets several options together (repeatable)")
    p.add_argument("--name", help="sweep folder name under out_dir (default: the preset name and scale, "
                                  "or sweep-<time stamp>)")
    p.add_argument("--title", help="the title of report.md and of the figures (default: a preset's title, or what "
                                   "the runs share, e.g. 'digits, 8 nodes, 2 epochs')")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="run N cells at once, each in its own process with cores/N threads (default 1: in this process)")
    p.add_argument("--dry-run", action="store_true", help="validate every cell and print the plan; run nothing")
    p.add_argument("--plan-only", action="store_true",
                   help="validate every cell and add them to the folder's sweep.json; run nothing (a grid run over "
                        "several sessions: `decent8 report` then counts every planned cell)")
    p.add_argument("--list", action="store_true", help="list the presets and exit")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def run(ns: argparse.Namespace) -> int:
    if ns.list:
        for name in list_presets():
            print(name)
        return 0
    return run_sweep(list(ns.args), ns.cell, name=ns.name, title=getattr(ns, "title", None), jobs=ns.jobs,
                     dry_run=ns.dry_run, plan_only=ns.plan_only, quiet=ns.quiet)
