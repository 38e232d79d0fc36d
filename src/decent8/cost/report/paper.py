"""The paper's Tables 10 (memory and energy) and 3 (data per node) reproduced: ours beside
the paper's numbers."""
from __future__ import annotations

import csv
import io
from typing import Any

from ..communication import communication_volume
from ..energy import HOROWITZ_45NM, OpEnergy
from .build import cost_report
from .tables import MODEL_LABELS, NORM_LABELS, _num, markdown_table
from ...layout import ParamLayout
from ...topology import make_topology
from ..counts import build_for_cost


#: Table 10 of the paper: (phase, model, norm) → {"memory_mb": (FP32, 8-bit), "energy_mj": (FP32, 8-bit),
#: "memory_ratio", "energy_ratio"} — batch 32 per node, per iteration, Choco-SGD.
PAPER_TABLE10: dict[tuple[str, str, str], dict[str, tuple[float, float] | float]] = {
    ("training", "resnet20", "range_bn"): {"memory_mb": (170.60, 46.15), "memory_ratio": 3.70,
                                           "energy_mj": (68.75, 3.45), "energy_ratio": 19.93},
    ("training", "resnet20", "range_evonorm"): {"memory_mb": (124.60, 35.43), "memory_ratio": 3.52,
                                                "energy_mj": (68.82, 3.45), "energy_ratio": 19.93},
    ("training", "resnet54", "range_bn"): {"memory_mb": (424.85, 117.05), "memory_ratio": 3.63,
                                           "energy_mj": (392.55, 19.69), "energy_ratio": 19.94},
    ("training", "resnet54", "range_evonorm"): {"memory_mb": (308.85, 88.05), "memory_ratio": 3.51,
                                                "energy_mj": (392.95, 19.71), "energy_ratio": 19.9},
    ("training", "vgg11", "range_bn"): {"memory_mb": (300.48, 210.95), "memory_ratio": 1.42,
                                        "energy_mj": (173.56, 8.69), "energy_ratio": 19.97},
    ("training", "vgg11", "range_evonorm"): {"memory_mb": (263.48, 201.70), "memory_ratio": 1.31,
                                             "energy_mj": (173.61, 8.70), "energy_ratio": 19.67},
    ("inference", "resnet20", "range_bn"): {"memory_mb": (1.04, 0.26), "memory_ratio": 4,
                                            "energy_mj": (22.92, 1.16), "energy_ratio": 19.93},
    ("inference", "resnet20", "range_evonorm"): {"memory_mb": (1.04, 0.26), "memory_ratio": 4,
                                                 "energy_mj": (22.96, 1.16), "energy_ratio": 19.78},
    ("inference", "resnet54", "range_bn"): {"memory_mb": (2.89, 0.72), "memory_ratio": 4,
                                            "energy_mj": (130.85, 6.60), "energy_ratio": 19.82},
    ("inference", "resnet54", "range_evonorm"): {"memory_mb": (2.89, 0.72), "memory_ratio": 4,
                                                 "energy_mj": (131.07, 6.61), "energy_ratio": 19.82},
    ("inference", "vgg11", "range_bn"): {"memory_mb": (36.22, 9.01), "memory_ratio": 4,
                                         "energy_mj": (57.85, 2.90), "energy_ratio": 19.96},
    ("inference", "vgg11", "range_evonorm"): {"memory_mb": (36.22, 9.01), "memory_ratio": 4,
                                              "energy_mj": (57.88, 2.90), "energy_ratio": 19.96},
}

#: Table 3 "Data (GB)" per node over the run: (model, nodes, topology, compression %) → (FP32, 8-bit).
PAPER_TABLE3: dict[tuple[str, int, str, int], tuple[float, float]] = {
    ("resnet20", 8, "directed_ring", 0): (42.85, 10.71),
    ("resnet20", 8, "directed_ring", 99): (0.651, 0.163),
    ("resnet20", 16, "directed_ring", 0): (21.21, 5.301),
    ("resnet20", 16, "directed_ring", 90): (3.177, 0.794),
    ("resnet54", 8, "directed_ring", 0): (119.2, 29.81),
    ("resnet54", 8, "directed_ring", 99): (1.808, 0.452),
    ("vgg11", 16, "torus", 0): (744.5, 186.1),
    ("vgg11", 16, "torus", 99): (8.120, 2.030),
}


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:+.2f}"


def _diff(ours: float | None, paper: float | None) -> float | None:
    if ours is None or paper is None or paper == 0:
        return None
    return 100.0 * (ours - paper) / paper


def table10(costs: OpEnergy = HOROWITZ_45NM, batch: int = 32) -> list[dict[str, Any]]:
    """Table 10 reproduced: one row per (phase, model, norm, quantity) with ours, paper, diff %."""
    rows = []
    cache: dict[tuple[str, str], dict[str, Any]] = {}
    for (phase, model, norm), paper in PAPER_TABLE10.items():
        rep = cache.get((model, norm))
        if rep is None:
            rep = cache[(model, norm)] = cost_report(model, norm, batch, costs=costs, layers=False)
        sec = rep[phase]
        for quantity, key, pkey in (("memory MB FP32", ("memory_mb", "fp32"), ("memory_mb", 0)),
                                    ("memory MB 8-bit", ("memory_mb", "int8"), ("memory_mb", 1)),
                                    ("memory efficiency", ("memory_mb", "ratio"), ("memory_ratio", None)),
                                    ("energy mJ FP32", ("energy_mj", "fp32"), ("energy_mj", 0)),
                                    ("energy mJ 8-bit", ("energy_mj", "int8"), ("energy_mj", 1)),
                                    ("energy efficiency", ("energy_mj", "ratio"), ("energy_ratio", None))):
            ours = sec[key[0]][key[1]]
            pv = paper[pkey[0]]
            pval = pv[pkey[1]] if pkey[1] is not None else pv  # type: ignore[index]
            rows.append({"phase": phase, "model": model, "norm": norm, "quantity": quantity, "ours": ours,
                         "paper": float(pval), "diff_pct": _diff(ours, float(pval))})  # type: ignore[arg-type]
    return rows


def table3(epochs: int = 200, batch: int = 32, dataset_size: int = 50000) -> list[dict[str, Any]]:
    """Table 3 "Data (GB)" reproduced (paper convention) with decent8's real payload beside it."""

    rows = []
    for (model, nodes, topo_name, comp), paper in PAPER_TABLE3.items():
        topo = make_topology(topo_name, nodes)
        for i, precision in enumerate(("fp32", "int8")):
            net, _, _ = build_for_cost(model, None, precision)
            layout = ParamLayout.from_module(net)
            name = "identity" if comp == 0 else "topk"
            vol = communication_volume(layout, nodes, topo, epochs, dataset_size, batch, compression=name,
                                       ratio=comp / 100 if comp else 0.99, precision=precision)
            rows.append({"model": model, "nodes": nodes, "topology": topo_name, "compression_pct": comp,
                         "precision": precision, "parameters": layout.dim, "iterations": vol.iterations,
                         "ours_gb": vol.paper_gb, "paper_gb": paper[i], "diff_pct": _diff(vol.paper_gb, paper[i]),
                         "real_gb": vol.real_gb, "wire": vol.wire_compression,
                         "message_bytes": vol.real_message_bytes, "out_degree": vol.mean_out_degree})
    return rows


def table10_markdown(rows: list[dict[str, Any]]) -> str:
    body = [[r["phase"], MODEL_LABELS[r["model"]], NORM_LABELS[r["norm"]], r["quantity"], _num(r["ours"], 2),
             _num(r["paper"], 2), _pct(r["diff_pct"])] for r in rows]
    return markdown_table(["phase", "model", "norm", "quantity", "ours", "paper", "diff %"], body) + "\n"


def table3_markdown(rows: list[dict[str, Any]]) -> str:
    body = [[MODEL_LABELS[r["model"]], r["nodes"], r["topology"], r["compression_pct"],
             "FP" if r["precision"] == "fp32" else "LP (8-bit)", _num(r["parameters"], 0), _num(r["iterations"], 0),
             _num(r["ours_gb"], 4), _num(r["paper_gb"], 3), _pct(r["diff_pct"]), _num(r["real_gb"], 4),
             r["wire"]] for r in rows]
    return markdown_table(["model", "n", "graph", "comp. %", "precision", "params", "iterations",
                           "ours GB (paper convention)", "paper GB", "diff %", "real payload GB", "wire format"],
                          body) + "\n"


def rows_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()
