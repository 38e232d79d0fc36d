"""The markdown table of ``report.md`` in the paper's layout."""
from __future__ import annotations

from ...figstyle.axes import unit_of
from ..aggregate import format_mean_se
from .layout import _AXIS_TITLES, _ROW_TITLES, _mean, _paper_value, cell_values, group_label, layout, rows_of
from .load import Sweep
from ...train.user_metrics import user_keys


def _fmt(v: float | None, digits: int = 2) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def _data_unit(sw: Sweep) -> tuple[float, str]:
    """The byte unit the data column is written in: the one that fits the largest value
    (ours, or the paper's when the preset carries them), so 467 KB is not "0.000467 GB"."""
    sent = [float(c.summary["bytes_sent_per_node"]) for c in sw.cells
            if c.summary and isinstance(c.summary.get("bytes_sent_per_node"), (int, float))]
    return unit_of(max(sent)) if sent and max(sent) > 0 else (1e9, "GB")


def _amount(v: float) -> str:
    """Three significant digits, never in exponent notation (1,500,000 rather than 1.5e+06)."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def _paper_gb(v: object, scale: float) -> str:
    """The paper's data per node (in GB) in the table's unit."""
    return _amount(float(v) * 1e9 / scale) if isinstance(v, (int, float)) else "—"


def markdown_table(sw: Sweep, metric: str = "mean_node_accuracy") -> tuple[str, list[float]]:
    """The paper-layout table and the list of (ours − paper) differences."""
    prefix, row_axes, columns = layout(sw)
    rows = rows_of(sw, row_axes)
    has_precision = any("precision" in c.labels for c in sw.cells)
    headers = [_ROW_TITLES.get(k, k) for k in prefix] + [_AXIS_TITLES.get(a, a) for a in row_axes]
    scale, unit = _data_unit(sw)
    headers.append(f"Data/node ({unit}) FP / LP" if has_precision else f"Data/node ({unit})")
    headers += list(columns)
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(["---"] * len(headers)) + "|"]
    deltas: list[float] = []
    for row in rows:
        cells_in_row = [c for c in sw.cells if c.matches(dict(zip(row_axes, row))) and c.summary]
        data = []
        groups = ("fp32", "int8") if has_precision else (None,)
        for prec in groups:
            b = [c.summary["bytes_sent_per_node"] / scale for c in cells_in_row  # type: ignore[index]
                 if (prec is None or c.labels.get("precision") == prec) and "bytes_sent_per_node" in c.summary]
            data.append(_amount(_mean(b)) if b else "—")
        data_txt = " / ".join(data)
        comp = dict(zip(row_axes, row)).get("comp")
        paper_gb = sw.paper_data_gb.get(str(comp)) if comp is not None else None
        if isinstance(paper_gb, dict):
            data_txt += " [" + " / ".join(_paper_gb(paper_gb.get(p), scale) for p in ("fp32", "int8")) + "]"
        out = [str(v) for v in prefix.values()] + list(row) + [data_txt]
        for label, spec in columns.items():
            done, n_all = cell_values(sw, row_axes, row, spec or {}, metric)
            ours = _mean(done) if done else None
            paper = _paper_value(sw, row_axes, row, label)
            txt = format_mean_se(done, show_n=False) if done else "—"
            if done and n_all > 1:   # every ± says what it is: the standard error over the n seeds
                txt += (" (s.e., " if len(done) > 1 else " (") + f"n={len(done)}" + \
                    (f" of {n_all}" if len(done) < n_all else "") + ")"
            if paper is not None:
                txt += f" [{paper:.2f}]"
                if ours is not None:
                    deltas.append(ours - paper)
            out.append(txt)
        lines.append("| " + " | ".join(out) + " |")
    return "\n".join(lines), deltas


#: a regression run's metrics in summary.json, as the report's columns (train/engine.py)
REGRESSION_COLUMNS = (("RMSE, node mean", "mean_node_rmse"), ("RMSE, averaged", "averaged_model_rmse"),
                      ("MAE, node mean", "mean_node_mae"), ("MAE, averaged", "averaged_model_mae"),
                      ("R², node mean", "mean_node_r2"), ("R², averaged", "averaged_model_r2"))


def regression_table(sw: Sweep) -> str | None:
    """Test RMSE, MAE and R² (regression runs) and the user's metrics (``metrics=``) per
    configuration, mean ± s.e. over its seeds; None when no finished cell has any."""

    done = [c for c in sw.cells if c.summary and (isinstance(c.summary.get("mean_node_rmse"), (int, float))
                                                  or user_keys(c.summary))]
    if not done:
        return None
    user = [k for k in user_keys(done[0].summary or {})]
    regression = any(isinstance(c.summary.get("mean_node_rmse"), (int, float)) for c in done if c.summary)
    columns = list(REGRESSION_COLUMNS if regression else ()) + [(k.replace("mean_node_", "").replace("averaged_model_", "") +
                                           (", node mean" if k.startswith("mean_node_") else ", averaged"), k)
                                          for k in user]
    groups: dict[str, list] = {}
    for c in done:
        groups.setdefault(group_label(c.labels) or sw.title, []).append(c.summary)
    lines = ["| configuration | n | " + " | ".join(t for t, _ in columns) + " |",
             "|" + "|".join(["---"] * (len(columns) + 2)) + "|"]
    for label, ss in groups.items():
        cells = []
        for _, key in columns:
            vals = [float(s[key]) for s in ss if isinstance(s.get(key), (int, float))]
            cells.append(format_mean_se(vals, single=4, show_n=False) if vals else "—")
        lines.append(f"| {label} | {len(ss)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
