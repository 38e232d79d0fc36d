"""What is documented: the tables of run summaries (:data:`RESULTS`, cells × seeds) and the
time-to-accuracy tables priced on a network model (:data:`PRICED`), with the execution every
documented run pins (:data:`PINNED`)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
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

def _het(label: str, overrides: list[str]) -> list[tuple[str, list[str]]]:
    return [(f"{label}, skew {k}", [*overrides, f"skew={k}"]) for k in ("0.9", "1.0")]


_MARSIT_IID = ["nodes=8", "topology=ring", "skew=0", "optimizer.momentum=0"]
_MARSIT_CELLS = [
    ("PSGD (fp32 ring all-reduce)", ["algorithm=psgd"]),
    ("Marsit, K = 0 (η_s 0.005)", ["algorithm=marsit", "allreduce.K=0", "allreduce.eta_s=0.005"]),
    ("Marsit-30", ["algorithm=marsit", "allreduce.K=30", "allreduce.eta_s=0.005"]),
    ("signSGD, cascading re-signing (η_s 0.002)", ["algorithm=signsgd", "allreduce.eta_s=0.002"]),
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
            ("`algorithm=marsit allreduce.K=30` (momentum 0)", ["algorithm=marsit", "allreduce.K=30"]),
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
            ("Marsit-100 (η_s 0.005)", ["algorithm=marsit", "allreduce.K=100", "allreduce.eta_s=0.005"]),
            ("Marsit-30, `allreduce.reset=drop`", ["algorithm=marsit", "allreduce.K=30", "allreduce.eta_s=0.005",
                                                "allreduce.reset=drop"]),
            ("Marsit-100, `allreduce.reset=drop`", ["algorithm=marsit", "allreduce.K=100", "allreduce.eta_s=0.005",
                                                 "allreduce.reset=drop"]),
            ("EF-signSGD, per-hop re-compression", ["algorithm=ef_signsgd"]),
        ], seeds=(0, 1, 2), common=tuple(_MARSIT_IID), columns=("per_seed", "message_bytes", "bytes_sent_per_node")),
        Result("marsit_nesterov", "docs/results/marsit.md", [
            ("PSGD", ["algorithm=psgd"]),
            ("Marsit, K = 0 (η_s 0.01)", ["algorithm=marsit", "allreduce.K=0", "allreduce.eta_s=0.01"]),
            ("Marsit-100 (η_s 0.01)", ["algorithm=marsit", "allreduce.K=100", "allreduce.eta_s=0.01"]),
            ("Marsit-100, `allreduce.reset=drop`", ["algorithm=marsit", "allreduce.K=100", "allreduce.eta_s=0.01",
                                                 "allreduce.reset=drop"]),
            ("signSGD, cascading re-signing (η_s 0.002)", ["algorithm=signsgd", "allreduce.eta_s=0.002"]),
            ("EF-signSGD, per-hop re-compression", ["algorithm=ef_signsgd"]),
        ], seeds=(0, 1, 2), common=("nodes=8", "topology=ring", "skew=0", "optimizer.momentum=0.9"),
            columns=("per_seed",)),
        Result("marsit_mnist", "docs/results/marsit.md", [
            ("PSGD", ["algorithm=psgd"]),
            ("Marsit, K = 0", ["algorithm=marsit", "allreduce.K=0", "allreduce.eta_s=0.005"]),
            ("Marsit-30", ["algorithm=marsit", "allreduce.K=30", "allreduce.eta_s=0.005"]),
            ("Marsit-100", ["algorithm=marsit", "allreduce.K=100", "allreduce.eta_s=0.005"]),
            ("signSGD, cascading re-signing", ["algorithm=signsgd", "allreduce.eta_s=0.002"]),
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
    model by :mod:`decent8.experiments.tta` (docs/algorithms.md §12). The text between the markers
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
            ("tta_allreduce", ["algorithm=psgd", "algorithm=marsit allreduce.K=0 allreduce.eta_s=0.005",
                               "algorithm=signsgd allreduce.eta_s=0.002"],
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
