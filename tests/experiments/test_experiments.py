"""Paper presets, the scale knob, `decent8 sweep` (plans, bad values, skip/resume, --jobs) and `decent8 report`."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml

from decent8.cli.main import main
from decent8.config import TrainConfig, load_config
from decent8.experiments.presets import canonical_label, list_presets, load_preset, make_plan, resolve_config_arg
from decent8.experiments.report import build_report, load_sweep, markdown_table
from tests.helpers import table3_report_spec

PAPER = Path(__file__).resolve().parents[2] / "configs" / "paper"
#: presets of decent8's own studies (not the paper's tables): their cell counts
STUDIES = {"topologies_digits32": 42, "byzantine_digits16": 1152, "byzantine_choco_digits16": 144, "byzantine_mnist64": 27}
PRESETS = sorted(p.stem for p in PAPER.glob("*.yaml") if p.stem not in STUDIES)
SHARED_CIFAR = Path("/work/shared/data/cifar10/YoongiKim-CIFAR-10-images.tar.gz")

# ---------------------------------------------------------------------------- presets
EXPECTED_CELLS = {
    "table3_resnet20_ring8": 32, "table3_resnet20_ring16": 32, "table3_resnet54_ring8": 32,
    "table3_vgg11_torus16": 32, "table4_resnet20_qgm_ring8": 16, "table5_resnet18_torus8": 8,
    "table5_vgg11_ring4": 8, "figure1_norms_resnet20_ring8": 4,
    "table6_agnews_ring4": 24, "table6_sentlen_ring4": 24, "cifar10_findings_ring8": 48, "cifar10_findings_fast": 96,
}


def test_every_experiment_of_the_paper_has_a_preset():
    assert sorted(EXPECTED_CELLS) == PRESETS
    for name, cells in STUDIES.items():
        p = load_preset(PAPER / f"{name}.yaml", f"paper/{name}")
        assert math.prod(len(a.labels) for a in p.axes) == cells and not p.paper
    assert {f"paper/{n}" for n in PRESETS} <= set(list_presets())
    assert resolve_config_arg("paper/table3_resnet20_ring8") == PAPER / "table3_resnet20_ring8.yaml"


def test_the_findings_preset_runs_in_parts():
    """Issue 16's grid: seed 0 of all 16 settings first, Choco's cells ahead of Deep-Squeeze's;
    every cell runs eagerly (at 32 px compiled steps were slower, the preset's comment)."""
    plan = make_plan("paper/cifar10_findings_ring8", ["seed=0"], [])
    assert len(plan.cells) == 16 and all(c.labels["seed"] == "0" for c in plan.cells)
    assert [c.labels["algorithm"] for c in plan.cells] == ["choco"] * 8 + ["deepsqueeze"] * 8
    for c in plan.cells:
        assert ("sim.compile=false" in c.overrides) == (c.labels["precision"] == "int8")
    assert len(make_plan("paper/cifar10_findings_ring8", ["seed=1,2", "comp=99"], []).cells) == 16
    assert len(make_plan("paper/cifar10_findings_ring8", ["seed=1,2", "comp=0", "algorithm=choco"], []).cells) == 8
    cfg = load_config(plan.config_path, plan.base + plan.cells[0].overrides)
    assert (cfg.data.image_size, cfg.epochs, cfg.optimizer.schedule, cfg.nodes) == (None, 10, "cosine", 8)
    assert (cfg.optimizer.lr, cfg.optimizer.warmup_epochs, cfg.eval_every) == (0.1, 0, 5)


@pytest.mark.parametrize("name", PRESETS)
def test_preset_grid_and_paper_numbers_line_up(name):
    p = load_preset(PAPER / f"{name}.yaml", f"paper/{name}")
    assert math.prod(len(a.labels) for a in p.axes) == EXPECTED_CELLS[name]
    rep = p.report
    axis = {a.key: a for a in p.axes}
    for label, spec in rep["columns"].items():
        for k, v in (spec or {}).items():
            assert canonical_label(v) in axis[k].labels, (label, k, v)
    row_axes = rep["row_axes"]
    assert all(a in axis for a in row_axes)
    if name.startswith("figure"):
        assert not p.paper
        return
    assert len(p.paper) == math.prod(len(axis[a].labels) for a in row_axes)   # one record per table row
    rows = {tuple(canonical_label(r[a]) for a in row_axes) for r in p.paper}
    assert len(rows) == len(p.paper)
    for r in p.paper:
        assert all(canonical_label(r[a]) in axis[a].labels for a in row_axes)
        assert set(r) - set(row_axes) == set(rep["columns"])                   # every method has its number
        assert all(50 < float(r[c]) < 100 for c in rep["columns"])
    cfg = p.config
    assert cfg["data"]["batch_size"] == (16 if name == "cifar10_findings_fast" else 32)
    opt = cfg["optimizer"]
    if name.startswith("table6"):  # paper §4.4: local Adam, lr 3e-5, β1 = β2 = 0.9, wd 1e-4, 5 epochs, 4 nodes
        assert opt["kind"] == "adamw" and opt["lr"] == 3e-5 and opt["betas"] == [0.9, 0.9]
        assert opt["weight_decay"] == 1e-4 and cfg["epochs"] == 5 and cfg["nodes"] == 4
        assert cfg["data"]["name"] in ("agnews", "sentlen") and cfg["model"]["name"] == "hf"
        assert axis["skew"].labels == ["0", "0.5", "0.9"]
    elif name == "cifar10_findings_ring8":   # 10 epochs: a cosine decay without warm-up (measured better)
        assert opt["warmup_epochs"] == 0 and opt["lr"] == 0.1 and opt["schedule"] == "cosine"
    elif name == "cifar10_findings_fast":   # the protocol probes: 16 px, batch 16, lr 0.1 (Table 3; 0.2 diverged at 8 bits) after a quarter-epoch warm-up
        assert opt["warmup_epochs"] == 0.25 and opt["lr"] == 0.1 and opt["schedule"] == "cosine"
        assert cfg["data"]["image_size"] == 16 and cfg["data"]["batch_size"] == 16 and cfg["epochs"] == 5
    else:
        assert opt["warmup_epochs"] == 1 and opt["lr"] in (0.1, 0.01)
    if name.startswith("cifar10_findings"):   # issue 16's reduced protocol of Table 3
        assert cfg["data"]["name"] == "cifar10" and cfg["nodes"] == 8 and axis["skew"].labels == ["0", "0.9"]
        assert axis["seed"].labels == ["0", "1", "2"]
    if name.startswith("table3") or name.startswith("table4"):
        assert cfg["epochs"] == 200 and cfg["data"]["name"] == "cifar10"
        assert opt["milestones"] == ([100, 150] if "resnet" in name else []) and opt["lr"] == 0.1
        assert axis["skew"].labels == ["0", "0.4", "0.8", "0.9"]
    if "vgg11" in name:
        assert opt["decay"] == 0.5 and opt["decay_every"] == 30
    if name.startswith("table5"):
        assert cfg["epochs"] == 100 and cfg["data"]["name"] == "imagenette" and axis["skew"].labels == ["0", "0.6"]
        assert opt["lr"] == (0.1 if "resnet18" in name else 0.01)
    if name.startswith("table4"):
        assert cfg["optimizer"]["kind"] == "qgm"
    gammas = {lab: [o for o in ov if o.startswith("algorithm.gamma=")] for lab, ov in zip(axis["comp"].labels,
                                                                                       axis["comp"].overrides)}
    assert gammas["0"] == ["algorithm.gamma=1.0"] and all(g == ["algorithm.gamma=0.01"] for k, g in gammas.items() if k != "0")


def test_scale_shrinks_epochs_schedule_and_data():
    plan = make_plan("paper/table3_resnet20_ring8", ["scale=0.05"])
    cfg = load_config(None, plan.base)
    assert cfg.epochs == 10
    assert cfg.optimizer.milestones == [5.0, 7.5] and cfg.optimizer.warmup_epochs == pytest.approx(0.05)
    assert cfg.data.subset == 0.05 and cfg.data.test_subset == 0.1
    assert len(plan.cells) == 32 and plan.cells[0].name == "comp-0_skew-0_algorithm-deepsqueeze_precision-fp32"
    vgg = load_config(None, make_plan("paper/table3_vgg11_torus16", ["scale=0.1", "data.subset=0.5"]).base)
    assert vgg.epochs == 20 and vgg.optimizer.decay_every == pytest.approx(3.0) and vgg.data.subset == 0.5


def test_command_line_axes_replace_and_fix_the_presets():
    plan = make_plan("paper/table3_resnet20_ring8", ["skew=0.8", "comp=99", "algorithm=choco,deepsqueeze", "nodes=8"])
    fixed = {"comp": "99", "skew": "0.8"}
    assert [c.labels for c in plan.cells] == [
        {**fixed, "algorithm": "choco", "precision": "fp32"}, {**fixed, "algorithm": "choco", "precision": "int8"},
        {**fixed, "algorithm": "deepsqueeze", "precision": "fp32"},
        {**fixed, "algorithm": "deepsqueeze", "precision": "int8"}]
    assert plan.cells[0].name == "comp-99_skew-0p8_algorithm-choco_precision-fp32"   # as in the full grid
    assert "compression=topk" in plan.cells[0].overrides and "algorithm.gamma=0.01" in plan.cells[0].overrides
    assert "skew=0.8" in plan.cells[0].overrides and "nodes=8" in plan.base


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_cell_is_a_valid_config(name):
    from decent8.experiments.presets import cell_config

    plan = make_plan(f"paper/{name}", ["scale=0.05", "data.root=/nowhere"])
    for cell in plan.cells:
        cell_config(plan, cell)


@pytest.mark.slow   # > 20 s on the 2-core CI machine
@pytest.mark.skipif(not SHARED_CIFAR.exists(), reason="needs the shared CIFAR-10 archive")
def test_the_leads_cifar_command_validates(tmp_path, capsys):
    code = main(["sweep", "paper/table3_resnet20_ring8", "scale=0.05", f"data.root={SHARED_CIFAR}", "--dry-run",
                 f"out_dir={tmp_path}", "device=cpu"])
    assert code == 0, capsys.readouterr().err
    assert "32 cells" in capsys.readouterr().out


# ---------------------------------------------------------------------------- sweep: bad values
@pytest.mark.parametrize("args,option", [
    (["sweep", "skew=0,1.5"], "skew"),
    (["sweep", "skew=0,,0.9"], "skew"),
    (["sweep", "algorithm=choco,magic"], "algorithm"),
    (["sweep", "scale=0"], "scale"),
    (["sweep", "scale=abc"], "scale"),
    (["sweep", "paper/table3_resnet20_ring8", "comp=50"], "comp"),
    (["sweep", "paper/no_such_table"], "config"),
    (["sweep", "--jobs", "0", "skew=0,0.9"], "--jobs"),
])
def test_invalid_sweep_values_are_rejected_before_anything_runs(args, option, tmp_path, capsys):
    code = main([*args, f"out_dir={tmp_path / 'runs'}", "epochs=1", "device=cpu"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and option in err, err
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------------------- sweep: a tiny preset end to end
TINY = """
title: Tiny digits table
source: a test
config:
  nodes: 4
  epochs: 2
  device: cpu
  progress: false
  eval_every: 1
  model: {name: cnn, width: 4}
  algorithm: {name: choco, consensus_rounds: 1}
  optimizer: {milestones: [2, 3], warmup_epochs: 1}
axes:
  comp:
    "0": {compression: identity, algorithm.gamma: 1.0}
    "99": {compression: topk, compression.ratio: 0.99, algorithm.gamma: 0.05}
  skew: [0.0, 0.9]
report:
  rows: {model: CNN, graph: Directed Ring, nodes: 4}
  row_axes: [comp, skew]
  columns: {Choco: {}}
paper_data_gb: {"0": {fp32: 1.5, int8: 0.4}}
paper:
  - {comp: "0", skew: 0.0, Choco: 97.5}
  - {comp: "0", skew: 0.9, Choco: 91.25}
"""


@pytest.mark.slow   # > 6 s: kept out of the fast subset
def test_tiny_preset_sweep_skips_resumes_and_reports(tmp_path, capsys):
    preset = tmp_path / "tiny.yaml"
    preset.write_text(TINY)
    argv = ["sweep", str(preset), "scale=0.5", f"out_dir={tmp_path}", "--name", "s", "--quiet"]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "4 cells" in out and "scale 0.5 (2 → 1 epochs)" in out
    sweep = tmp_path / "s"
    cfg = yaml.safe_load((sweep / "comp-99_skew-0p9" / "config.yaml").read_text())
    assert cfg["epochs"] == 1 and cfg["optimizer"]["milestones"] == [1.0, 1.5] and cfg["data"]["subset"] == 0.5
    assert cfg["optimizer"]["warmup_epochs"] == 0.5
    assert cfg["compression"]["name"] == "topk" and cfg["algorithm"]["gamma"] == 0.05
    plan = json.loads((sweep / "sweep.json").read_text())
    assert plan["title"] == "Tiny digits table" and len(plan["cells"]) == 4 and plan["paper"]
    rows = (sweep / "results.csv").read_text().splitlines()
    assert rows[0].startswith("comp,skew,mean_node_accuracy") and len(rows) == 5

    # a second run skips finished cells; a cell killed after a checkpoint resumes
    (sweep / "comp-0_skew-0" / "summary.json").unlink()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("done already, skipped") == 3 and "resuming" in out
    # a changed config cannot silently reuse the old cells
    assert main([*argv, "seed=5"]) == 2
    err = capsys.readouterr().err
    assert "different config" in err and "seed" in err

    assert main(["report", str(sweep)]) == 0
    text = capsys.readouterr().out
    assert re.search(r"\| Model \| Graph \| Nodes \(n\) \| Comp\. \(%\) \| Degree of skew \| Data/node \((KB|MB|GB)\) \| Choco \|", text)
    assert "[97.50]" in text and "[91.25]" in text and "[1,500,000 / 400,000]" in text
    assert "Compute: " in text          # the sum of the cells' wall_time_s
    for png in ("accuracy_vs_skew", "validation_error", "class_distribution"):
        assert (sweep / "figures" / f"{png}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (sweep / "report.md").read_text().startswith("# Tiny digits table")


@pytest.mark.slow   # > 20 s on the 2-core CI machine under load
def test_parallel_jobs_run_cells_in_subprocesses(tmp_path, capsys):
    code = main(["sweep", "skew=0,0.9", "epochs=1", "nodes=4", "model.width=4", "device=cpu",
                 "algorithm.consensus_rounds=1", f"out_dir={tmp_path}", "--name", "p", "--jobs", "2", "--quiet"])
    assert code == 0, capsys.readouterr().err
    sweep = tmp_path / "p"
    for cell in ("skew-0", "skew-0p9"):
        assert (sweep / cell / "summary.json").exists()
        assert (sweep / "logs" / f"{cell}.log").exists()
    assert len(json.loads((sweep / "results.json").read_text())) == 2


# ---------------------------------------------------------------------------- report on a synthetic folder
def _fake_cell(root: Path, name: str, labels: dict, acc: float, cfg: dict, skew: float) -> None:
    d = root / name
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(yaml.safe_dump(cfg))
    (d / "summary.json").write_text(json.dumps({"mean_node_accuracy": acc, "averaged_model_accuracy": acc + 0.01,
                                                "bytes_sent_per_node": 2e9 if labels["precision"] == "fp32" else 5e8,
                                                "epochs": 3, "wall_time_s": 10.0}))
    (d / "metrics.jsonl").write_text("".join(json.dumps({"epoch": e, "mean_node_accuracy": acc * e / 3,
                                                         "averaged_model_accuracy": acc}) + "\n" for e in (1, 2, 3)))
    heavy = int(100 * skew)
    (d / "partition.csv").write_text("node,a,b\n" + f"0,{50 + heavy},{50 - heavy}\n1,{50 - heavy},{50 + heavy}\n")


def test_report_of_a_synthetic_sweep_folder(tmp_path, capsys):
    sweep = tmp_path / "sw"
    cells = []
    acc = {("deepsqueeze", "fp32"): 0.80, ("deepsqueeze", "int8"): 0.78, ("choco", "fp32"): 0.82, ("choco", "int8"): 0.81}
    for skew in ("0", "0.9"):
        for (algo, prec), a in acc.items():
            labels = {"skew": skew, "algorithm": algo, "precision": prec}
            name = f"skew-{skew}_{algo}_{prec}".replace(".", "p")
            if not (skew == "0.9" and algo == "choco" and prec == "int8"):   # one cell still running
                _fake_cell(sweep, name, labels, a - (0.2 if skew == "0.9" else 0), {"nodes": 2, "skew": float(skew)},
                           float(skew))
            cells.append({"name": name, "labels": labels, "overrides": []})
    (sweep / "sweep.json").write_text(json.dumps({
        "title": "Synthetic", "scale": 0.1, "axes": ["skew", "algorithm", "precision"], "cells": cells,
        **table3_report_spec()}))
    assert main(["report", str(sweep)]) == 0
    text = capsys.readouterr().out
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert lines[0] == "| Model | Degree of skew | Data/node (GB) FP / LP | DS | LP-DS | Choco | LP-Choco |"
    assert lines[2] == "| ResNet-20 | 0 | 2 / 0.5 | 80.00 [90.56] | 78.00 [90.57] | 82.00 [90.96] | 81.00 [90.30] |"
    assert lines[3] == "| ResNet-20 | 0.9 | 2 / 0.5 | 60.00 | 58.00 | 62.00 | — |"
    assert "7 of 8 cells finished" in text and "Ours − paper over 4 cells" in text
    assert "Compute: 70 s of wall time over the 7 finished cells" in text   # 7 × 10 s
    for png in ("accuracy_vs_skew", "fp32_vs_int8", "validation_error", "class_distribution"):
        assert (sweep / "figures" / f"{png}.png").read_bytes()[:4] == b"\x89PNG"
    assert not list((sweep / "figures").glob(".*"))     # atomic writes leave no temporary files
    sw = load_sweep(sweep)
    table, deltas = markdown_table(sw, "averaged_model_accuracy")
    assert "81.00 [90.56]" in table and len(deltas) == 4


def test_report_without_sweep_json_infers_the_layout(tmp_path, capsys):
    root = tmp_path / "plain"
    for algo in ("deepsqueeze", "choco"):
        for skew in (0.0, 0.8):
            _fake_cell(root, f"{algo}-{skew}", {"precision": "fp32"}, 0.5 + skew / 10,
                       {"nodes": 8, "skew": skew, "algorithm": {"name": algo}, "model": {"name": "cnn"}}, skew)
    text, path = build_report(root)
    assert "| DS | Choco |" in text.splitlines()[4] and path.exists()
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert "not a folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "not a sweep folder" in capsys.readouterr().err


def test_parts_of_a_grid_run_later_add_to_one_plan(tmp_path):
    """``seed=0`` over the grid, then ``seed=1 comp=99``: sweep.json keeps every cell and
    both commands, and the results cover the cells the first command ran."""
    from decent8.experiments.sweep import planned_results, write_plan

    preset = tmp_path / "tiny.yaml"
    preset.write_text(TINY.replace("  skew: [0.0, 0.9]\n", "  skew: [0.0, 0.9]\n  seed: [0, 1, 2]\n"))
    sweep = tmp_path / "s"
    sweep.mkdir()
    first = make_plan(str(preset), ["seed=0"], [])
    write_plan(sweep, first, [str(preset), "seed=0"])
    for cell in first.cells:           # what the first command's cells left behind
        (sweep / cell.name).mkdir()
        (sweep / cell.name / "summary.json").write_text(json.dumps({"mean_node_accuracy": 0.5}))
    second = make_plan(str(preset), ["seed=1", "comp=99"], [])
    write_plan(sweep, second, [str(preset), "seed=1", "comp=99"])
    plan = json.loads((sweep / "sweep.json").read_text())
    names = [c["name"] for c in plan["cells"]]
    assert len(names) == 6 and len(set(names)) == 6 and "comp-99_skew-0p9_seed-1" in names
    assert [c[-2:] for c in plan["commands"]] == [[str(preset), "seed=0"], ["seed=1", "comp=99"]]
    axes, finished = planned_results(sweep, {"comp-99_skew-0_seed-1": {"mean_node_accuracy": 0.7}})
    assert axes == ["comp", "skew", "seed"] and len(finished) == 5      # 4 from disk + 1 just run
    assert len(load_sweep(sweep).cells) == 6
    # another base config (here: other epochs) starts a new plan instead of mixing
    write_plan(sweep, make_plan(str(preset), ["seed=2", "epochs=3"], []), [str(preset), "seed=2", "epochs=3"])
    assert len(json.loads((sweep / "sweep.json").read_text())["cells"]) == 4
