"""decent8 sweep: grid expansion, validation before running, skipping finished cells."""
from __future__ import annotations

import json

import pytest

from decent8.cli.main import main
from decent8.experiments.sweep import expand

FAST = ["epochs=1", "model.width=4", "progress=false", "algorithm.consensus_rounds=1", "device=cpu"]


def test_expand_grid_and_cells():
    fixed, grid, keys = expand(["skew=0,0.9", "nodes=4", "optimizer.milestones=[1,2]"],
                               ["algorithm=dpsgd compression=identity", "algorithm=choco"])
    assert fixed == ["nodes=4", "optimizer.milestones=[1,2]"]
    assert len(grid) == 4 and ["algorithm=choco", "skew=0.9"] in grid
    assert keys == ["algorithm", "compression", "skew"]


@pytest.mark.slow
def test_sweep_runs_cells_writes_results_and_skips_finished(tmp_path, capsys):
    args = ["sweep", *FAST, "nodes=4", f"out_dir={tmp_path}", "--name", "sw", "skew=0,0.5", "--quiet"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "mean node acc %" in out
    rows = json.loads((tmp_path / "sw" / "results.json").read_text())
    assert [r["cell"] for r in rows] == [["skew=0"], ["skew=0.5"]]
    assert (tmp_path / "sw" / "results.csv").read_text().count("\n") == 3
    assert main(args) == 0
    assert capsys.readouterr().out.count("done already, skipped") == 2


def test_invalid_sweep_value_rejected_before_anything_runs(tmp_path, capsys):
    code = main(["sweep", *FAST, f"out_dir={tmp_path}", "--name", "bad", "skew=0,1.7"])
    assert code == 2
    err = capsys.readouterr().err
    assert "skew" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_plan_only_registers_the_grid_and_parts_fill_it(tmp_path, capsys):
    """A preset's grid run in parts over several sessions: --plan-only writes every cell into
    sweep.json and runs none; a part then runs its cells, and the report counts all planned cells."""
    from decent8.experiments.report import build_report

    preset = tmp_path / "grid.yaml"
    preset.write_text("config: {epochs: 1, model: {width: 4}, nodes: 4, progress: false, device: cpu,\n"
                      "         algorithm: {consensus_rounds: 1}}\naxes: {skew: [0.0, 0.5], seed: [0, 1]}\n")
    base = ["sweep", str(preset), f"out_dir={tmp_path}", "--name", "sw", "--quiet"]
    assert main([*base, "--plan-only"]) == 0
    assert "4 cells planned, 0 finished" in capsys.readouterr().out
    plan = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert len(plan["cells"]) == 4
    assert plan["commands"] == [["decent8", "sweep", str(preset), f"out_dir={tmp_path}", "--name", "sw"]]
    assert not any((tmp_path / "sw" / c["name"]).exists() for c in plan["cells"])   # nothing ran
    assert main([*base, "skew=0.5", "seed=1"]) == 0
    again = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert [c["name"] for c in again["cells"]] == [c["name"] for c in plan["cells"]]  # in place: no churn in git
    assert {"skew=0.5", "seed=1"} <= set(again["commands"][-1])
    assert main([*base, "skew=0", "seed=0"]) == 0
    assert len(json.loads((tmp_path / "sw" / "sweep.json").read_text())["cells"]) == 4
    text, _ = build_report(tmp_path / "sw", figures=False)
    assert "2 of 4 cells finished" in text
    # the finished cell, committed and continued elsewhere, with its data at another path: skipped, not refused
    cfg = tmp_path / "sw" / "skew-0_seed-0" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("root: null", "root: /elsewhere/digits")
                   .replace("eval_batch_size: 1024", "eval_batch_size: 128"))  # how it ran, not what
    assert "root: /elsewhere/digits" in cfg.read_text() and "eval_batch_size: 128" in cfg.read_text()
    # ... and written before compression.wire existed (auto: the wire that run used)
    text = cfg.read_text()
    cfg.write_text("".join(ln for ln in text.splitlines(keepends=True) if not ln.startswith("  wire:")))
    assert "wire:" in text and "wire:" not in cfg.read_text()
    capsys.readouterr()
    assert main([*base, "skew=0", "seed=0"]) == 0
    assert "done already, skipped" in capsys.readouterr().out
    # a cell whose experiment differs still stops the sweep
    cfg.write_text(cfg.read_text().replace("nodes: 4", "nodes: 5"))
    assert main([*base, "skew=0", "seed=0"]) == 2
    assert "different config" in capsys.readouterr().err


def test_a_cell_folder_naming_another_module_is_refused_without_importing_it(tmp_path, monkeypatch, capsys):
    """A cell's stored config.yaml is resolved (which imports what it names) only when it names
    the cell's own import paths: a module planted in a stored config is never imported."""
    import yaml

    (tmp_path / "planted_algo.py").write_text(
        f"open({str(tmp_path / 'IMPORTED')!r}, 'w').write('x')\n"
        "from decent8.algorithms.dpsgd import DPSGD\n\nclass X(DPSGD):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    base = ["sweep", *FAST, "nodes=4", f"out_dir={tmp_path}", "--name", "sw", "skew=0,0.5"]
    assert main([*base, "--plan-only"]) == 0
    cell = json.loads((tmp_path / "sw" / "sweep.json").read_text())["cells"][0]["name"]
    from decent8.config import load_config, to_dict
    from decent8.train.resolve import resolve
    stored = to_dict(resolve(load_config(None, [*FAST, "nodes=4", "skew=0", f"out_dir={tmp_path / 'sw'}",
                                                f"name={cell}"])))   # the cell's own config, but for:
    stored["algorithm"]["name"] = "planted_algo:X"
    (tmp_path / "sw" / cell).mkdir()
    (tmp_path / "sw" / cell / "config.yaml").write_text(yaml.safe_dump(stored))
    capsys.readouterr()
    for start in (["--dry-run"], ["--quiet"]):
        assert main([*base, *start]) == 2
        err = capsys.readouterr().err
        assert "different config" in err and "algorithm.name" in err
    assert not (tmp_path / "IMPORTED").exists()


def _older_layout(stored: dict) -> dict:
    """A resolved config as a run written before the topology options and ``algorithm.mu`` left
    the schema stored it: the six graph options at the group's top level (every one, at its "not
    set" value where the graph does not take it), ``mu: null`` beside the algorithm's name."""
    from decent8.config import SHARED_OPTIONS

    out = json.loads(json.dumps(stored))
    params = out["topology"].pop("params")
    out["topology"].update({**SHARED_OPTIONS["topology"], **params, "params": {}})
    out["algorithm"]["mu"] = out["algorithm"]["params"].pop("mu", None)
    return out


@pytest.mark.parametrize("overrides, changed, differs", [
    (["topology=torus", "topology.rows=4"], {"rows": 2}, "topology.params.rows"),
    (["topology=erdos_renyi", "algorithm=dpsgd", "compression=identity"], {"degree": 3.0}, "topology.params.degree"),
    (["topology=ring", "algorithm=gut", "compression=identity", "algorithm.mu=0.3"], None, "algorithm.params.mu"),
])
def test_an_older_cell_folder_with_the_graph_options_at_the_groups_top_level_is_the_same_cell(
        tmp_path, overrides, changed, differs):
    """sweep.check_existing resolves a cell folder's config.yaml as the cell's: an older run's
    (topology.rows, algorithm.mu at the group's top level; degree: null for the default) is the
    same cell, and one that ran another graph or μ still stops the sweep."""
    import yaml

    from decent8.config import load_config, to_dict
    from decent8.errors import ConfigError
    from decent8.experiments.sweep import check_existing
    from decent8.train.resolve import resolve

    cfg = resolve(load_config(None, ["model=mlp", "nodes=16", *FAST, *overrides]))
    older = _older_layout(to_dict(cfg))
    if older["topology"]["name"] == "erdos_renyi":
        older["topology"]["degree"] = None               # the default, as such runs recorded it
    (tmp_path / "cell").mkdir()
    f = tmp_path / "cell" / "config.yaml"
    f.write_text(yaml.safe_dump(older))
    check_existing(tmp_path / "cell", cfg)                # the same cell: nothing raised
    if changed is None:
        older["algorithm"]["mu"] = 0.5
    else:
        older["topology"].update(changed)
    f.write_text(yaml.safe_dump(older))
    with pytest.raises(ConfigError, match=f"different config \\(differs in: {differs}"):
        check_existing(tmp_path / "cell", cfg)


def test_a_report_compares_older_and_newer_run_folders_option_by_option(tmp_path):
    """decent8 report over run folders: an older run's topology.rows is topology.params.rows, so
    two runs of the same torus in the two layouts differ in their seed only, and a run of
    another shape differs in topology.params.rows."""
    import yaml

    from decent8.config import load_config, to_dict
    from decent8.experiments.report.load import load_runs
    from decent8.train.resolve import resolve

    def run(name: str, seed: int, rows: int, older: bool) -> str:
        stored = to_dict(resolve(load_config(None, ["model=mlp", "nodes=16", "topology=torus", f"seed={seed}",
                                                    f"topology.rows={rows}", *FAST])))
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.yaml").write_text(yaml.safe_dump(_older_layout(stored) if older else stored))
        (tmp_path / name / "summary.json").write_text(json.dumps({"mean_node_accuracy": 0.5}))
        return str(tmp_path / name)

    old, new = run("old", 0, 4, older=True), run("new", 1, 4, older=False)
    assert load_runs([old, new]).axes == ["seed"]
    assert load_runs([old, new, run("other", 1, 2, older=True)]).axes == ["seed", "topology.params.rows"]
