"""``decent8 report``: a sweep folder as the paper's tables and figures.

Reads ``sweep.json`` (the plan written by ``decent8 sweep``; without it, the cells are
recovered from the run folders' ``config.yaml``) and each cell's ``summary.json``,
``metrics.jsonl`` and ``partition.csv``, and writes into the sweep folder:

* ``report.md`` — a markdown table in the paper's layout: the constant row prefix
  (model / graph / nodes), the row axes (compression, skew), one column per method
  (DS, LP-DS, Choco, LP-Choco, …), each cell ``ours [paper]`` in % when the preset has
  the paper's number, plus the data each node sent (FP / LP, in the byte unit that fits);
* ``figures/accuracy_vs_skew.png`` (Figures 4–6): accuracy vs skew, one panel per
  compression, solid = full precision, dashed = 8-bit, the paper's numbers as crosses;
* ``figures/fp32_vs_int8.png``: FP32 beside 8-bit for every other setting, the mean over
  the seeds, ± s.e. where n ≥ 2, the seeds as dots;
* ``figures/validation_error.png`` (Figure 1): validation error vs epoch per cell
  (per normalization layer for the Figure 1 preset);
* ``figures/class_distribution.png`` (Figure 2): samples of each class per node, one
  panel per degree of skew.

Cells that have not finished show as ``—``; a report can be drawn while a sweep runs.
Every figure is a PNG with a PDF beside it, in the house style (:mod:`decent8.figstyle`).

The package's modules, one job each: :mod:`.load` (reading the folders), :mod:`.layout`
(rows, columns and cell values), :mod:`.table` (the markdown table), :mod:`.figures`
(the PNGs) and :mod:`.write` (``report.md``).
"""
from .figures import (groups_of, plot_accuracy_vs_skew, plot_class_distribution, plot_fp32_vs_int8,
                      plot_validation_error, sweep_figures)
from .layout import AGGREGATED, cell_value, cell_values, column_name, group_label, layout, rows_of
from .load import SWEEP_FILE, CellResult, Sweep, is_run_folder, load_runs, load_sweep
from .table import markdown_table
from .write import METRICS, build_report, compare_runs, write_report

__all__ = ["AGGREGATED", "METRICS", "SWEEP_FILE", "CellResult", "Sweep", "build_report", "cell_value", "cell_values",
           "column_name", "compare_runs", "group_label", "groups_of", "is_run_folder", "layout", "load_runs",
           "load_sweep", "markdown_table", "plot_accuracy_vs_skew", "plot_class_distribution", "plot_fp32_vs_int8",
           "plot_validation_error", "rows_of", "sweep_figures", "write_report"]
