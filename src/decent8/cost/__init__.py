"""Hardware cost model of the paper's Section 5: compute, energy, memory and communication.

* :mod:`.counts` — per-layer addition / multiplication counts (Tables 7–9) from a traced
  forward pass of a real model;
* :mod:`.energy` — energy from the counts with Horowitz's 45 nm per-op figures;
* :mod:`.memory` — training memory (weights, gradients, optimizer, algorithm buffers,
  activations) and inference memory (weights) per node, FP32 vs 8-bit;
* :mod:`.communication` — data per node over a run: the paper's Table 3 convention and
  decent8's real payload;
* :mod:`.report` — FP32 vs 8-bit reports, Tables 10 and 3 reproduced, Figure 7.

``decent8 cost`` is the command line (docs/cost_model.md).
"""
from .communication import CommunicationVolume, communication_volume, iterations, paper_message_bytes
from .counts import Layer, ModelCounts, count_model, layer_ops, trace_model
from .energy import FP32_ADD_PJ, FP32_MULT_PJ, HOROWITZ_45NM, INT8_ADD_PJ, INT8_MULT_PJ, OpEnergy, energy_pj, total_energy_mj
from .memory import MB, MemoryBreakdown, inference_memory, training_memory
from .report import PAPER_TABLE3, PAPER_TABLE10, cost_report, plot_report, table3, table10

__all__ = [
    "CommunicationVolume", "communication_volume", "iterations", "paper_message_bytes",
    "Layer", "ModelCounts", "count_model", "layer_ops", "trace_model",
    "FP32_ADD_PJ", "FP32_MULT_PJ", "INT8_ADD_PJ", "INT8_MULT_PJ", "HOROWITZ_45NM", "OpEnergy", "energy_pj",
    "total_energy_mj", "MB", "MemoryBreakdown", "inference_memory", "training_memory",
    "PAPER_TABLE3", "PAPER_TABLE10", "cost_report", "plot_report", "table3", "table10",
]
