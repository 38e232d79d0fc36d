"""``decent8 report``: a sweep folder as the paper's tables and figures, or run folders side by side
(see :mod:`decent8.experiments.report`). Run folders are read as data: nothing they name is
imported; a comparison never overwrites a file in ``--out`` that decent8 did not write.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import secrets
from pathlib import Path

from ..errors import ConfigError
from ..experiments.report import METRICS, build_report, compare_runs, is_run_folder
from ..plugins import read_as_data


def add_parser(sub: argparse._SubParsersAction) -> None:
    for name in ("report", "compare"):
        p = sub.add_parser(name, help="write the table and figures of a sweep folder, or compare run folders"
                           if name == "report" else "compare run folders: one table, curves on shared axes",
                           description="`decent8 report SWEEP_FOLDER` writes report.md (our accuracy beside the "
                                       "paper's, seeds as mean ± std) and figures/*.png into the folder; "
                                       "`decent8 report RUN_A RUN_B ...` (or `decent8 compare ...`) compares run "
                                       "folders: one table, curves and accuracy vs bytes on shared axes, written to "
                                       "--out")
        p.add_argument("folders", nargs="+", metavar="FOLDER", help="sweep folder(s), or run folders to compare")
        p.add_argument("--metric", choices=sorted(METRICS), default="mean_node",
                       help="mean_node: mean over nodes of each node's model (docs/algorithms.md §8, default); "
                            "averaged: the averaged model")
        p.add_argument("--no-figures", action="store_true", help="the table only")
        p.add_argument("--title", help="the report's heading and the figures' titles (default: the sweep's title, "
                                       "or what its runs share and vary, e.g. 'digits, 8 nodes, 2 epochs — by skew')")
        p.add_argument("--out", metavar="DIR", help="where a comparison of run folders goes (default: "
                                                    "compare-<time stamp> beside the first run folder)")
        p.set_defaults(func=run, compare=name == "compare")


def run(ns: argparse.Namespace) -> int:
    import warnings

    with warnings.catch_warnings():  # a regression run has no accuracy curve: an empty legend is no news
        warnings.filterwarnings("ignore", message="No artists with labels")
        return _run(ns)


def _run(ns: argparse.Namespace) -> int:

    runs = [f for f in ns.folders if is_run_folder(f)]
    for f in runs:   # data: nothing a run folder names, or holds, is imported
        read_as_data(f)
    if ns.compare or runs:
        if len(runs) != len(ns.folders):
            other = next(f for f in ns.folders if f not in runs)
            raise ConfigError("report", f"{other!r} is not a run folder; compare run folders only, or report "
                                        f"sweep folders one by one")
        out = ns.out or str(Path(runs[0]).resolve().parent /
                            f"compare-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}")
        reports = [compare_runs(runs, out, METRICS[ns.metric], figures=not ns.no_figures, title=ns.title)]
    else:
        reports = (build_report(folder, METRICS[ns.metric], figures=not ns.no_figures, title=ns.title)
                   for folder in ns.folders)
    for i, (text, path) in enumerate(reports):
        try:
            if i:
                print()
            print(text)
            print(f"(written to {path})", flush=True)
        except BrokenPipeError:      # `decent8 report … | head`
            return 0
    return 0
