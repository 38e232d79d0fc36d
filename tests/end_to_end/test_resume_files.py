"""A run stopped after its first checkpoint and resumed writes the same files as the
uninterrupted run: every file of the run folder, wall-clock values aside."""
from __future__ import annotations

import json

import pytest
import torch
import yaml

import decent8.train.loop as loop
from tests.helpers import call

COMMON = ["device=cpu", "model=mlp", "model.width=4", "nodes=4", "progress=false", "algorithm.consensus_rounds=2",
          "data.subset=200", "epochs=3", "sim.chunk=1", "tensorboard=false", "name=r", "--quiet"]
#: what a clock decides, not the run
WALL = {"wall_time_s", "measured_compute_s", "measured_comm_s", "measured_compute_s_per_step",
        "measured_comm_s_per_step"}


def _files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _without_wall(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in WALL}


def test_a_resumed_run_writes_every_file_as_the_uninterrupted_one(tmp_path, monkeypatch):
    full, cut = tmp_path / "full", tmp_path / "cut"
    assert call(["train", *COMMON, f"out_dir={full}"])[0] == 0

    saves = []
    save = loop.save_checkpoint

    def stop_after_first(run, comm, state):      # Ctrl-C right after epoch 1's checkpoint
        save(run, comm, state)
        saves.append(state["epoch"])
        raise KeyboardInterrupt

    monkeypatch.setattr(loop, "save_checkpoint", stop_after_first)
    rc, _, lines = call(["train", *COMMON, f"out_dir={cut}"])
    assert rc == 130 and saves == [1] and "--resume" in lines[-1]
    monkeypatch.setattr(loop, "save_checkpoint", save)
    assert call(["train", "--resume", str(cut / "r"), "--quiet"])[0] == 0

    a, b = full / "r", cut / "r"
    assert _files(a) == _files(b)
    for name in _files(a):
        fa, fb = a / name, b / name
        if name == "config.yaml":
            ya, yb = yaml.safe_load(fa.read_text()), yaml.safe_load(fb.read_text())
            assert {**ya, "out_dir": None} == {**yb, "out_dir": None}
        elif name == "metrics.jsonl":
            ra = [_without_wall(json.loads(x)) for x in fa.read_text().splitlines()]
            rb = [_without_wall(json.loads(x)) for x in fb.read_text().splitlines()]
            assert ra == rb
        elif name == "summary.json":
            sa, sb = json.loads(fa.read_text()), json.loads(fb.read_text())
            assert _without_wall(sa) == _without_wall(sb)
            assert sa["algorithm_defaults"] == {"optimizer.momentum": 0.9, "optimizer.lr": 0.1}
        elif name.endswith(".pt"):
            ca, cb = torch.load(fa, weights_only=True), torch.load(fb, weights_only=True)
            ca.pop("wall_time_s"), cb.pop("wall_time_s")
            ca["timing"].pop("total"), cb["timing"].pop("total")   # measured compute / comm seconds
            assert ca.keys() == cb.keys() and ca["epoch"] == cb["epoch"] == 3
            ca["config"]["out_dir"] = cb["config"]["out_dir"] = None
            for key in ca:
                _equal(ca[key], cb[key], key)
        else:   # execution.json, partition.csv, the figures
            assert fa.read_bytes() == fb.read_bytes(), name


def _equal(x, y, where):
    if isinstance(x, torch.Tensor):
        assert torch.equal(x, y), where
    elif isinstance(x, dict):
        assert x.keys() == y.keys(), where
        for k in x:
            _equal(x[k], y[k], f"{where}.{k}")
    elif isinstance(x, (list, tuple)):
        assert len(x) == len(y), where
        for i, (u, v) in enumerate(zip(x, y)):
            _equal(u, v, f"{where}[{i}]")
    else:
        assert x == y or (x != x and y != y), where


if __name__ == "__main__":   # pragma: no cover
    pytest.main([__file__])
