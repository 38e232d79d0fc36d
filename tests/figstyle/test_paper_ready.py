"""What makes a figure usable in a paper unedited, asserted on every kind decent8 draws
from synthetic runs: each axis labelled and numbered (a log axis spanning less than a
decade too), whole-epoch ticks, a title that is the user's or a short description (never a
folder name, a figure number or "(ours)"), a marker per evaluation, the post-consensus
point drawn apart and labelled, colour-blind-safe colours, portable cell folder names."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from decent8.figstyle.axes import has_tick_labels
from tests.figstyle.test_figures import _rows, drawn  # noqa: F401  (the fixture)

MAX_TITLE = 90


def _axes_ok(path: str, fig) -> None:
    """Every axes with data: both axes labelled and numbered; whole epochs on an epoch axis."""
    for ax in fig.axes:
        if not ax.has_data() or ax.get_label() == "<colorbar>":
            continue
        fig.canvas.draw()
        for axis, label in ((ax.xaxis, ax.get_xlabel()), (ax.yaxis, ax.get_ylabel())):
            if axis is ax.xaxis and ax.get_xticks().size and all(t.get_text() for t in ax.get_xticklabels()) \
                    and not label:   # a categorical axis (fp32_vs_int8) names its groups instead
                continue
            shared = (ax.get_shared_y_axes() if axis is ax.yaxis else ax.get_shared_x_axes()).get_siblings(ax)
            if not label and any((o.get_ylabel() if axis is ax.yaxis else o.get_xlabel()) for o in shared):
                continue   # a panel sharing its neighbour's labelled axis
            assert label, f"{path}: an axis without a label"
            assert has_tick_labels(axis), f"{path}: axis {label!r} has no numbered tick"
        if ax.get_xlabel() == "epoch":
            ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
            assert all(float(t).is_integer() for t in ticks), f"{path}: fractional epoch ticks {ticks}"


def _title_ok(path: str, fig, folder_names: tuple[str, ...] = ()) -> str:
    title = fig._suptitle.get_text().replace("\n", " ") if fig._suptitle is not None else ""
    assert len(title) <= MAX_TITLE, f"{path}: title of {len(title)} characters: {title!r}"
    assert "Figure" not in title and "(ours)" not in title, title
    for name in folder_names:
        assert name not in title, f"{path}: a folder name in the title: {title!r}"
    return title


def test_a_loss_axis_of_less_than_a_decade_is_numbered(tmp_path, drawn):  # noqa: F811
    from decent8.train.plots import plot_curves
    from decent8.timing.plots import plot_time

    rows = _rows(regression=True)
    for i, r in enumerate(rows):            # test losses 0.58 → 0.38: less than a decade
        r["mean_node_loss"] = r["averaged_model_loss"] = 0.38 + 0.2 * math.exp(-min(i, 6))
    plot_curves(rows, tmp_path / "curves.png", title="regression, loss only")
    plot_time(rows, tmp_path / "time.png", title="regression, loss only")
    assert len(drawn) == 2
    for path, fig in drawn:
        _axes_ok(path, fig)
        loss_axes = [ax for ax in fig.axes if ax.get_yscale() == "log" and "loss" in ax.get_ylabel()]
        assert loss_axes
        for ax in loss_axes:
            labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
            assert len(labels) >= 2, labels


def test_run_curves_show_r2_markers_and_the_post_consensus_point_apart(tmp_path, drawn):  # noqa: F811
    from decent8.train.plots import plot_curves

    rows = _rows(regression=True)
    for i, r in enumerate(rows):
        r["mean_node_r2"], r["averaged_model_r2"] = 0.9 - 0.5 * math.exp(-i), 0.92 - 0.5 * math.exp(-i)
    rows[-1]["mean_node_r2"] = 0.95
    plot_curves(rows, tmp_path / "curves.png", title="t")
    (path, fig), = drawn
    _axes_ok(path, fig)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "test R²"
    curves = [ln for ln in ax.lines if ln.get_linestyle() != "None"]
    stars = [ln for ln in ax.lines if ln.get_marker() == "*"]
    assert all(ln.get_marker() == "o" and len(ln.get_xdata()) == len(rows) - 1 for ln in curves)  # one per evaluation
    assert stars and "consensus rounds" in stars[0].get_label()
    assert min(stars[0].get_xdata()) > max(curves[0].get_xdata())   # beside the last epoch, not a vertical drop


def test_a_long_run_still_marks_every_evaluation(tmp_path, drawn):  # noqa: F811
    from decent8.train.plots import plot_curves
    from decent8.timing.plots import plot_time

    rows = _rows(epochs=80)
    plot_curves(rows, tmp_path / "curves.png", title="t")
    plot_time(rows, tmp_path / "time.png", title="t")
    for path, fig in drawn:
        for ax in fig.axes:
            for ln in ax.lines:
                if len(ln.get_xdata()) > 1:
                    assert ln.get_marker() not in (None, "None", "", " "), path


def test_config_titles_are_short_descriptions_or_the_users(tmp_path):
    from decent8.config import load_config
    from decent8.train.titles import config_title

    cfg = load_config(None, ["algorithm=my_algorithm:MyAlgorithm", "topology=directed_ring"])
    title = config_title(cfg)
    assert ":" not in title and "MyAlgorithm" in title and len(title) <= MAX_TITLE
    assert "directed ring, 8 nodes, skew 0.8" in title
    assert config_title(load_config(None, ["title=My own title"])) == "My own title"


def _sweep_folder(root: Path, seeds: int = 2) -> Path:
    cells = []
    for algo, comp in (("dpsgd", "identity"), ("choco", "topk")):
        for prec in ("fp32", "int8"):
            for skew in ("0.5", "0.9"):
                for seed in range(seeds):
                    labels = {"algorithm": algo, "compression": comp, "precision": prec, "skew": skew,
                              "seed": str(seed)}
                    name = "_".join(f"{k}-{v}" for k, v in labels.items()).replace(".", "p")
                    d = root / name
                    d.mkdir(parents=True)
                    rows = _rows(epochs=3, final=0.9 - 0.3 * float(skew), seed=seed)
                    (d / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
                    last = rows[-1]
                    (d / "summary.json").write_text(json.dumps({
                        "mean_node_accuracy": last["mean_node_accuracy"], "epochs": 3,
                        "averaged_model_accuracy": last["averaged_model_accuracy"], "wall_time_s": 1.0,
                        "bytes_sent_per_node": last["bytes_sent_per_node"] * (0.01 if comp == "topk" else 1.0)}))
                    (d / "config.yaml").write_text(f"data: {{name: digits}}\nnodes: 8\nepochs: 3\nskew: {skew}\n"
                                                   f"algorithm: {{name: {algo}}}\nprecision: {prec}\n")
                    heavy = int(90 * float(skew))
                    counts = [[100 + heavy if c == i % 10 else 100 - heavy // 9 for c in range(10)] for i in range(8)]
                    (d / "partition.csv").write_text(
                        "node," + ",".join(f"{c}" for c in range(10)) + "\n"
                        + "".join(f"{i}," + ",".join(map(str, row)) + "\n" for i, row in enumerate(counts)))
                    cells.append({"name": name, "labels": labels, "overrides": []})
    (root / "sweep.json").write_text(json.dumps({"axes": ["algorithm", "compression", "precision", "skew", "seed"],
                                                 "cells": cells}))
    return root


@pytest.mark.slow   # six figures drawn: > 10 s on a shared core
def test_report_figures_are_paper_ready(tmp_path, drawn):  # noqa: F811
    from matplotlib.colors import to_hex

    from decent8.experiments.report import build_report

    folder = _sweep_folder(tmp_path / "my-sweep-20260101")
    text, _ = build_report(folder)
    names = sorted(Path(p).name for p, _ in drawn)
    assert names == ["accuracy_vs_bytes.png", "accuracy_vs_skew.png", "class_distribution.png", "curves.png",
                     "fp32_vs_int8.png", "validation_error.png"]
    for path, fig in drawn:
        _axes_ok(path, fig)
        _title_ok(path, fig, ("my-sweep-20260101",))
        for ax in fig.axes:
            labels = ax.get_legend_handles_labels()[1]
            assert not [lb for lb in labels if "(ours)" in lb], path
    figs = {Path(p).name: f for p, f in drawn}
    # 10 classes: a sequential colour-blind-safe map (viridis), not a rainbow
    import matplotlib
    viridis = {to_hex(matplotlib.colormaps["viridis"](x)) for x in np.linspace(0, 1, 256)}
    bars = {to_hex(p.get_facecolor()) for p in figs["class_distribution.png"].axes[0].patches}
    assert len(bars) == 10 and bars <= viridis
    # the methods swept with their compressors share rows: one table, no "—" cell
    table = text.split("\n\n")[2]
    assert "—" not in table.split("\n", 2)[2] and "s.e., n=2" in table
    ve = figs["validation_error.png"].axes[0]
    assert any(ln.get_marker() == "*" and "consensus" in ln.get_label() for ln in ve.lines)


def test_cell_folder_names_are_portable():
    from decent8.experiments.presets import Cell

    name = Cell({"algorithm": "my_clip:ClippedDPSGD", "skew": "0.9", "data.path": "a b/c"}, []).name
    assert name == "algorithm-my_clip-ClippedDPSGD_skew-0p9_datappath-ab-c"
    assert Cell({"comp": "99-fp32wire", "skew": "0"}, []).name == "comp-99-fp32wire_skew-0"   # as before


def test_generated_run_folder_names_are_portable():
    from decent8.config import load_config
    from decent8.train.loop import default_run_stem

    stem = default_run_stem(load_config(None, ["topology=mypkg.graphs:ring", "algorithm=dpsgd",
                                               "compression=identity"]))
    assert ":" not in stem and stem.startswith("dpsgd-identity-mypkg.graphs-ring-n8-s0.8-seed0-")


def test_the_sweep_table_names_its_statistic():
    from decent8.experiments.sweep import SPREAD_NOTE, results_table

    class Cell:
        def __init__(self, labels):
            self.labels = labels

    finished = [(Cell({"algorithm": "dpsgd", "seed": str(s)}), {"mean_node_rmse": v, "averaged_model_r2": 0.9,
                                                                "consensus_distance": 1e-3,
                                                                "bytes_sent_per_node": 10.0, "wall_time_s": 1.0})
                for s, v in enumerate((0.5, 0.7))]
    text, headers, rows = results_table(["algorithm", "seed"], finished)
    assert "mean node RMSE ± s.e." in headers and rows[0][2] == "0.60 ± 0.10"   # s.d. 0.1414 / √2 = 0.10
    assert "standard error" in SPREAD_NOTE


def test_comparison_legends_leave_out_what_only_follows_from_another_key(tmp_path):
    from decent8.experiments.report.load import load_runs

    runs = []
    for i, (topo, extra) in enumerate((("ring", ""), ("erdos_renyi", "  degree: 4\n"))):
        d = tmp_path / f"r{i}"
        d.mkdir()
        (d / "config.yaml").write_text(f"topology:\n  name: {topo}\n{extra}" + ("eval:\n  nodes: all\n" if i else ""))
        (d / "summary.json").write_text(json.dumps({"mean_node_accuracy": 0.9}))
        runs.append(d)
    sw = load_runs(runs)
    assert sw.axes == ["topology"]
