"""Evaluation at scale (issue 32 item 3): ``eval.nodes`` and ``eval.node_chunk``."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from decent8.config import load_config
from decent8.errors import ConfigError
from decent8.train.build import build
from decent8.train.engine import Engine
from decent8.train.eval_nodes import eval_sample, parse_eval_nodes
from decent8.train.loop import train

from tests.helpers import small_config


def base(tmp_path, *over: str) -> list[str]:
    return small_config(["data.name=digits", "model=mlp", "nodes=8", "epochs=3", "algorithm=dpsgd",
                         "compression=identity", "algorithm.consensus_rounds=1", "checkpoint=false",
                         "tensorboard=false", "sim.chunk=1", f"out_dir={tmp_path}", *over])


def rows(path) -> list[dict]:
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def test_sample_is_seeded_sorted_and_all_means_none():
    a, b = eval_sample(0, 100, 10), eval_sample(0, 100, 10)
    assert np.array_equal(a, b) and len(set(a.tolist())) == 10 and np.all(np.diff(a) > 0)
    assert not np.array_equal(a, eval_sample(1, 100, 10))
    assert parse_eval_nodes("all", 8) is None and parse_eval_nodes(8, 8) is None and parse_eval_nodes("3", 8) == 3


@pytest.mark.slow
def test_intermediate_rows_test_the_sample_and_the_last_rows_every_node(tmp_path):
    """Training does not depend on eval.nodes, so each sampled node's accuracy in a row
    equals that node's entry in the eval.nodes=all run's row; the last epoch's row and the
    final row test all 8 nodes."""
    full_s, full = train(load_config(None, base(tmp_path, "name=all")), quiet=True)
    part_s, part = train(load_config(None, base(tmp_path, "name=part", "eval.nodes=3")), quiet=True)
    ids = eval_sample(0, 8, 3).tolist()
    r_all, r_part = rows(full), rows(part)
    assert [r["evaluated_nodes"] for r in r_all] == [8, 8, 8, 8]
    assert [r["evaluated_nodes"] for r in r_part] == [3, 3, 8, 8]
    for a, p in zip(r_all[:2], r_part[:2]):
        assert p["evaluated_node_ids"] == ids
        assert p["node_accuracies"] == [a["node_accuracies"][i] for i in ids]
        assert p["mean_node_accuracy"] == pytest.approx(np.mean([a["node_accuracies"][i] for i in ids]), abs=1e-6)
        assert p["averaged_model_accuracy"] == a["averaged_model_accuracy"]
        assert p["consensus_distance"] == a["consensus_distance"]
    assert r_part[2]["node_accuracies"] == r_all[2]["node_accuracies"]
    assert part_s["node_accuracies"] == full_s["node_accuracies"] and len(part_s["node_accuracies"]) == 8


def test_node_chunks_give_the_same_per_node_metrics(tmp_path):
    c = build(load_config(None, base(tmp_path, "model.width=16")))
    engine = Engine(c.model, c.algorithm, c.optimizer, c.comm, c.x0)
    g = torch.Generator().manual_seed(0)
    engine.z.add_(0.1 * torch.randn(engine.z.shape, generator=g))  # every node a different model
    x, y = c.dataset.x_test, c.dataset.y_test
    whole = engine.evaluate(x, y, 100, node_chunk=256)
    chunked = engine.evaluate(x, y, 100, node_chunk=3)
    some = engine.evaluate(x, y, 100, nodes=[1, 5, 6], node_chunk=2)
    assert len(set(whole["node_accuracies"])) > 1
    assert chunked["node_accuracies"] == whole["node_accuracies"]
    assert chunked["mean_node_loss"] == pytest.approx(whole["mean_node_loss"], rel=1e-12)
    assert some["node_accuracies"] == [whole["node_accuracies"][i] for i in (1, 5, 6)]
    assert some["evaluated_nodes"] == 3 and whole["evaluated_nodes"] == 8 and "evaluated_node_ids" not in whole


@pytest.mark.parametrize("over,option", [(["eval.nodes=0"], "eval.nodes"), (["eval.nodes=some"], "eval.nodes"),
                                         (["eval.node_chunk=0"], "eval.node_chunk")])
def test_bad_values_are_one_line_errors(tmp_path, over, option):
    with pytest.raises(ConfigError) as e:
        build(load_config(None, base(tmp_path, *over)))
    assert e.value.option == option
