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

The package's modules, one job each: :mod:`.build` (the report dict), :mod:`.tables`
(markdown / text / CSV), :mod:`.paper` (Tables 10 and 3 reproduced) and :mod:`.figure`
(Figure 7).
"""
from .build import communication_report, cost_report, model_pair
from .figure import plot_report
from .paper import PAPER_TABLE3, PAPER_TABLE10, rows_csv, table3, table3_markdown, table10, table10_markdown
from .tables import layer_rows, markdown_table, to_csv, to_markdown, to_text, totals_rows

__all__ = ["PAPER_TABLE10", "PAPER_TABLE3", "cost_report", "model_pair", "communication_report", "totals_rows",
           "layer_rows", "to_markdown", "to_text", "to_csv", "table10", "table3", "table10_markdown",
           "table3_markdown", "rows_csv", "plot_report", "markdown_table"]
