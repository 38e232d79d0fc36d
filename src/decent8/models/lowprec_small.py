"""The digits CNN with a norm-activation choice and an 8-bit form.

Same parameter names and shapes as :class:`~decent8.models.small.DigitsCNN` (plus the
norm layers' parameters when ``norm`` is not ``none``), so with ``norm=none`` the
int8 model has exactly the fp32 model's layout. With ``norm=none`` and no ``spec``
:func:`~decent8.models.make_model` returns the plain :class:`DigitsCNN`.
"""
from __future__ import annotations

import torch

from ..nn.norms import make_norm
from ..quant.quantizer import QuantSpec
from .blocks import conv, linear
from .small import DigitsCNN


class LowPrecDigitsCNN(DigitsCNN):
    """conv3×3(c) → norm-act → conv3×3(2c) → norm-act → maxpool2 → linear; 8-bit with ``spec``."""

    def __init__(self, in_channels: int = 1, num_classes: int = 10, width: int = 16, image_size: int = 8,
                 norm: str = "none", spec: QuantSpec | None = None) -> None:
        super().__init__(in_channels, num_classes, width, image_size)
        self.conv1 = conv(in_channels, width, 3, 1, 1, bias=True, spec=spec)
        self.conv2 = conv(width, 2 * width, 3, 1, 1, bias=True, spec=spec)
        self.fc = linear(2 * width * (image_size // 2) ** 2, num_classes, spec=spec)
        self.act1 = make_norm(norm, width, spec, grad_quant=False)  # feeds the quantized conv2
        self.act2 = make_norm(norm, 2 * width, spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act1(self.conv1(x))
        x = self.pool(self.act2(self.conv2(x)))
        return self.fc(self.flatten(x))


__all__ = ["LowPrecDigitsCNN"]
