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


#: the CPU vendor of the machine the documented digits were generated on (an Intel Xeon, family 6
#: model 207): MKL and oneDNN pick their code paths by vendor too, so an AMD CPU's AVX2 run can end
#: at other digits
REFERENCE_CPU_VENDOR = "GenuineIntel"


def cpu_vendor() -> str | None:
    """The ``vendor_id`` of /proc/cpuinfo (None where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def on_reference_cpu() -> bool:
    """True on a CPU of the documented digits' vendor (where the exact-digit tests apply)."""
    return cpu_vendor() == REFERENCE_CPU_VENDOR
