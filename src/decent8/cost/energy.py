"""Compute energy from op counts (paper Section 5, Table 10).

Energy per operation at 45 nm (Horowitz, ISSCC 2014, the paper's source), in pJ:

============  =====  ======
op            FP32   INT8
============  =====  ======
addition      0.9    0.03
multiply      3.7    0.2
============  =====  ======

A full-precision model's ops are costed at the FP32 figures, an 8-bit model's at the
INT8 ones (the paper: "integer quantization ... results in integer operations for our
low precision models and float operations for the baseline models"). Override any of
them with an :class:`OpEnergy` (``decent8 cost --fp32-add …``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..errors import ConfigError, choice_error
from .counts import Layer, ModelCounts

#: Horowitz (2014), 45 nm, pJ per operation.
FP32_ADD_PJ = 0.9
FP32_MULT_PJ = 3.7
INT8_ADD_PJ = 0.03
INT8_MULT_PJ = 0.2

PRECISIONS = ("fp32", "int8")
PHASES = ("training", "inference")
#: 1 mJ in pJ
PJ_PER_MJ = 1e9


@dataclass(frozen=True)
class OpEnergy:
    """Energy per addition / multiplication (pJ) at each precision."""

    fp32_add: float = FP32_ADD_PJ
    fp32_mult: float = FP32_MULT_PJ
    int8_add: float = INT8_ADD_PJ
    int8_mult: float = INT8_MULT_PJ

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError("--" + name.replace("_", "-"),
                                  f"energy per op must be a finite number ≥ 0 pJ, got {value!r}")

    def per_op(self, precision: str) -> tuple[float, float]:
        """``(pJ per add, pJ per mult)`` at ``precision``."""
        if precision == "fp32":
            return self.fp32_add, self.fp32_mult
        if precision == "int8":
            return self.int8_add, self.int8_mult
        raise choice_error("precision", precision, PRECISIONS)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


#: The paper's figures.
HOROWITZ_45NM = OpEnergy()


def energy_pj(adds: int, mults: int, precision: str, costs: OpEnergy = HOROWITZ_45NM) -> float:
    """Energy (pJ) of ``adds`` additions and ``mults`` multiplications at ``precision``."""
    a, m = costs.per_op(precision)
    return adds * a + mults * m


def layer_energy_pj(layer: Layer, phase: str, precision: str, costs: OpEnergy = HOROWITZ_45NM) -> float:
    adds, mults = layer.ops(phase)
    return energy_pj(adds, mults, precision, costs)


def total_energy_mj(counts: ModelCounts, phase: str, costs: OpEnergy = HOROWITZ_45NM,
                    precision: str | None = None) -> float:
    """Energy of one iteration (training: forward + backward; inference: forward) of one
    node's batch, in mJ; ``precision`` defaults to the model's own."""
    prec = precision or counts.precision
    return sum(layer_energy_pj(layer, phase, prec, costs) for layer in counts.layers) / PJ_PER_MJ


def energy_by_kind_mj(counts: ModelCounts, phase: str, costs: OpEnergy = HOROWITZ_45NM,
                      precision: str | None = None) -> dict[str, float]:
    """Energy per layer kind (mJ), kinds in first-seen order, zero-energy kinds left out."""
    prec = precision or counts.precision
    out: dict[str, float] = {}
    for layer in counts.layers:
        e = layer_energy_pj(layer, phase, prec, costs) / PJ_PER_MJ
        if e:
            out[layer.kind] = out.get(layer.kind, 0.0) + e
    return out


__all__ = ["FP32_ADD_PJ", "FP32_MULT_PJ", "INT8_ADD_PJ", "INT8_MULT_PJ", "PRECISIONS", "PHASES", "PJ_PER_MJ",
           "OpEnergy", "HOROWITZ_45NM", "energy_pj", "layer_energy_pj", "total_energy_mj", "energy_by_kind_mj"]
