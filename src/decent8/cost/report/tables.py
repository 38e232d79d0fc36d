"""A cost report as tables: markdown, aligned text and long-form CSV."""
from __future__ import annotations

import csv
import io
from typing import Any, Iterable

from ...text_table import format_table

MODEL_LABELS = {"resnet20": "ResNet-20", "resnet54": "ResNet-54", "vgg11": "VGG-11", "resnet18": "ResNet-18",
                "cnn": "CNN", "mlp": "MLP"}
NORM_LABELS = {"range_bn": "RBN", "range_evonorm": "REN", "evonorm": "EvoNorm", "bn": "BN", "gn": "GN",
               "none": "ReLU"}



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
