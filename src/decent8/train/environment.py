"""What produced a run's numbers besides its config and seed: library versions and kernels.

A run is reproducible from its saved config and seed *on the same kernels*: CPU
kernels for AVX2 and AVX-512 round differently (the sums of a convolution are
ordered differently), which moves the digits main job's accuracies by 0.1–0.3 points
(docs/execution.md, "Machine-dependent digits"). ``summary.json`` therefore
records the kernel selection next to the numbers, so a reproduction knows whether
to expect the same digits or the same statistics.
"""
from __future__ import annotations

import os
import platform

import numpy as np
import torch


def run_environment(device: torch.device) -> dict[str, object]:
    """Library versions (decent8's is the summary's ``decent8_version``), the CPU kernel
    family torch dispatched to (``AVX2``, ``AVX512``, …; ``ATEN_CPU_CAPABILITY`` selects it),
    the thread count and, on CUDA, the GPU and whether its float32 convolutions and matrix
    products may run in TF32 (PyTorch's switches; by default convolutions may, products not)."""
    env: dict[str, object] = {
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "kernel_selection": {k: os.environ[k] for k in ("ATEN_CPU_CAPABILITY", "DNNL_MAX_CPU_ISA",
                                                        "MKL_ENABLE_INSTRUCTIONS") if k in os.environ},
    }
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
        env["cuda"] = torch.version.cuda
        env["tf32"] = {"convolutions": bool(torch.backends.cudnn.allow_tf32),
                       "matmul": bool(torch.backends.cuda.matmul.allow_tf32)}
    return env
