"""``decent8 cost``: compute energy, memory and communication, FP32 vs 8-bit (paper Section 5).

    decent8 cost --model resnet20 --norm range_evonorm --batch 32        # per-layer table + totals
    decent8 cost --model vgg11 --norm range_bn --format json             # training.energy_mj.fp32, ...
    decent8 cost runs/<run>                                              # a run's model, batch, graph, epochs,
                                                                         #   compression: + data per node
    decent8 cost --model resnet20 --plot figure7.png                     # the paper's Figure 7
    decent8 cost --table10 --format markdown                             # Table 10: ours vs paper vs diff %
    decent8 cost --table3                                                # Table 3 "Data (GB)"
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from ..algorithms.registry import DEFAULT_ALGORITHM
from ..config import SHARED_OPTIONS, TrainConfig, load_config
from ..cost.communication import TRAIN_SIZES
from ..cost.energy import FP32_ADD_PJ, FP32_MULT_PJ, INT8_ADD_PJ, INT8_MULT_PJ, OpEnergy
from ..cost.report import (cost_report, plot_report, rows_csv, table3, table3_markdown, table10, table10_markdown,
                           to_csv, to_markdown, to_text)
from ..compression.wire import check_wire, resolve_wire, value_bits_of
from ..errors import ConfigError
from .common import format_table
from ..plugins import read_as_data
from ..train.resume_trust import code_options
from ..data.registry import load_dataset
from ..cost.counts import default_dataset
from ..topology import make_topology
from ..cost.memory import run_memory
from ..figstyle import vector_path
from ..own_files import refuse_foreign

FORMATS = ("table", "json", "csv", "markdown")
DEFAULTS = {"model": "resnet20", "batch": 32, "algorithm": DEFAULT_ALGORITHM, "optimizer": "local", "topology": "directed_ring",
            "epochs": 200, "compression": "identity", "ratio": 0.99}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cost", help="compute energy, memory and communication per node, FP32 vs 8-bit (the paper's Section 5)",
        description="Per-layer addition/multiplication counts (the paper's Tables 7 and 9) from a traced forward "
                    "pass, energy at Horowitz's 45 nm figures, training and inference memory per node, and "
                    "(with a run folder or --nodes) the data each node sends. E.g. `decent8 cost --model resnet20 "
                    "--norm range_evonorm --batch 32`, `decent8 cost runs/<run>`, `decent8 cost --table10`.")
    p.add_argument("run", nargs="?", metavar="RUN", help="a run folder (its config.yaml) or a config YAML file")
    g = p.add_argument_group("model")
    g.add_argument("--model", help=f"model name (default {DEFAULTS['model']}, or the run's)")
    g.add_argument("--norm", help="norm-activation layer: range_evonorm (default), range_bn, evonorm, bn, gn, none")
    g.add_argument("--batch", type=int, help=f"samples per node per iteration (default {DEFAULTS['batch']})")
    g.add_argument("--dataset", help="input shape of: cifar10 (default for the CIFAR models), imagenette, mnist, "
                                     "digits")
    g.add_argument("--width", type=int, help="model width (default: the model's)")
    g.add_argument("--algorithm", help=f"algorithm whose buffers count in training memory (default {DEFAULT_ALGORITHM})")
    g.add_argument("--optimizer", help="optimizer kind: local (momentum, default), qgm")
    c = p.add_argument_group("communication (with --nodes, or from RUN)")
    c.add_argument("--nodes", type=int, help="nodes n (turns the communication volume on)")
    c.add_argument("--topology", help=f"graph (default {DEFAULTS['topology']})")
    c.add_argument("--epochs", type=int, help=f"epochs (default {DEFAULTS['epochs']})")
    c.add_argument("--compression", help="identity (default), topk, topk_int8, randomk, quantize, sign")
    c.add_argument("--ratio", type=float, help="fraction dropped by top-k / random-k (default 0.99)")
    c.add_argument("--wire", help="values on the wire: auto (default: 8-bit at precision=int8), fp32, int8")
    c.add_argument("--dataset-size", type=int, help="training samples N (default: the data set's)")
    e = p.add_argument_group("energy per operation (pJ; Horowitz 2014, 45 nm)")
    e.add_argument("--fp32-add", type=float, default=FP32_ADD_PJ, help=f"default {FP32_ADD_PJ}")
    e.add_argument("--fp32-mult", type=float, default=FP32_MULT_PJ, help=f"default {FP32_MULT_PJ}")
    e.add_argument("--int8-add", type=float, default=INT8_ADD_PJ, help=f"default {INT8_ADD_PJ}")
    e.add_argument("--int8-mult", type=float, default=INT8_MULT_PJ, help=f"default {INT8_MULT_PJ}")
    o = p.add_argument_group("output")
    o.add_argument("--format", choices=FORMATS, default="table", help="table (default), json, csv, markdown")
    o.add_argument("--plot", metavar="PNG", help="write a bar chart of where energy and memory go (Figure 7)")
    o.add_argument("--title", help="the --plot figure's title (default: 'Training cost per node and iteration, "
                                   "FP32 vs 8-bit' and the model, data set and batch)")
    o.add_argument("--totals-only", action="store_true", help="no per-layer table")
    o.add_argument("--table10", action="store_true", help="the paper's Table 10 reproduced: ours vs paper vs diff %%")
    o.add_argument("--table3", action="store_true", help="the paper's Table 3 'Data (GB)' reproduced")
    p.set_defaults(func=run)


def _positive(option: str, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(option, f"must be a positive integer, got {value!r}")


#: files only a run folder has (a config.yaml beside one of them is a run's, read as data)
_RUN_MARKS = ("summary.json", "metrics.jsonl", "checkpoint.pt", "execution.json")
#: code options of a config and the flag that names them on this command line instead
_CODE_FLAGS = {"model.name": "--model", "algorithm.name": "--algorithm", "topology.name": "--topology",
               "compression.name": "--compression"}


def is_run_config(path: str | Path) -> bool:
    """True for a run folder or the config.yaml of one (not a YAML file of the user's)."""
    p = Path(path)
    folder = p if p.is_dir() else p.parent
    return p.is_dir() or any((folder / m).exists() for m in _RUN_MARKS)


def load_run_config(path: str) -> TrainConfig:
    """The TrainConfig of a run folder (its config.yaml) or of a YAML file. A run folder is
    read as data (:func:`decent8.plugins.read_as_data`): nothing inside it is ever imported."""

    p = Path(path)
    if p.is_dir():
        cfg_path = p / "config.yaml"
        if not cfg_path.is_file():
            raise ConfigError("run", f"{path!r} has no config.yaml (not a run folder)")
    elif p.is_file():
        cfg_path = p
    else:
        raise ConfigError("run", f"{path!r} is neither a run folder nor a config file")
    if is_run_config(p):
        read_as_data(cfg_path.parent)
    return load_config(str(cfg_path))


def refuse_named_code(cfg: TrainConfig, ns: argparse.Namespace) -> None:
    """A run's config is data: code it names (``pkg.module:attr``) is not imported; one line
    asking for the flag that names it on this command line instead."""

    for option, value in code_options(cfg).items():
        flag = _CODE_FLAGS.get(option)
        if flag is not None and getattr(ns, flag[2:]) is None:
            raise ConfigError("run", f"{ns.run} names {option}={value}, which is not built-in; `decent8 cost` reads "
                                     f"a run as data and imports nothing it names: give {flag} (a built-in name, or "
                                     f"the code to import)")


def train_size(cfg: TrainConfig) -> int:
    """Training samples of a run's data set (after ``data.subset``)."""
    name = cfg.data.name
    if name in TRAIN_SIZES:
        n = TRAIN_SIZES[name]
    elif name == "digits":

        n = len(load_dataset("digits", test_fraction=cfg.data.test_fraction, seed=cfg.seed).y_train)
    else:
        raise ConfigError("data", f"training-set size of {name!r} unknown; give --dataset-size")
    sub = cfg.data.subset
    if sub is not None:
        n = max(1, int(round(n * sub))) if sub <= 1 else min(n, int(sub))
    return n


def _run_wire(cfg: TrainConfig) -> str:
    """A run's ``compression.wire`` for both columns of the table: ``auto`` when the run's
    wire is the one ``auto`` gives at its precision (so the FP32 column shows the FP32 wire
    and the 8-bit column the 8-bit one), else the wire the run set."""
    c = cfg.compression
    wire = getattr(c, "wire", "auto")
    precision = getattr(cfg, "precision", "fp32")
    return "auto" if wire == resolve_wire(c.name, precision, "auto", value_bits_of(c.params)) else wire


def _settings(ns: argparse.Namespace) -> dict[str, Any]:
    """Model and communication settings: the run's config, then explicit flags, then defaults."""
    s: dict[str, Any] = {"model": None, "norm": None, "batch": None, "dataset": None, "width": None,
                         "image_size": None, "algorithm": None, "optimizer": None, "nodes": None, "topology": None,
                         "epochs": None, "compression": None, "ratio": None, "dataset_size": None,
                         "value_bits": 32, "bits": 8, "index_dtype": "auto", "topology_opts": {}, "precision": None,
                         "wire": "auto"}
    if ns.run:
        cfg = load_run_config(ns.run)
        if is_run_config(ns.run):
            refuse_named_code(cfg, ns)
        t, opts = cfg.topology, {**SHARED_OPTIONS["compression"], **cfg.compression.params}
        s.update(model=cfg.model.name, norm=cfg.model.norm, width=cfg.model.width, batch=cfg.data.batch_size,
                 dataset=cfg.data.name, image_size=cfg.data.image_size, algorithm=cfg.algorithm.name,
                 optimizer=cfg.optimizer.kind, nodes=cfg.nodes, topology=t.name, epochs=cfg.epochs,
                 compression=cfg.compression.name, ratio=opts["ratio"], value_bits=opts["value_bits"],
                 bits=opts["bits"], index_dtype=opts["index_dtype"], wire=_run_wire(cfg),
                 precision=getattr(cfg, "precision", None),
                 topology_opts={"weights": t.weights,   # the graph's keyword arguments (topology.params)
                                **{k: v for k, v in t.params.items() if k in SHARED_OPTIONS["topology"]},
                                "params": {k: v for k, v in t.params.items() if k not in SHARED_OPTIONS["topology"]}})
        if ns.dataset_size is None and ns.dataset is None:
            s["dataset_size"] = train_size(cfg)
        if ns.topology is not None and ns.topology != t.name:   # another graph: the run's graph options are not its
            s["topology_opts"] = {"weights": t.weights}
    for key in ("model", "norm", "batch", "dataset", "width", "algorithm", "optimizer", "nodes", "topology", "epochs",
                "compression", "ratio", "dataset_size", "wire"):
        v = getattr(ns, key)
        if v is not None:
            s[key] = v
    for key in ("model", "batch", "algorithm", "optimizer"):
        if s[key] is None:
            s[key] = DEFAULTS[key]
    if s["nodes"] is not None:
        for key in ("topology", "epochs", "compression", "ratio"):
            if s[key] is None:
                s[key] = DEFAULTS[key]
    return s


def _communication_opts(s: dict[str, Any]) -> dict[str, Any] | None:
    if s["nodes"] is None:
        return None

    _positive("--nodes", s["nodes"])
    if s["nodes"] < 2:
        raise ConfigError("nodes", f"must be at least 2, got {s['nodes']}")
    if isinstance(s["epochs"], bool) or not isinstance(s["epochs"], int) or s["epochs"] < 0:
        raise ConfigError("epochs", f"must be an integer ≥ 0, got {s['epochs']!r}")
    ratio = s["ratio"]
    if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not math.isfinite(ratio) or not 0 <= ratio < 1:
        raise ConfigError("compression.ratio", f"must be in [0, 1) (fraction dropped, e.g. 0.99), got {ratio!r}")
    size = s["dataset_size"]
    if size is None:
        name = s["dataset"] or default_dataset(s["model"])
        if name not in TRAIN_SIZES:
            raise ConfigError("--dataset-size", f"training-set size of {name!r} unknown; give --dataset-size")
        size = TRAIN_SIZES[name]
    _positive("--dataset-size", size)
    topo = make_topology(s["topology"], s["nodes"], **s["topology_opts"])
    return {"nodes": s["nodes"], "topology": topo, "epochs": s["epochs"], "dataset_size": size, "batch": s["batch"],
            "compression": s["compression"], "ratio": float(ratio), "value_bits": s["value_bits"], "bits": s["bits"],
            "index_dtype": s["index_dtype"], "wire": check_wire(s["wire"])}


def simulation_memory(parameters: int, s: dict[str, Any]) -> dict[str, Any]:
    """The nodes' state of a simulated run of ``--nodes`` in one process, from the declarations
    of the algorithm, optimizer and compressor (:func:`decent8.cost.memory.run_memory`; what the
    pre-flight check of ``decent8 train`` compares with the memory available)."""

    m = run_memory(parameters, s["nodes"], s["algorithm"] or DEFAULTS["algorithm"],
                   s["optimizer"] or DEFAULTS["optimizer"], s["compression"] or DEFAULTS["compression"])
    return {"nodes": m.nodes, "parameters": m.parameters, "bytes_per_parameter": m.per_parameter,
            "parts": m.parts, "gb": m.total / 1e9, "describe": m.describe()}


def _emit_rows(rows: list[dict[str, Any]], fmt: str, markdown: str, headers: list[str], keys: list[str]) -> str:
    if fmt == "json":
        return json.dumps(rows, indent=2) + "\n"
    if fmt == "csv":
        return rows_csv(rows)
    if fmt == "markdown":
        return markdown
    body = [[r[k] if not isinstance(r[k], float) or r[k] is None else round(r[k], 4) for k in keys] for r in rows]
    return format_table(headers, body) + "\n"


def run(ns: argparse.Namespace) -> int:
    costs = OpEnergy(ns.fp32_add, ns.fp32_mult, ns.int8_add, ns.int8_mult)
    _positive("--batch", ns.batch)
    _positive("--width", ns.width)
    if ns.table10 or ns.table3:
        if ns.run or ns.plot:
            raise ConfigError("--table10" if ns.table10 else "--table3",
                              "prints the paper's table; it takes no RUN and no --plot")
        out = []
        if ns.table10:
            rows = table10(costs, batch=ns.batch or 32)
            out.append(_emit_rows(rows, ns.format, table10_markdown(rows),
                                  ["phase", "model", "norm", "quantity", "ours", "paper", "diff %"],
                                  ["phase", "model", "norm", "quantity", "ours", "paper", "diff_pct"]))
        if ns.table3:
            rows = table3(epochs=ns.epochs if ns.epochs is not None else 200, batch=ns.batch or 32)
            out.append(_emit_rows(rows, ns.format, table3_markdown(rows),
                                  ["model", "n", "graph", "comp %", "precision", "ours GB", "paper GB", "diff %",
                                   "real GB", "wire"],
                                  ["model", "nodes", "topology", "compression_pct", "precision", "ours_gb",
                                   "paper_gb", "diff_pct", "real_gb", "wire"]))
        print("\n".join(out), end="")
        return 0
    if ns.plot:   # the PNG and its PDF: never over a file of the user's (one line, nothing written)

        refuse_foreign([ns.plot, vector_path(ns.plot)], "--plot")
    s = _settings(ns)
    comm = _communication_opts(s)
    report = cost_report(s["model"], s["norm"], s["batch"], s["dataset"], s["width"], s["algorithm"], s["optimizer"],
                         costs, comm, layers=True, image_size=s["image_size"])
    if comm is not None:
        report["simulation_memory"] = simulation_memory(report["parameters"]["fp32"], s)
    if ns.run:
        report["run"] = str(ns.run)
        report["run_precision"] = s["precision"]
    if ns.plot:
        plot_report(report, ns.plot, title=getattr(ns, "title", None))
    if ns.format == "json":
        print(json.dumps(report, indent=2))
    elif ns.format == "csv":
        print(to_csv(report), end="")
    elif ns.format == "markdown":
        print(to_markdown(report, layers=not ns.totals_only), end="")
    else:
        print(to_text(report, layers=not ns.totals_only), end="")
        if comm is not None:
            c = report["communication"]["fp32"]
            q = report["communication"]["int8"]
            m = report["simulation_memory"]
            print(f"\nsimulator memory: {m['nodes']:,} nodes in one process hold about {m['gb']:.3g} GB "
                  f"({m['describe']}), beside the data set and torch")
            print(f"communication: {c['nodes']} nodes, {c['topology']} (mean out-degree {c['mean_out_degree']:g}), "
                  f"{c['epochs']} epochs × {c['iterations'] // max(c['epochs'], 1)} iterations of batch {c['batch']} "
                  f"(N = {c['dataset_size']}), {c['compression']}"
                  + (f" {c['ratio']:g}" if c['compression'] in ('topk', 'topk_int8', 'randomk') else "")
                  + f"; wire: {c['wire_compression']} / {q['wire_compression']} (8-bit), message "
                  f"{c['real_message_bytes']:,} / {q['real_message_bytes']:,} B")
        if ns.plot:
            print(f"wrote {ns.plot}")
    return 0
