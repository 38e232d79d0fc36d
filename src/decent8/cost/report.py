"""Cost reports: FP32 vs 8-bit per layer and in total, the paper's Tables 10 and 3
reproduced, and a Figure-7-style bar chart.

:func:`cost_report` returns one JSON-ready dict::

    {"model", "norm", "batch", "dataset", "input_shape", "parameters", "algorithm", "optimizer",
     "energy_pj_per_op": {...}, "units": {...},
     "training":  {"energy_mj": {"fp32", "int8", "ratio"}, "memory_mb": {...}, "adds": {...}, "mults": {...},
                   "memory_breakdown_mb": {"fp32": {...}, "int8": {...}},
                   "energy_by_kind_mj": {"fp32": {...}, "int8": {...}},
                   "activation_by_kind_mb": {"fp32": {...}, "int8": {...}}},
     "inference": {"energy_mj", "memory_mb", "adds", "mults", "memory_breakdown_mb", "energy_by_kind_mj"},
     "layers": [{"name", "kind", "b", "c_in", "c_out", "k", "L", "p", "s", "shortcut", "in_fp32", "in_int8",
                 "train_adds", "train_mults", "infer_adds", "infer_mults",
                 "energy_uj": {"training": {"fp32", "int8"}, "inference": {...}},
                 "activation_mb": {"fp32", "int8"}}, ...],
     "communication": {...}}          # only when a run's nodes / topology / epochs are known

``ratio`` is FP32 / 8-bit (the paper's "Efficiency" column).
"""
from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any, Iterable

from ..errors import ConfigError
from ..figstyle import PALETTE, new_figure, save, set_title, styled
from .communication import communication_volume
from .counts import ModelCounts, count_model
from .energy import HOROWITZ_45NM, OpEnergy, energy_by_kind_mj, layer_energy_pj, total_energy_mj
from .memory import BYTES, MB, activation_by_kind_mb, activation_elements, inference_memory, training_memory

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

MODEL_LABELS = {"resnet20": "ResNet-20", "resnet54": "ResNet-54", "vgg11": "VGG-11", "resnet18": "ResNet-18",
                "cnn": "CNN", "mlp": "MLP"}
NORM_LABELS = {"range_bn": "RBN", "range_evonorm": "REN", "evonorm": "EvoNorm", "bn": "BN", "gn": "GN",
               "none": "ReLU"}


def _pair(fp32: float, int8: float) -> dict[str, float | None]:
    return {"fp32": fp32, "int8": int8, "ratio": (fp32 / int8) if int8 else None}


def _merge_layers(fp: ModelCounts, q: ModelCounts, costs: OpEnergy) -> list[dict[str, Any]]:
    """One row per layer of the 8-bit model (a superset of the FP32 one), FP32 figures beside."""
    fp_by_key = {(l.name, l.kind): l for l in fp.layers}
    q_by_key = {(l.name, l.kind): l for l in q.layers}
    order = q.layers + [l for l in fp.layers if (l.name, l.kind) not in q_by_key]
    rows = []
    for layer in order:
        key = (layer.name, layer.kind)
        f, g = fp_by_key.get(key), q_by_key.get(key)
        row: dict[str, Any] = {
            "name": layer.name, "kind": layer.kind, "b": layer.b, "c_in": layer.c_in, "c_out": layer.c_out,
            "k": layer.k, "L": layer.L, "p": layer.p, "s": layer.s, "shortcut": layer.shortcut,
            "in_fp32": f is not None, "in_int8": g is not None,
            "train_adds": layer.train_adds, "train_mults": layer.train_mults,
            "infer_adds": layer.infer_adds, "infer_mults": layer.infer_mults}
        row["energy_uj"] = {
            phase: {"fp32": layer_energy_pj(f, phase, "fp32", costs) / 1e6 if f is not None else 0.0,
                    "int8": layer_energy_pj(g, phase, "int8", costs) / 1e6 if g is not None else 0.0}
            for phase in ("training", "inference")}
        row["activation_mb"] = {"fp32": activation_elements(f) * BYTES["fp32"] / MB if f is not None else 0.0,
                                "int8": activation_elements(g) * BYTES["int8"] / MB if g is not None else 0.0}
        rows.append(row)
    return rows


def model_pair(model: str, norm: str | None, batch: int, dataset: str | None = None,
               width: int | None = None, image_size: int | None = None) -> tuple[ModelCounts, ModelCounts]:
    """The FP32 and the 8-bit form of ``model`` with the same norm (default: Range EvoNorm for
    the paper's models, the int8 default) traced at ``batch``."""
    from ..models.zoo import QUANTIZED_MODELS, default_norm

    if model in {"mlp"}:
        raise ConfigError("model", f"{model!r} has no 8-bit form; the cost model compares FP32 with 8-bit, "
                                   f"use one of: {', '.join(QUANTIZED_MODELS)}")
    if norm in (None, "", "auto"):
        norm = default_norm(model, "int8") if model in QUANTIZED_MODELS else None
    q = count_model(model, norm, "int8", batch, dataset, width, image_size)
    fp = count_model(model, q.norm, "fp32", batch, dataset, width, image_size)
    return fp, q


def cost_report(model: str, norm: str | None = None, batch: int = 32, dataset: str | None = None,
                width: int | None = None, algorithm: str = "choco", optimizer: str = "local",
                costs: OpEnergy = HOROWITZ_45NM, communication: dict[str, Any] | None = None,
                layers: bool = True, image_size: int | None = None) -> dict[str, Any]:
    """FP32 vs 8-bit compute energy and memory of one node per iteration (see the module doc).

    ``communication``: keyword arguments of :func:`~decent8.cost.communication.communication_volume`
    without the layout (nodes, topology, epochs, dataset_size, compression, ratio, …), computed
    for both precisions.
    """
    fp, q = model_pair(model, norm, batch, dataset, width, image_size)
    out: dict[str, Any] = {
        "model": model, "norm": fp.norm, "batch": batch, "dataset": dataset or _dataset_of(model),
        "input_shape": list(fp.input_shape), "parameters": {"fp32": fp.parameters, "int8": q.parameters},
        "algorithm": algorithm, "optimizer": optimizer, "energy_pj_per_op": costs.to_dict(),
        "units": {"energy_mj": "mJ per node per iteration (training: forward + backward of one batch)",
                  "memory_mb": "MB = 2^20 bytes per node", "communication": "GB = 10^9 bytes per node per run"},
    }
    for phase in ("training", "inference"):
        e_fp, e_q = total_energy_mj(fp, phase, costs), total_energy_mj(q, phase, costs)
        if phase == "training":
            m_fp, m_q = training_memory(fp, algorithm, optimizer), training_memory(q, algorithm, optimizer)
        else:
            m_fp, m_q = inference_memory(fp.parameters, "fp32"), inference_memory(q.parameters, "int8")
        a_fp, mu_fp = fp.total(phase)
        a_q, mu_q = q.total(phase)
        section = {
            "energy_mj": _pair(e_fp, e_q),
            "memory_mb": _pair(m_fp.total / MB, m_q.total / MB),
            "adds": _pair(a_fp, a_q), "mults": _pair(mu_fp, mu_q),
            "memory_breakdown_mb": {"fp32": m_fp.mb(), "int8": m_q.mb()},
            "energy_by_kind_mj": {"fp32": energy_by_kind_mj(fp, phase, costs),
                                  "int8": energy_by_kind_mj(q, phase, costs)},
        }
        if phase == "training":
            section["activation_by_kind_mb"] = {"fp32": activation_by_kind_mb(fp), "int8": activation_by_kind_mb(q)}
        out[phase] = section
    if layers:
        out["layers"] = _merge_layers(fp, q, costs)
    if communication is not None:
        out["communication"] = communication_report(fp, model, width, dataset, communication, image_size)
    return out


def _dataset_of(model: str) -> str:
    from .counts import default_dataset

    return default_dataset(model)


def communication_report(fp: ModelCounts, model: str, width: int | None, dataset: str | None,
                         opts: dict[str, Any], image_size: int | None = None) -> dict[str, Any]:
    """Communication volume at FP32 and 8-bit for a run (see :mod:`.communication`)."""
    from ..layout import ParamLayout
    from .counts import build_for_cost

    out: dict[str, Any] = {}
    for precision in ("fp32", "int8"):
        net, _, _ = build_for_cost(model, fp.norm, precision, dataset, width, image_size)
        vol = communication_volume(ParamLayout.from_module(net), precision=precision, **opts)
        out[precision] = vol.to_dict()
    for key in ("paper_gb", "real_gb"):
        a, b = out["fp32"][key], out["int8"][key]
        out[key] = {"fp32": a, "int8": b, "ratio": (a / b) if a is not None and b else None}
    return out


# --------------------------------------------------------------------------- tables


def _num(v: Any, digits: int = 2) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        if v != 0 and abs(v) < 10 ** -digits:
            return f"{v:.3g}"
        return f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def totals_rows(report: dict[str, Any]) -> list[list[Any]]:
    """``[quantity, FP32, 8-bit, FP32/8-bit]`` rows of the totals."""
    rows: list[list[Any]] = []
    for phase in ("training", "inference"):
        sec = report[phase]
        for key, label, digits in (("energy_mj", "energy (mJ)", 3), ("memory_mb", "memory (MB)", 2),
                                   ("adds", "additions", 0), ("mults", "multiplications", 0)):
            p = sec[key]
            rows.append([f"{phase} {label}", _num(p["fp32"], digits), _num(p["int8"], digits), _num(p["ratio"], 2)])
        if phase == "training":
            for comp, mb in sec["memory_breakdown_mb"]["fp32"].items():
                if comp == "total":
                    continue
                q = sec["memory_breakdown_mb"]["int8"][comp]
                rows.append([f"  memory: {comp.replace('_', ' ')} (MB)", _num(mb), _num(q),
                             _num(mb / q if q else None)])
    comm = report.get("communication")
    if comm:
        for key, label in (("paper_gb", "data per node, paper convention (GB)"),
                           ("real_gb", "data per node, real payload (GB)")):
            p = comm[key]
            rows.append([label, _num(p["fp32"], 4), _num(p["int8"], 4), _num(p["ratio"], 2)])
    return rows


LAYER_HEADERS = ["layer", "kind", "C_in", "C_out", "K", "L", "S", "train adds", "train mults",
                 "train µJ fp32", "train µJ int8", "infer µJ fp32", "infer µJ int8", "act MB fp32", "act MB int8"]


def layer_rows(report: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for r in report.get("layers", []):
        conv = r["kind"] == "conv"
        rows.append([r["name"], r["kind"], r["c_in"] or "", r["c_out"] or "", r["k"] if conv else "",
                     r["L"] if r["kind"] not in ("linear", "weight_quant") else "", r["s"] if conv else "",
                     _num(r["train_adds"], 0), _num(r["train_mults"], 0),
                     _num(r["energy_uj"]["training"]["fp32"], 2), _num(r["energy_uj"]["training"]["int8"], 3),
                     _num(r["energy_uj"]["inference"]["fp32"], 2), _num(r["energy_uj"]["inference"]["int8"], 3),
                     _num(r["activation_mb"]["fp32"], 3), _num(r["activation_mb"]["int8"], 3)])
    return rows


def title(report: dict[str, Any]) -> str:
    e = report["energy_pj_per_op"]
    label = MODEL_LABELS.get(report["model"], report["model"])
    return (f"{label}, {report['norm']}, batch {report['batch']} per node, "
            f"{report['dataset']} {'x'.join(str(s) for s in report['input_shape'])}, {report['algorithm']} — per node "
            f"per iteration (pJ per op: FP32 add {e['fp32_add']:g}, mult {e['fp32_mult']:g}; INT8 add "
            f"{e['int8_add']:g}, mult {e['int8_mult']:g})")


def markdown_table(headers: list[str], rows: Iterable[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(lines)


def to_markdown(report: dict[str, Any], layers: bool = True) -> str:
    parts = [f"### {title(report)}", "", markdown_table(["quantity", "FP32", "8-bit", "FP32 / 8-bit"],
                                                        totals_rows(report))]
    if layers and report.get("layers"):
        parts += ["", markdown_table(LAYER_HEADERS, layer_rows(report))]
    return "\n".join(parts) + "\n"


def to_text(report: dict[str, Any], layers: bool = True) -> str:
    from ..cli.common import format_table

    parts = [title(report), ""]
    if layers and report.get("layers"):
        parts += [format_table(LAYER_HEADERS, layer_rows(report)), ""]
    parts.append(format_table(["quantity", "FP32", "8-bit", "FP32 / 8-bit"], totals_rows(report)))
    return "\n".join(parts) + "\n"


def to_csv(report: dict[str, Any]) -> str:
    """Long form: ``section,phase,item,fp32,int8,ratio``."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["section", "phase", "item", "fp32", "int8", "ratio"])
    for phase in ("training", "inference"):
        sec = report[phase]
        for key in ("energy_mj", "memory_mb", "adds", "mults"):
            p = sec[key]
            w.writerow(["total", phase, key, p["fp32"], p["int8"], p["ratio"]])
        for comp, v in sec["memory_breakdown_mb"]["fp32"].items():
            q = sec["memory_breakdown_mb"]["int8"][comp]
            w.writerow(["memory_mb", phase, comp, v, q, v / q if q else None])
        kinds = list(dict.fromkeys(list(sec["energy_by_kind_mj"]["fp32"]) + list(sec["energy_by_kind_mj"]["int8"])))
        for kind in kinds:
            a = sec["energy_by_kind_mj"]["fp32"].get(kind, 0.0)
            b = sec["energy_by_kind_mj"]["int8"].get(kind, 0.0)
            w.writerow(["energy_mj_by_kind", phase, kind, a, b, a / b if b else None])
    for r in report.get("layers", []):
        for phase in ("training", "inference"):
            e = r["energy_uj"][phase]
            w.writerow(["layer_energy_uj", phase, f"{r['name']}:{r['kind']}", e["fp32"], e["int8"],
                        e["fp32"] / e["int8"] if e["int8"] else None])
        a = r["activation_mb"]
        w.writerow(["layer_activation_mb", "training", f"{r['name']}:{r['kind']}", a["fp32"], a["int8"],
                    a["fp32"] / a["int8"] if a["int8"] else None])
    comm = report.get("communication")
    if comm:
        for key in ("paper_gb", "real_gb"):
            p = comm[key]
            w.writerow(["communication_gb", "training", key, p["fp32"], p["int8"], p["ratio"]])
    return buf.getvalue()


# --------------------------------------------------------------- paper reproduction


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
    from ..layout import ParamLayout
    from ..topology import make_topology
    from .counts import build_for_cost

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


# --------------------------------------------------------------------------- figure

_COMPONENT_COLORS = dict(zip(("weights", "gradients", "optimizer", "algorithm_buffers", "activations"), PALETTE))


@styled
def plot_report(report: dict[str, Any], path: str | os.PathLike) -> Path:
    """Figure 7 of the paper for ``report``: where training memory and energy go, FP32 vs 8-bit.

    In the house style (:mod:`decent8.figstyle`), as the PNG ``path`` and a PDF beside it,
    each written atomically. Returns the path.
    """
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ConfigError("--plot", f"writes a PNG; give a path ending in .png, got {os.fspath(path)!r}")
    if path.exists() and path.is_dir():
        raise ConfigError("--plot", f"{os.fspath(path)!r} is a folder; give a file path ending in .png")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError("--plot", f"folder {os.fspath(parent)!r} does not exist")

    sec = report["training"]
    fig = new_figure(11, 4.6)
    ax_m, ax_e, ax_i = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1.2, 1.2, 1.0]})
    labels = ["FP32", "8-bit"]
    # memory by component
    bottoms = [0.0, 0.0]
    for comp, color in _COMPONENT_COLORS.items():
        vals = [sec["memory_breakdown_mb"][p][comp] for p in ("fp32", "int8")]
        if not any(vals):
            continue
        ax_m.bar(labels, vals, bottom=bottoms, color=color, label=comp.replace("_", " "))
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    for x, total in enumerate(bottoms):
        ax_m.annotate(f"{total:.1f} MB", (x, total), ha="center", va="bottom", fontsize=8)
    ax_m.set_ylabel("training memory per node (MB = 2²⁰ B)")
    ax_m.set_title("memory")
    ax_m.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncols=2)
    # energy by layer kind (training)
    kinds = list(dict.fromkeys(list(sec["energy_by_kind_mj"]["fp32"]) + list(sec["energy_by_kind_mj"]["int8"])))
    bottoms = [0.0, 0.0]
    for i, kind in enumerate(kinds):
        vals = [sec["energy_by_kind_mj"][p].get(kind, 0.0) for p in ("fp32", "int8")]
        ax_e.bar(labels, vals, bottom=bottoms, color=PALETTE[i % len(PALETTE)], label=kind)
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    for x, total in enumerate(bottoms):
        ax_e.annotate(f"{total:.3g} mJ", (x, total), ha="center", va="bottom", fontsize=8)
    ax_e.set_ylabel("training energy per node per iteration (mJ)")
    ax_e.set_title(f"compute energy (×{sec['energy_mj']['ratio']:.1f})")
    ax_e.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncols=2)
    # inference
    inf = report["inference"]
    x = [0, 1]
    ax_i.bar([v - 0.2 for v in x], [inf["memory_mb"]["fp32"], inf["memory_mb"]["int8"]], width=0.4,
             color=PALETTE[0], label="weights (MB)")
    ax_i2 = ax_i.twinx()
    ax_i2.bar([v + 0.2 for v in x], [inf["energy_mj"]["fp32"], inf["energy_mj"]["int8"]], width=0.4,
              color=PALETTE[1], label="energy (mJ)")
    ax_i.set_xticks(x, labels)
    ax_i.set_ylabel("inference memory (MB)")
    ax_i2.set_ylabel("inference energy per batch (mJ)")
    ax_i.set_title("inference")
    h1, l1 = ax_i.get_legend_handles_labels()
    h2, l2 = ax_i2.get_legend_handles_labels()
    ax_i.legend(h1 + h2, l1 + l2, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncols=2)
    for ax in (ax_m, ax_e, ax_i, ax_i2):
        ax.set_ylim(0, ax.get_ylim()[1] * 1.12)
    for ax in (ax_m, ax_e, ax_i):
        ax.grid(False, axis="x")
    ax_i2.grid(False)
    ax_i2.spines["right"].set_visible(True)
    set_title(fig, title(report).split(" — ")[0] + " — per node per iteration (the paper's Figure 7)")
    save(fig, path)
    return path


__all__ = ["PAPER_TABLE10", "PAPER_TABLE3", "cost_report", "model_pair", "communication_report", "totals_rows",
           "layer_rows", "to_markdown", "to_text", "to_csv", "table10", "table3", "table10_markdown",
           "table3_markdown", "rows_csv", "plot_report", "markdown_table"]
