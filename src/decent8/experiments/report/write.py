"""``report.md`` written into a sweep folder (or a comparison folder): the table, the
findings checked, the figures."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Sequence

from ...atomic import atomic_write_text
from ...own_files import mark_markdown, refuse_foreign
from .. import findings
from .figures import plot_accuracy_vs_skew, plot_class_distribution, plot_fp32_vs_int8, plot_validation_error, \
    sweep_figures
from .layout import _mean, group_label
from .load import CellResult, Sweep, _config_value, load_runs, load_sweep
from .table import markdown_table, regression_table
from .rounds import rounds_section

METRICS = {"mean_node": "mean_node_accuracy", "averaged": "averaged_model_accuracy"}


def build_report(folder: str | os.PathLike, metric: str = "mean_node_accuracy", figures: bool = True,
                 title: str | None = None) -> tuple[str, Path]:
    """Write ``report.md`` and the figures into the sweep folder; returns (markdown, report path).
    ``title``: the heading and figure titles (default: the sweep's, or a description of it)."""
    sw = load_sweep(folder)
    if title:
        sw.title = title
    return write_report(sw, Path(folder), metric, figures)


def compare_runs(paths: Sequence[str | os.PathLike], out: str | os.PathLike, metric: str = "mean_node_accuracy",
                 figures: bool = True, title: str | None = None) -> tuple[str, Path]:
    """Arbitrary run folders compared: one table, curves on shared axes, written to ``out``.

    Nothing the user had in ``out`` changes: everything is written to a temporary folder
    inside it first; if any of those files already exists in ``out`` and was not written by
    decent8 (:mod:`decent8.own_files`), the comparison is refused in one line naming it and
    ``out`` is left as it was; otherwise the files are moved into place."""
    sw = load_runs(paths, title=title)
    out = Path(out)
    refuse_foreign([out / "report.md"], "--out")   # known before anything is drawn
    out.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".decent8-compare-", dir=out))
    try:
        text, staged = write_report(sw, stage, metric, figures)
        listing = "\n".join(["", "## Runs", ""] + [f"* `{c.path}` — " + (group_label(c.labels) or "(same config)")
                                                    + (f", seed {_config_value(c.config, 'seed')}" if c.config else "")
                                                    for c in sw.cells]) + "\n"
        atomic_write_text(staged, mark_markdown(text + listing))
        moves = [(f, out / f.relative_to(stage)) for f in sorted(stage.rglob("*")) if f.is_file()]
        refuse_foreign([t for _, t in moves], "--out")
        for _, t in moves:    # a file where a folder goes (out/figures) is the user's too
            for parent in t.relative_to(out).parents:
                if str(parent) != "." and (out / parent).exists() and not (out / parent).is_dir():
                    refuse_foreign([out / parent], "--out")
        for f, t in moves:
            t.parent.mkdir(parents=True, exist_ok=True)
            os.replace(f, t)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return text, out / staged.name


def _setting(c: CellResult, key: str) -> Any:
    """A cell's value of config ``key`` (its config.yaml, else its sweep label)."""
    v = _config_value(c.config, key)
    return c.labels.get(key) if v is None else v


def write_report(sw: Sweep, folder: Path, metric: str = "mean_node_accuracy",
                 figures: bool = True) -> tuple[str, Path]:
    table, deltas = markdown_table(sw, metric)
    finished = sum(1 for c in sw.cells if c.summary)
    what = {"mean_node_accuracy": "mean over nodes of each node's own model",
            "averaged_model_accuracy": "the parameter-averaged model"}.get(metric, metric)
    lines = [f"# {sw.title}", ""]
    if sw.source:
        lines += [f"Paper: {sw.source}.", ""]
    epochs = next((c.summary.get("epochs") for c in sw.cells if c.summary), None)
    scale_txt = f"scale {sw.scale:g} ({epochs} epochs, a {sw.scale:g} part of the train set). " if sw.scale else ""
    reg = regression_table(sw)
    regression_only = reg is not None and "RMSE" in reg.split("\n", 1)[0] and not any(c.summary and c.summary.get(metric) is not None for c in sw.cells)
    if regression_only:   # no accuracy: the regression table is the result
        lines += [f"{finished} of {len(sw.cells)} cells finished. {scale_txt}A regression sweep: its runs report "
                  f"test errors, not accuracy.", ""]
    else:
        lines += [f"{finished} of {len(sw.cells)} cells finished. {scale_txt}Each cell: test accuracy (%) of our run "
                  f"({what}, after the final consensus rounds)" + (" [the paper's number]" if sw.paper else "")
                  + "; runs that differ only in their seed are aggregated as mean ± standard error of the mean "
                  "(s/√n, n = runs).", ""]
        lines += [table, ""]
    if reg is not None:
        heading = "Regression: test RMSE, MAE and R²" if "RMSE" in reg.split("\n", 1)[0] else "Your metrics"
        lines += [f"## {heading}", "",
                  "Per configuration, the mean over nodes of each node model's value and the averaged model's, "
                  "as mean ± standard error over the n seeds (s/√n).", "", reg, ""]
    walls = [float(c.summary["wall_time_s"]) for c in sw.cells if c.summary and "wall_time_s" in c.summary]
    if walls:
        lines += [f"Compute: {sum(walls):,.0f} s of wall time over the {len(walls)} finished cells (the sum of "
                  f"their `wall_time_s`; cells that ran side by side overlap in real time).", ""]
    if deltas:
        lines += [f"Ours − paper over {len(deltas)} cells: mean {_mean(deltas):+.2f}, "
                  f"min {min(deltas):+.2f}, max {max(deltas):+.2f} points.", ""]
    checked = findings.compare([c for c in sw.cells if c.summary], _setting, metric)
    if checked:
        lines += ["## The paper's findings", "",
                  "Differences of mean accuracy between cells (points), their standard error over the seeds and "
                  "95 % interval (Welch); a finding holds where the interval lies inside its claim, does not hold "
                  "where it lies outside, and cannot be told otherwise (or from one run per cell).", "",
                  findings.markdown(checked), ""]
    lines += rounds_section(sw)
    if figures and regression_only:
        # a regression sweep: its class (target bin) table, curves and R² against bytes
        fig_dir = Path(folder) / "figures"
        made = [("Target bins per node", "figures/class_distribution.png")] \
            if plot_class_distribution(sw, fig_dir / "class_distribution.png") else []
        for title, rel in made + sweep_figures(sw, fig_dir, metric.replace("accuracy", "r2")):
            lines += [f"## {title}", "", f"![{title}]({rel})", ""]
        figures = False
    if figures:
        fig_dir = Path(folder) / "figures"
        made = []
        if plot_accuracy_vs_skew(sw, fig_dir / "accuracy_vs_skew.png", metric):
            made.append(("Accuracy vs skew (Figures 4–6)", "figures/accuracy_vs_skew.png"))
        if plot_fp32_vs_int8(sw, fig_dir / "fp32_vs_int8.png", metric):
            made.append(("FP32 vs 8-bit per setting", "figures/fp32_vs_int8.png"))
        if plot_validation_error(sw, fig_dir / "validation_error.png", metric):
            made.append(("Validation error during training (Figure 1)", "figures/validation_error.png"))
        if plot_class_distribution(sw, fig_dir / "class_distribution.png"):
            made.append(("Class distribution per node (Figure 2)", "figures/class_distribution.png"))
        made += sweep_figures(sw, fig_dir, metric)
        for title, rel in made:
            lines += [f"## {title}", "", f"![{title}]({rel})", ""]
    text = "\n".join(lines)
    out = Path(folder) / "report.md"
    atomic_write_text(out, text)
    return text, out
