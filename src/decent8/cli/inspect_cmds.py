"""``decent8 topology`` and ``decent8 partition``: look at W and at the class split."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..config import load_config, partition_label
from ..data.class_table import format_class_table, plot_class_heatmap
from ..data.partition import class_counts, make_partition
from ..data.registry import dataset_from_config
from ..topology import topology_from_config, topology_options
from .train_cmd import split_args
from ..algorithms import algorithm_class, names_of
from ..compression import COMPRESSORS, compressor_options
from ..data.partition import PARTITIONS
from ..data.registry import DATASETS
from ..experiments.presets import list_presets
from ..models import MODELS
from ..topology import TOPOLOGIES
from ..figstyle import vector_path
from ..own_files import refuse_foreign


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topology", help="print the mixing matrix W and its spectral gap",
                       description="e.g. `decent8 topology topology=torus nodes=16` or `decent8 topology ring nodes=8`")
    p.add_argument("args", nargs="*", help="[NAME] then key=value overrides (nodes=, topology.weights=, ...)")
    p.set_defaults(func=run_topology)
    q = sub.add_parser("partition", help="print (and plot) the per-node class counts",
                       description="e.g. `decent8 partition skew=0.8 nodes=8 --plot classes.png`")
    q.add_argument("args", nargs="*", help="an optional config.yaml, then key=value overrides")
    q.add_argument("--plot", metavar="PNG", help="write a heatmap (the paper's Figure 2)")
    q.set_defaults(func=run_partition)
    r = sub.add_parser("list", help="list the algorithms, compressors, topologies, partitions, models, data sets and presets",
                       description="Every name the options accept, grouped by option.")
    r.set_defaults(func=run_list)


def catalogue() -> dict[str, list[str]]:
    """Option -> the names it accepts (what `decent8 list` prints)."""

    return {
        "algorithm (gossip)": list(names_of("gossip")),
        "algorithm (ring all-reduce)": list(names_of("ring all-reduce")),
        "compression": list(COMPRESSORS),
        "topology": list(TOPOLOGIES),
        "partition": list(PARTITIONS),
        "model": list(MODELS),
        "data.name": list(DATASETS),
        "presets (decent8 sweep NAME)": list_presets(),
    }


def compression_options() -> dict[str, str]:
    """Compressor -> its options with their defaults (``ratio=0.99 index_dtype=auto``): the
    keyword arguments of its constructor (``compression.<kwarg>=value``)."""
    return {name: " ".join(f"{k}={v}" for k, v in compressor_options(name).items()) or "(none)"
            for name in COMPRESSORS}


def topology_option_list() -> dict[str, str]:
    """Topology -> its options with their defaults (``rows=None cols=None``): the keyword
    arguments of its function beside ``weights`` and ``seed`` (``topology.<kwarg>=value``)."""
    return {name: " ".join(f"{k}={v}" for k, v in topology_options(name).items()) or "(none)"
            for name in TOPOLOGIES}


def algorithm_option_list() -> dict[str, str]:
    """Algorithm -> its own options with their defaults (``mu=0.1``): its constructor's keyword
    arguments beside those the builder passes (``algorithm.<kwarg>=value``); only those with some."""
    out = {}
    for name in [*names_of("gossip"), *names_of("ring all-reduce")]:
        keywords, _ = algorithm_class(name).split_params({})
        if keywords:
            out[name] = " ".join(f"{k}={v}" for k, v in keywords.items())
    return out


def run_list(ns: argparse.Namespace) -> int:
    for group, names in catalogue().items():
        print(f"{group}:")
        print("  " + ("  ".join(names) if names else "(none)"))
    for group, options in (("algorithm", algorithm_option_list()), ("compression", compression_options()),
                           ("topology", topology_option_list())):
        print(f"{group} options ({group}.<kwarg>=value; the defaults):")
        for name, text in options.items():
            print(f"  {name}: {text}")
    return 0


def run_topology(ns: argparse.Namespace) -> int:
    args = list(ns.args)
    if args and "=" not in args[0] and not args[0].endswith((".yaml", ".yml")):
        args[0] = f"topology={args[0]}"
    path, overrides = split_args(args)
    cfg = load_config(path, overrides)
    t = cfg.topology
    topo = topology_from_config(t, cfg.nodes, cfg.seed)
    print(topo.describe())
    return 0


def run_partition(ns: argparse.Namespace) -> int:
    if ns.plot:   # the PNG and its PDF: never over a file of the user's (one line, nothing written)

        refuse_foreign([ns.plot, vector_path(ns.plot)], "--plot")
    path, overrides = split_args(ns.args)
    cfg = load_config(path, overrides)
    ds = dataset_from_config(cfg.data, cfg.seed)
    labels = ds.y_train.numpy()
    parts = make_partition(cfg.partition.name, labels, cfg.nodes, cfg.seed, skew=cfg.skew,
                           alpha=cfg.partition.alpha, shards_per_node=cfg.partition.shards_per_node,
        reference=cfg.partition.reference, users=ds.users_train)
    counts = class_counts(parts, labels, ds.num_classes)
    what = partition_label(cfg)
    if cfg.partition.reference:
        what += ", the authors' reference split"
    print(f"{ds.name}: {len(labels)} training samples over {cfg.nodes} nodes ({what}, seed {cfg.seed})")
    print(format_class_table(counts, ds.class_names))
    if ns.plot:
        Path(ns.plot).parent.mkdir(parents=True, exist_ok=True)
        plot_class_heatmap(counts, ns.plot, title=f"{ds.name}, {cfg.nodes} nodes, {what}", class_names=ds.class_names)
        print(f"wrote {ns.plot}")
    return 0
