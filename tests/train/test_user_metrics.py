"""A user's metric (``metrics=``, train/user_metrics.py) is reported everywhere the built-in
metrics are, from one real tiny run: summary.json, the printed summary, the sweep's table,
``decent8 report``'s table, the run's curves.png (a panel per metric, labelled and
numbered) and the report's figures (a curves figure per metric)."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

import decent8
from decent8.figstyle.axes import has_tick_labels
from tests.figstyle.test_figures import drawn  # noqa: F401  (the fixture)


def within_half(outputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Share of test predictions within 0.5 of the target."""
    return float(((outputs.reshape(-1).double() - targets.reshape(-1).double()).abs() < 0.5).double().mean())


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(160, 3, generator=g)
    y = x @ torch.tensor([1.0, -2.0, 0.5]) + 0.1 * torch.randn(160, generator=g)
    out = tmp_path_factory.mktemp("user_metric")
    result = decent8.train(lambda: nn.Linear(3, 1), (x[:128], y[:128], x[128:], y[128:]), loss="mse",
                           metrics=within_half, nodes=4, epochs=2, algorithm="dpsgd", compression="identity",
                           topology="ring", out_dir=str(out), checkpoint=False, sim__chunk=1, tensorboard="false")
    summary, folder = result[0], Path(result[1])
    return summary, folder, out


def _axis_of(fig, label: str):
    found = [ax for ax in fig.axes if ax.get_visible() and ax.get_ylabel() == label]
    assert found, f"no axis labelled {label!r}: {[ax.get_ylabel() for ax in fig.axes]}"
    ax = found[0]
    fig.canvas.draw()
    assert ax.has_data() and has_tick_labels(ax.yaxis) and has_tick_labels(ax.xaxis)
    return ax


def test_summary_and_printed_summary_carry_the_metric(run):
    summary, folder, _ = run
    assert 0.0 <= summary["averaged_model_within_half"] <= 1.0 and 0.0 <= summary["mean_node_within_half"] <= 1.0
    assert json.loads((folder / "summary.json").read_text())["averaged_model_within_half"] == \
        summary["averaged_model_within_half"]
    from decent8.cli.train_cmd import summary_table
    assert "within_half" in summary_table(summary)


def test_the_sweep_table_has_a_column_for_it(run):
    from decent8.experiments.sweep import results_table

    summary = json.loads((run[1] / "summary.json").read_text())
    text, headers, rows = results_table(["seed"], [(SimpleNamespace(labels={"seed": "0"}), summary)])
    col = headers.index("mean node within_half ± s.e.")
    assert float(rows[0][col]) == pytest.approx(summary["mean_node_within_half"], abs=5e-5)


def test_curves_png_has_a_labelled_numbered_panel_per_metric(run, drawn, tmp_path):  # noqa: F811
    from decent8.train.plots import plot_curves

    rows = [json.loads(line) for line in (run[1] / "metrics.jsonl").read_text().splitlines()]
    plot_curves(rows, tmp_path / "curves.png", title="t")
    (_, fig), = drawn
    ax = _axis_of(fig, "test within_half")
    during = [r for r in rows if not r.get("after_consensus_rounds")]
    mean_line = next(ln for ln in ax.lines if ln.get_label() == "mean of node models")
    assert list(mean_line.get_ydata()) == pytest.approx([r["mean_node_within_half"] for r in during])
    assert (run[1] / "curves.png").is_file()          # the run wrote its own


def test_the_report_has_it_in_its_table_and_a_figure(run, drawn, tmp_path):  # noqa: F811
    from decent8.experiments.report.write import compare_runs

    summary, folder, _ = run
    compare_runs([str(folder)], tmp_path / "report")
    text = (tmp_path / "report" / "report.md").read_text()
    header = next(line for line in text.splitlines() if "within_half, node mean" in line)
    assert "within_half, averaged" in header
    assert f"{summary['averaged_model_within_half']:.4f}" in text
    assert "figures/metric_within_half.png" in text and (tmp_path / "report" / "figures" / "metric_within_half.png").is_file()
    fig = next(f for p, f in drawn if p.endswith("metric_within_half.png"))
    _axis_of(fig, "test within_half")
