"""decent8 sweep: grid expansion, validation before running, skipping finished cells."""
from __future__ import annotations

import json

import pytest

from decent8.cli.main import main
from decent8.cli.sweep_cmd import expand

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
