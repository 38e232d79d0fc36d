"""Every kind of figure decent8 writes, rendered from small synthetic runs and checked with
matplotlib's renderer extents (decent8.figstyle.layout): no text outside the canvas, no
overlapping tick labels, labelled axes, error bars only from ≥ 2 seeds, honest y-ranges,
and a PDF beside every PNG."""
from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import decent8.figstyle as figstyle
from decent8.figstyle.layout import error_bars_from_one_seed, layout_problems
from tests.helpers import table3_report_spec


@pytest.fixture
def drawn(monkeypatch):
    """The figures saved during the test, (path, fig), captured at ``figstyle.save`` in every
    decent8 module that imported it."""
    out = []
    real = figstyle.save

    def capture(fig, path):
        real(fig, path)
        out.append((str(path), fig))

    monkeypatch.setattr(figstyle, "save", capture)
    for name, mod in list(sys.modules.items()):
        if name.startswith("decent8.") and getattr(mod, "save", None) is real:
            monkeypatch.setattr(mod, "save", capture)
    return out


def _rows(epochs=6, final=0.975, bytes_per_epoch=77_871.0, seed=0, regression=False, consensus=51):
    rng = np.random.default_rng(seed)
    rows = []
    for e in range(epochs + 1):
        acc = final - (final - 0.1) * math.exp(-e) + 0.002 * rng.standard_normal()
        r = {"epoch": e, "step": 10 * e, "lr": 0.1, "train_loss": 2.3 * math.exp(-e / 2),
             "mean_node_accuracy": None if regression else acc, "averaged_model_accuracy": None if regression else acc + 0.005,
             "mean_node_loss": 2.0 * math.exp(-e / 2), "averaged_model_loss": 1.9 * math.exp(-e / 2),
             "consensus_distance": 10.0 * math.exp(-e), "bytes_sent_per_node": bytes_per_epoch * e,
             "sim_time_s": 1.5 * e}
        rows.append(r)
    if consensus:
        rows.append(dict(rows[-1], after_consensus_rounds=consensus))
    return rows


def _summary(rows):
    last = rows[-1]
    return {k: last[k] for k in ("mean_node_accuracy", "averaged_model_accuracy", "bytes_sent_per_node")}


def _check(drawn, tmp_path, kinds: int):
    assert len(drawn) == kinds
    for path, fig in drawn:
        assert path.endswith(".png") and (tmp_path / path).exists()
        assert (tmp_path / path).with_suffix(".pdf").stat().st_size > 1000, "no vector copy beside the PNG"
        assert layout_problems(fig) == [], path
        assert error_bars_from_one_seed(fig) == [], path


LONG = ("a long title that a narrow figure must wrap, not clip: Choco-SGD with 99 % top-k on an 8-node "
        "directed ring at skew 0.8, 8-bit training, 60 epochs, three seeds")


@pytest.mark.slow   # > 6 s on 2 cores: kept out of the fast subset (issue 30)
def test_run_figures(tmp_path, drawn):
    from decent8.data.class_table import plot_class_heatmap
    from decent8.timing.plots import plot_time
    from decent8.train.plots import plot_curves

    plot_curves(_rows(), tmp_path / "curves.png", title=LONG)
    plot_curves(_rows(1), tmp_path / "curves1.png")
    plot_curves(_rows(regression=True), tmp_path / "curves_reg.png", title="regression")
    plot_time(_rows(60, bytes_per_epoch=7_787.0), tmp_path / "time.png", title=LONG)
    plot_time(_rows(3, bytes_per_epoch=155_742.0), tmp_path / "time_narrow.png")  # < 1 decade of bytes
    plot_class_heatmap(np.arange(80).reshape(8, 10), tmp_path / "partition.png", title=LONG)
    plot_class_heatmap(np.ones((256, 62), dtype=int), tmp_path / "partition_big.png",
                       class_names=[f"class-{i}" for i in range(62)])
    _check(drawn, tmp_path, 7)


def _groups(seeds: int, labels=("choco, 99 % top-k", "dpsgd, uncompressed")):
    from decent8.train.plots import Group

    out = []
    for j, label in enumerate(labels):
        runs = [_rows(final=0.977 + 0.001 * j, bytes_per_epoch=77_871.0 * (1 + 99 * j), seed=s) for s in range(seeds)]
        out.append(Group(label, runs, [_summary(r) for r in runs]))
    return out


@pytest.mark.parametrize("seeds", [1, 3])
def test_comparison_figures(tmp_path, drawn, seeds):
    from decent8.train.plots import plot_accuracy_vs_bytes, plot_groups

    assert plot_groups(_groups(seeds), tmp_path / "curves.png", title=LONG)
    assert plot_accuracy_vs_bytes(_groups(seeds), tmp_path / "accuracy_vs_bytes.png", title="comparison")
    _check(drawn, tmp_path, 2)
    _, fig = drawn[1]
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    assert hi - lo >= 2.0, "two runs 0.1 points apart must not fill the accuracy axis"
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert all(f"(n={seeds})" in s for s in labels)
    bars = [c for c in ax.containers if getattr(c, "has_yerr", False)]
    assert len(bars) == (2 if seeds > 1 else 0)


def test_many_groups_keep_their_legend_on_the_canvas(tmp_path, drawn):
    from decent8.train.plots import plot_groups

    plot_groups(_groups(2, labels=[f"config {i}: algorithm=choco compression=topk skew=0.{i}" for i in range(12)]),
                tmp_path / "many.png", title="twelve configurations")
    _check(drawn, tmp_path, 1)


def test_cost_and_dropout_figures(tmp_path, drawn):
    import json

    from decent8.cost.report import cost_report, plot_report
    from decent8.experiments.tta import dropout_report

    plot_report(cost_report(model="cnn"), tmp_path / "cost.png")
    runs = []
    for i, p in enumerate([0.0, 0.2]):
        run = tmp_path / f"run{i}"
        run.mkdir()
        rows = _rows(consensus=0)
        (run / "config.yaml").write_text(f"faults: {{node_drop: {p}}}\n")
        (run / "summary.json").write_text(json.dumps(dict(_summary(rows), consensus_distance=0.1, algorithm="choco",
                                                          compression="topk", topology="ring", nodes=8)))
        (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
        runs.append(run)
    dropout_report(runs, tmp_path / "dropout")
    _check(drawn, tmp_path, 2)


def test_the_checks_catch_a_bad_layout():
    """The layout checks fail where they should: a clipped title, overlapping tick labels,
    an unlabelled axis, an error bar from one seed."""
    with figstyle.styled(lambda: None).__wrapped__ and __import__("contextlib").nullcontext():
        fig = figstyle.new_figure(3, 2)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([1, 2], [1, 2])
    fig.suptitle("a title far too long for a three-inch figure to hold on one line, so it is clipped")
    ax.set_xticks(np.linspace(1, 2, 40))
    ax.errorbar([1.5], [1.5], yerr=[0.1], label="one run (n=1)")
    problems = layout_problems(fig)
    assert any("outside the canvas" in p for p in problems)
    assert any("x tick labels overlap" in p for p in problems)
    assert any("unlabelled y axis" in p for p in problems)
    assert error_bars_from_one_seed(fig)


def _sweep(root, seeds: int):
    """A sweep folder of the paper's layout: skew × algorithm × precision × seeds, 8 nodes, 10 classes."""
    import json

    import yaml

    cells = []
    base = {("deepsqueeze", "fp32"): 0.80, ("deepsqueeze", "int8"): 0.78, ("choco", "fp32"): 0.82, ("choco", "int8"): 0.81}
    for skew in ("0", "0.9"):
        for (algo, prec), a in base.items():
            for seed in range(seeds):
                labels = {"skew": skew, "algorithm": algo, "precision": prec, "seed": str(seed)}
                name = f"skew-{skew}_{algo}_{prec}_seed-{seed}".replace(".", "p")
                d = root / name
                d.mkdir(parents=True)
                rows = _rows(5, final=a - (0.1 if skew == "0.9" else 0) + 0.004 * seed,
                             bytes_per_epoch=(4e8 if prec == "fp32" else 1e8), seed=seed)
                (d / "config.yaml").write_text(yaml.safe_dump({"nodes": 8, "skew": float(skew), "precision": prec}))
                (d / "summary.json").write_text(json.dumps(dict(_summary(rows), epochs=5, wall_time_s=10.0)))
                (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
                heavy = int(90 * float(skew))
                counts = [[100 + heavy if c == i % 10 else 100 - heavy // 9 for c in range(10)] for i in range(8)]
                (d / "partition.csv").write_text(
                    "node," + ",".join(f"class {c}" for c in range(10)) + "\n"
                    + "".join(f"{i}," + ",".join(map(str, row)) + "\n" for i, row in enumerate(counts)))
                cells.append({"name": name, "labels": labels, "overrides": []})
    (root / "sweep.json").write_text(json.dumps({
        "title": "Table 3 — CIFAR-10, ResNet-20, 8-node directed ring (a title as long as the presets' titles)",
        "scale": 0.05, "axes": ["skew", "algorithm", "precision", "seed"], "cells": cells,
        **table3_report_spec()}))
    return root


@pytest.mark.slow   # > 6 s on 2 cores: kept out of the fast subset (issue 30)
@pytest.mark.parametrize("seeds", [1, 3])
def test_report_figures(tmp_path, drawn, seeds):
    from decent8.experiments.report import build_report

    build_report(_sweep(tmp_path / "sw", seeds))
    names = sorted(p.rsplit("/", 1)[1] for p, _ in drawn)
    expected = ["accuracy_vs_bytes.png", "accuracy_vs_skew.png", "class_distribution.png", "curves.png",
                "fp32_vs_int8.png", "validation_error.png"]
    assert names == expected
    _check(drawn, tmp_path, len(expected))
    fig = dict((p.rsplit("/", 1)[1], f) for p, f in drawn)["fp32_vs_int8.png"]
    assert all(t.get_text() for t in fig.axes[0].get_xticklabels())      # every group named
    assert any(f"n = {seeds}" in t.get_text() for t in fig.axes[0].texts)      # what the bars are, on the axes


def test_data_column_uses_a_unit_that_fits(tmp_path):
    from decent8.experiments.report import load_runs, markdown_table
    from decent8.figstyle.axes import human_bytes

    assert human_bytes(467_226) == "467 KB" and human_bytes(2.5e9) == "2.5 GB" and human_bytes(12) == "12 B"
    root = _sweep(tmp_path / "sw", 1)
    for d in root.iterdir():
        if d.is_dir():
            import json
            s = json.loads((d / "summary.json").read_text())
            (d / "summary.json").write_text(json.dumps(dict(s, bytes_sent_per_node=467_226)))
    (root / "sweep.json").unlink()
    table, _ = markdown_table(load_runs(sorted(p for p in root.iterdir() if p.is_dir())))
    assert "Data/node (KB)" in table and "| 467" in table and "0.000467" not in table
