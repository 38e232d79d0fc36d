"""The CPU kernels of the documented numbers (AVX2), selected before the first kernel runs."""
from __future__ import annotations

import os

#: Environment that selects the AVX2 kernels of ATen, oneDNN and MKL (the documented numbers' kernels).
REFERENCE_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "DNNL_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


def use_reference_kernels() -> bool:
    """Select :data:`REFERENCE_KERNELS` for this process and its children; True when ATen runs them.

    Must run before the first CPU kernel (each library fixes its choice then); False on a CPU
    without AVX2 or when ATen already chose (the numbers may then differ in the last digits).
    """
    os.environ.update(REFERENCE_KERNELS)
    import torch
    return torch.backends.cpu.get_cpu_capability() == "AVX2"
