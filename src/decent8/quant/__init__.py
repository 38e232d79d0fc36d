"""Low-precision (8-bit) training, Banner et al. 2018 style, fake-quantized (SPEC §5).

* :mod:`.quantizer` — Q_b (deterministic / stochastic rounding, straight-through
  backward), per-node ranges, the gradient quantizer, :class:`QuantSpec`.
* :mod:`.layers` — 8-bit conv / linear with gradient bifurcation, the activation
  quantizer with running min/max, the quantized residual add (plain per-model modules).
* :mod:`.transform` — :func:`to_low_precision`, the module transform that swaps a
  float model's layers for their 8-bit forms (any ``nn.Module``).
* :mod:`.int8_matmul` — a real int8 × int8 → int32 matmul (``torch._int_mm``) equal to
  the fake-quantized product (benchmarked in ``benchmarks/int8_matmul.py``).

The normalization-activation layers (EvoNorm-S0, Range EvoNorm, Range BN, …) are in
:mod:`decent8.models.norms`; ``precision="int8"`` applies :func:`to_low_precision` to the model.
"""
from .int8_matmul import int8_codes, int8_linear
from .layers import ActQuant, Add, QAdd, QConv2d, QLinear, set_stochastic
from .transform import to_low_precision
from .quantizer import (
    MAX_BITS,
    MIN_BITS,
    MIN_SCALE,
    QuantSpec,
    check_bits,
    fake_quantize,
    num_levels,
    quantize_grad,
    quantize_per_node,
    quantize_ste,
    quantize_tensor,
    sample_mean_range,
)

__all__ = [
    "ActQuant", "Add", "QAdd", "QConv2d", "QLinear", "set_stochastic", "to_low_precision", "int8_codes", "int8_linear",
    "MAX_BITS", "MIN_BITS", "MIN_SCALE", "QuantSpec", "check_bits", "fake_quantize", "num_levels",
    "quantize_grad", "quantize_per_node", "quantize_ste", "quantize_tensor", "sample_mean_range",
]
