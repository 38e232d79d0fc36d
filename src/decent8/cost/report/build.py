"""The cost report of one model: FP32 and 8-bit traced side by side, per layer and in
total, with the communication of a run when its nodes / topology / epochs are known."""
from __future__ import annotations

from typing import Any

from ...algorithms.registry import DEFAULT_ALGORITHM
from ...errors import ConfigError
from ..communication import communication_volume
from ..counts import ModelCounts, count_model
from ..energy import HOROWITZ_45NM, OpEnergy, energy_by_kind_mj, layer_energy_pj, total_energy_mj
from ..memory import BYTES, MB, activation_by_kind_mb, activation_elements, inference_memory, training_memory
from ...models.zoo import QUANTIZED_MODELS, default_norm
from ..counts import default_dataset
from ...layout import ParamLayout
from ..counts import build_for_cost


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

    if model not in QUANTIZED_MODELS:
        raise ConfigError("model", f"{model!r} has no 8-bit form; the cost model compares FP32 with 8-bit, "
                                   f"use one of: {', '.join(QUANTIZED_MODELS)}")
    if norm in (None, "", "auto"):
        norm = default_norm(model, "int8") if model in QUANTIZED_MODELS else None
    q = count_model(model, norm, "int8", batch, dataset, width, image_size)
    fp = count_model(model, q.norm, "fp32", batch, dataset, width, image_size)
    return fp, q


def cost_report(model: str, norm: str | None = None, batch: int = 32, dataset: str | None = None,
                width: int | None = None, algorithm: str = DEFAULT_ALGORITHM, optimizer: str = "local",
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

    return default_dataset(model)


def communication_report(fp: ModelCounts, model: str, width: int | None, dataset: str | None,
                         opts: dict[str, Any], image_size: int | None = None) -> dict[str, Any]:
    """Communication volume at FP32 and 8-bit for a run (see :mod:`.communication`)."""

    out: dict[str, Any] = {}
    for precision in ("fp32", "int8"):
        net, _, _ = build_for_cost(model, fp.norm, precision, dataset, width, image_size)
        vol = communication_volume(ParamLayout.from_module(net), precision=precision, **opts)
        out[precision] = vol.to_dict()
    for key in ("paper_gb", "real_gb"):
        a, b = out["fp32"][key], out["int8"][key]
        out[key] = {"fp32": a, "int8": b, "ratio": (a / b) if a is not None and b else None}
    return out
