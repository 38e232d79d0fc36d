"""``decent8 report``: a sweep folder as the paper's tables and figures (see :mod:`decent8.experiments.report`)."""
from __future__ import annotations

import argparse

from ..experiments.report import METRICS, build_report


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write the paper-style table and figures of a sweep folder",
                       description="e.g. `decent8 report runs/paper-table3_resnet20_ring8-scale0p05`: writes report.md "
                                   "(our accuracy beside the paper's) and figures/*.png into the folder and prints the table")
    p.add_argument("folders", nargs="+", metavar="SWEEP_FOLDER", help="folder(s) written by `decent8 sweep`")
    p.add_argument("--metric", choices=sorted(METRICS), default="mean_node",
                   help="mean_node: mean over nodes of each node's model (SPEC §8, default); averaged: the averaged model")
    p.add_argument("--no-figures", action="store_true", help="the table only")
    p.set_defaults(func=run)


def run(ns: argparse.Namespace) -> int:
    for i, folder in enumerate(ns.folders):
        text, path = build_report(folder, METRICS[ns.metric], figures=not ns.no_figures)
        try:
            if i:
                print()
            print(text)
            print(f"(written to {path})", flush=True)
        except BrokenPipeError:      # `decent8 report … | head`
            return 0
    return 0
