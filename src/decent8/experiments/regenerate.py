"""The documented result tables, generated from the current code.

Every number in README.md and docs/results/ that this module knows sits between
markers ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->``; the text between them is
exactly what :func:`render` prints for the runs of :data:`RESULTS`. So

    python -m decent8.experiments.regenerate            # rerun everything, rewrite the docs
    python -m decent8.experiments.regenerate main_job   # one table
    python -m decent8.experiments.regenerate --check    # rerun, compare, write nothing (exit 1 if stale)
    python -m decent8.experiments.regenerate --print --cache DIR heterogeneity
                                                        # print only; keep/reuse each run's summary in DIR

keeps the documents honest. :data:`RESULTS` are tables of run summaries (cells × seeds);
:data:`PRICED` are sweeps priced on a network model by ``decent8.timing.tta`` (the
time-to-accuracy page), one marker per table. Cheap subsets are rerun by the tests: the README's main-job
row (tests/test_regenerate.py), seed 0 of three cells of the Marsit table
(tests/test_marsit_accuracy.py). Result tables of docs/results/ that are not listed here
say so in place ("measured once, with the code as of commit X, with command Y").

The runs pin ``sim.chunk=8`` (8 nodes in one vmap call) unless a row names its own (the
README's main job: ``layers:8``, what ``sim.chunk=auto`` now picks for the digits CNN on
a 2-core CPU): other executions compute the same math with other float rounding, which
over 60 epochs moves a final accuracy by up to ~0.4 points (main job, seed 0: 97.43 %
with ``8``, 97.53 % with ``layers:4``, 97.81 % with ``layers:8``).

The CPU's vector kernels round differently too: the same run on AVX-512 kernels ends at
97.92 % instead of 97.81 % (main job, seed 0, AMD EPYC). The documented numbers are
computed with PyTorch's AVX2 kernels (:data:`REFERENCE_KERNELS`; this module and the
test suite set them, any x86-64 CPU of the last decade has them), so they reproduce
exactly on AVX2 and AVX-512 machines alike. A plain ``decent8 train`` uses the fastest
kernels of its CPU; ``ATEN_CPU_CAPABILITY=avx2 DNNL_MAX_CPU_ISA=AVX2
MKL_ENABLE_INSTRUCTIONS=AVX2 decent8 train`` gives the documented digits.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..config import load_config
from ..errors import TrainingError
from ..train.loop import train
from .aggregate import format_mean_std

REPO = Path(__file__).resolve().parents[3]
#: the execution every documented run uses (see the module docstring)
PINNED = ["sim.chunk=8", "device=cpu", "progress=false", "checkpoint=false", "tensorboard=false", "sim.compile=false"]


@dataclass
class Result:
    """A documented table: the runs behind it and how it is written.

    ``columns`` name summary metrics (keys of :data:`FORMAT`), each written as mean ± sample
    std over ``seeds``; ``"per_seed"`` expands to one column per seed plus their mean of
    ``per_seed_metric`` (a run that stops with "training diverged" is written as such).
    ``common`` overrides go into every cell (a table's shared setting).
    """

    name: str
    doc: str                                   # file, relative to the repository
    cells: list[tuple[str, list[str]]]         # (row label, overrides); seeds go in `seeds`
    seeds: tuple[int, ...] = (0,)
    columns: tuple[str, ...] = ("mean_node_accuracy", "averaged_model_accuracy", "bytes_sent_per_node")
    common: tuple[str, ...] = ()
    per_seed_metric: str = "mean_node_accuracy"


def _finite(xs: list[float | None]) -> list[float]:
    return [x for x in xs if x is not None]


def _acc(xs: list[float | None]) -> str:
    ok = _finite(xs)
    if not ok:
        return "diverged"
    text = format_mean_std([100 * x for x in ok], show_n=False) + " %"
    return text if len(ok) == len(xs) else f"{text} ({len(xs) - len(ok)} of {len(xs)} diverged)"


def _bytes(xs: list[float | None]) -> str:
    ok = _finite(xs)
    if not ok:
        return "—"
    b = sum(ok) / len(ok)
    return f"{b / 1e6:.2f} MB" if b >= 1e6 else f"{b / 1e3:.1f} KB"


def _general(xs: list[float | None]) -> str:
    ok = _finite(xs)
    return f"{sum(ok) / len(ok):.3g}" if ok else "—"


def _count(xs: list[float | None]) -> str:
    ok = _finite(xs)
    return f"{int(ok[0]):,}" if ok else "—"


FORMAT: dict[str, tuple[str, Callable[[list[float | None]], str]]] = {
    "mean_node_accuracy": ("mean node acc.", _acc),
    "averaged_model_accuracy": ("averaged-model acc.", _acc),
    "min_node_accuracy": ("worst node acc.", _acc),
    "bytes_sent_per_node": ("bytes sent / node", _bytes),
    "consensus_distance": ("consensus distance (mean)", _general),
    "message_bytes": ("message B / step", _count),
}


def _het(label: str, overrides: list[str]) -> list[tuple[str, list[str]]]:
    return [(f"{label}, skew {k}", [*overrides, f"skew={k}"]) for k in ("0.9", "1.0")]


_MARSIT_IID = ["nodes=8", "topology=ring", "skew=0", "optimizer.momentum=0"]
_MARSIT_CELLS = [
    ("PSGD (fp32 ring all-reduce)", ["algorithm=psgd"]),
    ("Marsit, K = 0 (η_s 0.005)", ["algorithm=marsit", "marsit.K=0", "marsit.eta_s=0.005"]),
    ("Marsit-30", ["algorithm=marsit", "marsit.K=30", "marsit.eta_s=0.005"]),
    ("signSGD, cascading re-signing (η_s 0.002)", ["algorithm=signsgd", "marsit.eta_s=0.002"]),
]

_GRAPHS = REPO / "docs" / "results" / "graphs"
#: MNIST as shipped beside the repository (``../shared``); a user with their own copy passes its path
_MNIST = ["data.name=mnist", f"data.root={REPO.parent / 'shared' / 'data' / 'mnist' / 'rasbt-mnist-pngs.tar.gz'}"]


def _edge_list(label: str, file: str, nodes: int) -> list[tuple[str, list[str]]]:
    return [(f"{label}, sim.chunk={c}", ["topology=edge_list", f"topology.path={_GRAPHS / file}", f"nodes={nodes}",
                                         f"sim.chunk={c}"]) for c in ("1", "auto")]


RESULTS: dict[str, Result] = {
    r.name: r for r in [
        # what sim.chunk=auto chooses for the main job on a 2-core CPU (docs/execution.md)
        Result("main_job", "README.md", [("`decent8 train` (auto → `layers:8`)", ["sim.chunk=layers:8"])]),
        Result("engine_digits", "docs/results/engine_digits.md", [
            ("D-PSGD, fp32, skew 0", ["algorithm=dpsgd", "compression=identity", "skew=0"]),
            ("D-PSGD, fp32, skew 0.9", ["algorithm=dpsgd", "compression=identity", "skew=0.9"]),
            ("Choco-SGD, top-k 99 %, skew 0", ["algorithm=choco", "compression=topk", "skew=0"]),
            ("Choco-SGD, top-k 99 %, skew 0.9", ["algorithm=choco", "compression=topk", "skew=0.9"]),
            ("Deep-Squeeze, top-k 99 %, skew 0", ["algorithm=deepsqueeze", "compression=topk", "skew=0"]),
            ("Deep-Squeeze, top-k 99 %, skew 0.9", ["algorithm=deepsqueeze", "compression=topk", "skew=0.9"]),
        ], seeds=(0, 1, 2)),
        Result("heterogeneity", "docs/results/heterogeneity.md", [
            *_het("D-PSGD, fp32", ["algorithm=dpsgd", "compression=identity"]),
            *_het("Choco-SGD, top-k 99 % (γ 0.05)", ["algorithm=choco", "compression=topk"]),
            *_het("GUT (μ 0.1), fp32", ["algorithm=gut", "compression=identity"]),
            *_het("QG-GUTm (μ 0.1), fp32", ["algorithm=qg_gutm", "compression=identity"]),
            *_het("gradient tracking, fp32, lr 0.1", ["algorithm=gt", "compression=identity"]),
            *_het("gradient tracking, BEER top-k 99 %, lr 0.1, γ 0.01",
                  ["algorithm=gt", "compression=topk", "algorithm.gamma=0.01"]),
            *_het("gradient tracking, fp32, lr 0.01", ["algorithm=gt", "compression=identity", "optimizer.lr=0.01"]),
            *_het("gradient tracking, BEER top-k 99 %, lr 0.01, γ 0.05",
                  ["algorithm=gt", "compression=topk", "optimizer.lr=0.01"]),
            *_het("QGM (D-PSGD), fp32", ["algorithm=dpsgd", "compression=identity", "optimizer.kind=qgm"]),
            *_het("QGM (Choco-SGD), top-k 99 % (γ 0.005)", ["algorithm=choco", "compression=topk", "optimizer.kind=qgm"]),
        ], seeds=(0, 1, 2), common=("epochs=10", "optimizer.milestones=[6,8]"),
            columns=("mean_node_accuracy", "averaged_model_accuracy", "consensus_distance", "message_bytes",
                     "bytes_sent_per_node")),
        Result("deepsqueeze_digits", "docs/results/deepsqueeze.md", [
            ("Deep-Squeeze, γ 0.003", ["algorithm=deepsqueeze", "algorithm.gamma=0.003"]),
            ("Choco-SGD, default (γ 0.05)", ["algorithm=choco"]),
        ], seeds=(0, 1, 2), common=("skew=0",), columns=("per_seed",)),
        Result("edge_list_defaults", "docs/results/defaults.md", [
            *_edge_list("5-ring + chord 0→2 (docs/usage.md example)", "ring5_chord.txt", 5),
            *_edge_list("6-ring + chords 0→3, 2→5, 4→1", "ring6_chords.txt", 6),
        ], seeds=(0, 1, 2), columns=("per_seed", "averaged_model_accuracy")),
        Result("marsit_skew", "docs/results/marsit.md", [
            *[(f"{label}, skew {k}", [*o, f"skew={k}"]) for label, o in _MARSIT_CELLS for k in ("0", "0.8")],
            *[(f"Marsit, K = 0 (η_s 0.005), skew {k}", [*_MARSIT_CELLS[1][1], f"skew={k}"]) for k in ("0.4", "0.6")],
        ], common=("topology=ring", "optimizer.momentum=0"), columns=("mean_node_accuracy",)),
        Result("marsit_defaults", "docs/results/defaults.md", [
            ("`algorithm=psgd`", ["algorithm=psgd"]),
            ("`algorithm=marsit` (momentum 0, K = 0)", ["algorithm=marsit"]),
            ("`algorithm=marsit marsit.K=30` (momentum 0)", ["algorithm=marsit", "marsit.K=30"]),
        ], seeds=(0, 1, 2), columns=("per_seed",)),
        Result("lowprec_digits", "docs/results/lowprec_digits.md", [
            (f"skew {k}, {p}", [f"skew={k}", f"precision={p}"]) for k in ("0", "0.8") for p in ("fp32", "int8")
        ], seeds=(0, 1, 2), columns=("per_seed", "averaged_model_accuracy", "bytes_sent_per_node")),
        Result("lowprec_digits_dense", "docs/results/lowprec_digits.md", [
            (f"skew {k}, {p}", [f"skew={k}", f"precision={p}"]) for k in ("0", "0.8") for p in ("fp32", "int8")
        ], seeds=(0, 1, 2), common=("compression=identity",),
            columns=("per_seed", "averaged_model_accuracy", "bytes_sent_per_node")),
        Result("marsit_sgd", "docs/results/marsit.md", [
            *_MARSIT_CELLS,
        ], seeds=(0, 1, 2), common=tuple(_MARSIT_IID), columns=("per_seed", "message_bytes", "bytes_sent_per_node")),
        Result("marsit_variants", "docs/results/marsit.md", [
            ("Marsit-100 (η_s 0.005)", ["algorithm=marsit", "marsit.K=100", "marsit.eta_s=0.005"]),
            ("Marsit-30, `marsit.reset=drop`", ["algorithm=marsit", "marsit.K=30", "marsit.eta_s=0.005",
                                                "marsit.reset=drop"]),
            ("Marsit-100, `marsit.reset=drop`", ["algorithm=marsit", "marsit.K=100", "marsit.eta_s=0.005",
                                                 "marsit.reset=drop"]),
            ("EF-signSGD, per-hop re-compression", ["algorithm=ef_signsgd"]),
        ], seeds=(0, 1, 2), common=tuple(_MARSIT_IID), columns=("per_seed", "message_bytes", "bytes_sent_per_node")),
        Result("marsit_nesterov", "docs/results/marsit.md", [
            ("PSGD", ["algorithm=psgd"]),
            ("Marsit, K = 0 (η_s 0.01)", ["algorithm=marsit", "marsit.K=0", "marsit.eta_s=0.01"]),
            ("Marsit-100 (η_s 0.01)", ["algorithm=marsit", "marsit.K=100", "marsit.eta_s=0.01"]),
            ("Marsit-100, `marsit.reset=drop`", ["algorithm=marsit", "marsit.K=100", "marsit.eta_s=0.01",
                                                 "marsit.reset=drop"]),
            ("signSGD, cascading re-signing (η_s 0.002)", ["algorithm=signsgd", "marsit.eta_s=0.002"]),
            ("EF-signSGD, per-hop re-compression", ["algorithm=ef_signsgd"]),
        ], seeds=(0, 1, 2), common=("nodes=8", "topology=ring", "skew=0", "optimizer.momentum=0.9"),
            columns=("per_seed",)),
        Result("marsit_mnist", "docs/results/marsit.md", [
            ("PSGD", ["algorithm=psgd"]),
            ("Marsit, K = 0", ["algorithm=marsit", "marsit.K=0", "marsit.eta_s=0.005"]),
            ("Marsit-30", ["algorithm=marsit", "marsit.K=30", "marsit.eta_s=0.005"]),
            ("Marsit-100", ["algorithm=marsit", "marsit.K=100", "marsit.eta_s=0.005"]),
            ("signSGD, cascading re-signing", ["algorithm=signsgd", "marsit.eta_s=0.002"]),
            ("EF-signSGD, per-hop re-compression", ["algorithm=ef_signsgd"]),
        ], common=(*_MARSIT_IID, *_MNIST, "data.subset=0.1", "data.test_subset=2000", "epochs=10",
                   "optimizer.milestones=[6,8]"),
            columns=("mean_node_accuracy", "message_bytes", "bytes_sent_per_node")),
        Result("qgm_gamma", "docs/results/defaults.md", [
            ("γ 0.0095 = 0.05·(1 − β²)", ["algorithm.gamma=0.0095"]),
            ("γ 0.005 = 0.05·(1 − β) (the default)", []),
        ], seeds=(0, 1, 2, 3, 4), common=("optimizer.kind=qgm",), columns=("per_seed",)),
        Result("qgm_gamma_seed3", "docs/results/defaults.md", [
            ("QGM, γ 0.05 (the old default)", ["optimizer.kind=qgm", "algorithm.gamma=0.05"]),
            ("QGM, γ 0.01", ["optimizer.kind=qgm", "algorithm.gamma=0.01"]),
            ("Choco + local Nesterov momentum (γ 0.05, the default)", []),
        ], seeds=(3,), columns=("mean_node_accuracy",)),
        Result("lowprec_mnist", "docs/results/lowprec_digits.md", [
            (f"skew 0.8, {p}", ["skew=0.8", f"precision={p}"]) for p in ("fp32", "int8")
        ], common=(*_MNIST, "data.subset=6000", "data.test_subset=2000", "epochs=15", "optimizer.lr=0.05"),
            columns=("mean_node_accuracy", "averaged_model_accuracy", "bytes_sent_per_node")),
    ]
}


@dataclass
class Priced:
    """Time-to-accuracy tables: sweeps of training runs (``decent8 sweep``), priced on a network
    model by :mod:`decent8.timing.tta` (docs/algorithms.md §12). The text between the markers
    ``<!-- results:MARKER -->`` of each of ``tables`` is the markdown of one ``tta`` call; its
    figures go beside the document (``<doc stem>/<table>-*.png``)."""

    name: str
    doc: str
    sweeps: list[tuple[str, list[str], list[str]]]     # (sweep folder name, --cell alternatives, overrides)
    tables: list[tuple[str, list[str]]]                # (table, tta arguments; "{S}" is the sweeps' folder)

    def marker(self, table: str) -> str:
        return f"{self.name}/{table}"


_TTA = ["nodes=8", "skew=0", "epochs=30", "optimizer.milestones=[15,22]"]
_NET = ["network=custom", "network.latency_s=5e-5", "network.bandwidth_mbit_s=1000", "clock.as_model=resnet20"]
_GOSSIP = ["algorithm=dpsgd compression=identity", "algorithm=choco compression=topk"]

PRICED: dict[str, Priced] = {
    p.name: p for p in [
        Priced("time_to_accuracy", "docs/results/time_to_accuracy.md", sweeps=[
            ("tta_allreduce", ["algorithm=psgd", "algorithm=marsit marsit.K=0 marsit.eta_s=0.005",
                               "algorithm=signsgd marsit.eta_s=0.002"],
             ["topology=ring", "optimizer.momentum=0", *_NET, *_TTA]),
            ("tta_gossip", _GOSSIP, ["topology=directed_ring", *_NET, *_TTA]),
            ("tta_int8", ["algorithm=choco compression=topk precision=int8"], ["topology=directed_ring", *_NET, *_TTA]),
            ("dropout", _GOSSIP, ["topology=directed_ring", "faults.node_drop=0.1,0.3", *_TTA]),
        ], tables=[
            ("allreduce_95", ["{S}/tta_allreduce", "--baseline", "psgd", "--target", "0.95", "--scenarios",
                              "--title", "ring, 8 workers, ResNet-20-sized;"]),
            ("allreduce_90", ["{S}/tta_allreduce", "--baseline", "psgd", "--target", "0.9"]),
            ("gossip_95", ["{S}/tta_gossip", "--baseline", "dpsgd", "--target", "0.95", "--scenarios",
                           "--title", "directed ring, 8 nodes, ResNet-20-sized;"]),
            ("gossip_90", ["{S}/tta_gossip", "--baseline", "dpsgd", "--target", "0.9"]),
            ("precision_95", ["{S}/tta_gossip/algorithm-choco_compression-topk", "{S}/tta_int8", "--baseline",
                              "choco/topk", "--target", "0.95", "--title", "Choco 99 % top-k, FP32 vs 8-bit (r = 4);"]),
            ("dropout", ["{S}/tta_gossip", "{S}/dropout", "--dropout"]),
        ]),
    ]
}


def price(priced: Priced, sweeps_dir: str, figures: Path) -> dict[str, str]:
    """Run ``priced``'s sweeps into ``sweeps_dir`` (finished cells are skipped) and price them:
    table → its markdown; PNGs and the tables' .md files are written under ``figures``."""
    from ..cli.main import main as cli
    from ..timing.tta import main as tta
    for name, cells, overrides in priced.sweeps:
        argv = ["sweep", *[a for c in cells for a in ("--cell", c)], *PINNED, *overrides,
                f"out_dir={sweeps_dir}", "--name", name, "--quiet"]
        with contextlib.redirect_stdout(io.StringIO()):
            if cli(argv) != 0:
                raise SystemExit(f"{priced.name}: sweep {name} failed (decent8 {' '.join(argv)})")
    out: dict[str, str] = {}
    for table, args in priced.tables:
        prefix = figures / table
        with contextlib.redirect_stdout(io.StringIO()):
            rc = tta([a.replace("{S}", sweeps_dir) for a in args] + ["--out", str(prefix)])
        if rc != 0:
            raise SystemExit(f"{priced.name}: pricing {table} failed")
        out[table] = prefix.with_suffix(".md").read_text(encoding="utf-8").strip("\n")
    return out


def run_one(result: Result, index: int, seed: int, out: str, cache: str | None = None) -> dict[str, Any] | None:
    """One cell × seed of ``result``: the run's summary, or None if it diverged.

    With ``cache`` (a folder) a run whose summary is already there is not rerun (resume an
    interrupted regeneration; delete the folder after a code change)."""
    key = Path(cache) / f"{result.name}-{index}-s{seed}.json" if cache else None
    if key is not None and key.exists():
        return json.loads(key.read_text(encoding="utf-8"))
    overrides = [*PINNED, *result.common, *result.cells[index][1]]     # a cell may set sim.chunk itself
    cfg = load_config(None, [*overrides, f"seed={seed}", f"out_dir={out}", f"name={result.name}-{index}-s{seed}"])
    try:
        summary, _ = train(cfg, quiet=True)
    except TrainingError as e:
        if "diverged" not in str(e):
            raise
        summary = None
    if key is not None:
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_text(json.dumps(summary), encoding="utf-8")
    return summary


def run_cells(result: Result, out_dir: str | None = None,
              only: list[int] | None = None, cache: str | None = None) -> dict[str, list[dict[str, Any] | None]]:
    """Every cell × seed of ``result`` (or the cells ``only``): label → the runs' summaries."""
    out = out_dir or tempfile.mkdtemp(prefix=f"d8-{result.name}-")
    summaries: dict[str, list[dict[str, Any] | None]] = {}
    for i, (label, _) in enumerate(result.cells):
        if only is not None and i not in only:
            continue
        summaries[label] = [run_one(result, i, seed, out, cache) for seed in result.seeds]
    return summaries


def _values(runs: list[dict[str, Any] | None], key: str) -> list[float | None]:
    return [None if r is None else float(r[key]) for r in runs]


def _row_cells(result: Result, runs: list[dict[str, Any] | None]) -> list[str]:
    cells: list[str] = []
    for c in result.columns:
        if c == "per_seed":
            xs = _values(runs, result.per_seed_metric)
            cells += ["diverged" if x is None else f"{100 * x:.2f}" for x in xs]
            if len(xs) > 1:
                cells.append(_acc(xs))
        else:
            cells.append(FORMAT[c][1](_values(runs, c)))
    return cells


def _header(result: Result) -> list[str]:
    names: list[str] = []
    for c in result.columns:
        if c == "per_seed":
            metric = FORMAT[result.per_seed_metric][0]
            names += [f"seed {s}" for s in result.seeds] if len(result.seeds) > 1 else [f"{metric} (%)"]
            if len(result.seeds) > 1:
                names.append(f"{metric}: mean ± std")
        else:
            names.append(FORMAT[c][0])
    return names


def render_row(result: Result, label: str, runs: list[dict[str, Any] | None]) -> str:
    """One row of the table (what a cheap test reruns)."""
    return f"| {label} | " + " | ".join(_row_cells(result, runs)) + " |"


def render(result: Result, summaries: dict[str, list[dict[str, Any] | None]]) -> str:
    """The markdown table written between the markers."""
    seeds = ", ".join(map(str, result.seeds))
    names = _header(result)
    lines = [f"| run ({'seed' if len(result.seeds) == 1 else 'seeds'} {seeds}) | " + " | ".join(names) + " |",
             "| --- |" + " --- |" * len(names)]
    lines += [render_row(result, label, runs) for label, runs in summaries.items()]
    setting = ("; every run: `" + " ".join(result.common).replace(str(REPO.parent), "..") + "`"
               if result.common else "")
    chunk = ("sim.chunk as in each row" if any(o.startswith("sim.chunk=") for _, c in result.cells for o in c)
             else PINNED[0])
    note = (f"\n\n(`python -m decent8.experiments.regenerate {result.name}`; mean ± sample std over seeds, "
            f"{chunk}{setting})" if len(result.seeds) > 1 else
            f"\n\n(`python -m decent8.experiments.regenerate {result.name}`, {chunk}{setting})")
    return "\n".join(lines) + note


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- results:{re.escape(name)} -->)(.*?)(<!-- /results:{re.escape(name)} -->)", re.S)


def documented(result: Result | Priced, marker: str | None = None) -> str | None:
    """The text between the markers of ``result`` (or ``marker``) in its document (None if the
    markers are missing)."""
    m = _pattern(marker or result.name).search((REPO / result.doc).read_text(encoding="utf-8"))
    return m.group(2).strip("\n") if m else None


def documented_cell(result: Result, label: str, column: str, text: str | None = None) -> str | None:
    """One cell of the documented table (row ``label``, header ``column``), or None if absent.
    ``text``: a rendered table instead of the document's."""
    table = documented(result) if text is None else text
    if table is None:
        return None
    rows = [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in table.splitlines() if line.startswith("|")]
    if not rows or column not in rows[0]:
        return None
    j = rows[0].index(column)
    return next((row[j] for row in rows[2:] if row[0] == label and len(row) > j), None)


def write(result: Result | Priced, table: str, marker: str | None = None) -> None:
    path = REPO / result.doc
    text = path.read_text(encoding="utf-8")
    marker = marker or result.name
    new, n = _pattern(marker).subn(lambda m: m.group(1) + "\n" + table + "\n" + m.group(3), text)
    if n != 1:
        raise SystemExit(f"{result.doc}: no <!-- results:{marker} --> markers")
    from ..atomic import atomic_write_text
    atomic_write_text(path, new)


#: Environment that selects the AVX2 kernels of ATen, oneDNN and MKL (the documented numbers' kernels).
REFERENCE_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "DNNL_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


def use_reference_kernels() -> bool:
    """Select :data:`REFERENCE_KERNELS` for this process and its children; True when ATen runs them.

    Must run before the first CPU kernel (each library fixes its choice then); False on a CPU
    without AVX2 or when ATen already chose (the numbers may then differ in the last digits).
    """
    import os

    os.environ.update(REFERENCE_KERNELS)
    import torch
    return torch.backends.cpu.get_cpu_capability() == "AVX2"


def main(argv: list[str] | None = None) -> int:
    if not use_reference_kernels():
        print("decent8: warning: the AVX2 kernels of the documented numbers are not in use; "
              "tables may differ in the last digits", file=sys.stderr)
    ap = argparse.ArgumentParser(prog="python -m decent8.experiments.regenerate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"tables to regenerate (default: all of {', '.join([*RESULTS, *PRICED])})")
    ap.add_argument("--check", action="store_true", help="compare with the documents, write nothing; exit 1 if stale")
    ap.add_argument("--print", dest="print_only", action="store_true", help="print the tables, write nothing")
    ap.add_argument("--cache", metavar="DIR", help="keep each run's summary here and reuse it (resume)")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in RESULTS and n not in PRICED]
    if unknown:
        print(f"decent8: error: unknown result {unknown[0]!r}; allowed: {', '.join([*RESULTS, *PRICED])}",
              file=sys.stderr)
        return 2
    mode = "print" if args.print_only else "check" if args.check else "write"
    stale = 0
    for name in args.names or [*RESULTS, *PRICED]:
        if name in PRICED:
            stale += _regenerate_priced(PRICED[name], mode, args.cache)
        else:
            result = RESULTS[name]
            stale += _emit(result, name, render(result, run_cells(result, cache=args.cache)), mode)
    return 1 if stale else 0


def _emit(result: Result | Priced, marker: str, text: str, mode: str) -> int:
    """Print, check or write the table ``text`` of ``marker``; 1 if it is stale (mode "check")."""
    if mode == "print":
        print(f"<!-- results:{marker} -->\n{text}\n<!-- /results:{marker} -->", flush=True)
        return 0
    if mode == "check":
        same = documented(result, marker) == text
        print(f"{marker}: {'up to date' if same else 'STALE'} ({result.doc})")
        return int(not same)
    write(result, text, marker)
    print(f"{marker}: written to {result.doc}")
    return 0


def _regenerate_priced(priced: Priced, mode: str, cache: str | None) -> int:
    """Write (or check, or print) every table of ``priced``; the number of stale tables."""
    sweeps = str(Path(cache) / priced.name) if cache else tempfile.mkdtemp(prefix=f"d8-{priced.name}-")
    figures = (REPO / priced.doc).with_suffix("") if mode == "write" else Path(tempfile.mkdtemp(prefix="d8-figures-"))
    return sum(_emit(priced, priced.marker(table), text, mode)
               for table, text in price(priced, sweeps, figures).items())


if __name__ == "__main__":
    raise SystemExit(main())
