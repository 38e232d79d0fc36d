"""``label_smoothing`` (cross-entropy against (1 − ε)·one-hot + ε/C, training loss only) and
``optimizer.schedule=onecycle``: the loss by hand, test losses unchanged, the refusals, and a
short run that uses both."""
from __future__ import annotations

import json

import pytest
import torch

from decent8.config import load_config
from decent8.errors import ConfigError
from decent8.task import CrossEntropy, make_task
from decent8.train.validate import check_plain


def test_smoothed_loss_equals_the_hand_computed_one_and_test_losses_stay_plain():
    g = torch.Generator().manual_seed(0)
    logits, y, eps = torch.randn(3, 5, 4, generator=g), torch.randint(0, 4, (3, 5), generator=g), 0.1
    logp = torch.log_softmax(logits, -1)
    by_hand = -((1 - eps) * logp.gather(-1, y.unsqueeze(-1)).squeeze(-1) + eps / 4 * logp.sum(-1)).mean(1)
    task = make_task("cross_entropy", label_smoothing=eps)
    assert isinstance(task, CrossEntropy)
    assert torch.allclose(task.losses(logits, y), by_hand, atol=1e-6)
    assert torch.allclose(torch.stack([task.loss(o, t) for o, t in zip(logits, y)]), by_hand, atol=1e-6)
    plain = make_task("cross_entropy")
    assert (task.losses(logits, y) - plain.losses(logits, y)).abs().min() > 1e-3
    test_y = y[0]
    for a, b in zip(task.eval_sums(logits, test_y), plain.eval_sums(logits, test_y)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("overrides, option, words", [
    (["label_smoothing=1"], "label_smoothing", "[0, 1)"),
    (["label_smoothing=-0.1"], "label_smoothing", "[0, 1)"),
    (["label_smoothing=0.1", "loss=mse"], "label_smoothing", "loss=cross_entropy only"),
    (["optimizer.schedule=onecycle", "optimizer.warmup_epochs=0"], "optimizer.warmup_epochs", "onecycle"),
    (["optimizer.schedule=onecycle", "epochs=4", "optimizer.warmup_epochs=4"], "optimizer.warmup_epochs", "(0, epochs=4)"),
    (["optimizer.schedule=one_cycle"], "optimizer.schedule", "onecycle"),
])
def test_refusals_name_the_option_and_what_is_allowed(overrides, option, words):
    with pytest.raises(ConfigError) as e:
        check_plain(load_config(None, overrides))
    assert e.value.option == option and words in str(e.value)


def test_a_run_with_both_trains_and_records_them(tmp_path):
    from decent8.train.loop import train

    base = ["nodes=2", "model=mlp", "model.width=8", "data.subset=400", "epochs=6", "device=cpu", "progress=false",
            "checkpoint=false", "algorithm.consensus_rounds=0", f"out_dir={tmp_path}"]
    both = ["label_smoothing=0.1", "optimizer.schedule=onecycle", "optimizer.warmup_epochs=1"]
    s1, r1 = train(load_config(None, [*base, *both, "name=both"]), quiet=True)
    s0, _ = train(load_config(None, [*base, "name=plain"]), quiet=True)
    assert s1["mean_node_accuracy"] > 0.5      # 0.61 measured (0.58 without either), chance 0.1
    rows = [json.loads(line) for line in (tmp_path / "both" / "metrics.jsonl").read_text().splitlines()]
    assert [round(r["lr"], 6) for r in rows] != [round(r["lr"], 6) for r in
                                                 map(json.loads, (tmp_path / "plain" / "metrics.jsonl").read_text().splitlines())]
    cfg = (tmp_path / "both" / "config.yaml").read_text()
    assert "label_smoothing: 0.1" in cfg and "schedule: onecycle" in cfg
    assert s1["final_train_loss"] != s0["final_train_loss"]
