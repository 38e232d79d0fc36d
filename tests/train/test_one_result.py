"""Issue 29, "one result per config": a custom loss keeps accuracy (task), BatchNorm running
statistics under non-IID data (model.norm_stats), and the smaller defects (D-PSGD at 8 bits,
D²'s default γ, partition labels, import paths from the current folder, safe data.path
wording, help(decent8.train), cached execution timings, a fast CLI)."""
from __future__ import annotations

import json
import os
import pydoc
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import decent8
from decent8.comm.simulator import SimulatorCommunicator
from decent8.config import load_config, partition_label
from decent8.errors import ConfigError
from decent8.task import CustomLoss, make_task
from decent8.topology import make_topology
from decent8.train.build import build
from decent8.train.norm_stats import has_running_stats, mix_buffers, warn_if_skewed

ROOT = Path(__file__).resolve().parents[2]
QUICK = dict(nodes=4, epochs=1, checkpoint=False, tensorboard="false", sim__chunk="1", progress=False)


def bn_net(input_shape=(1, 8, 8), num_classes=10) -> nn.Module:
    sys.path.insert(0, str(ROOT))
    try:
        from examples.bn_cnn import make_net
    finally:
        sys.path.remove(str(ROOT))
    return make_net(input_shape, num_classes)


def cfg(*overrides: str):
    return load_config(None, ["data.name=digits", "model=mlp", "model.width=8", "nodes=4", "device=cpu", "epochs=1",
                              *overrides])


# -- A. a custom classification loss keeps accuracy -----------------------------------------

def my_cross_entropy(outputs, targets):
    return F.cross_entropy(outputs, targets)


@pytest.mark.slow   # two runs: ~20 s on the loaded 2-core machine (the fast subset keeps the unit tests below)
def test_a_custom_cross_entropy_reports_the_built_in_accuracy(tmp_path):
    opts = dict(QUICK, model="mlp", model__width=8, data__subset=400, algorithm="dpsgd", compression="identity", topology="ring",
                algorithm__consensus_rounds=2, out_dir=str(tmp_path))
    builtin, _ = decent8.train(loss="cross_entropy", name="builtin", **opts)
    custom, _ = decent8.train(loss=my_cross_entropy, name="custom", **opts)
    assert custom["task"] == "classification" and custom["mean_node_accuracy"] is not None
    assert custom["mean_node_accuracy"] == pytest.approx(builtin["mean_node_accuracy"], abs=1e-9)
    assert custom["averaged_model_accuracy"] == pytest.approx(builtin["averaged_model_accuracy"], abs=1e-9)


def test_task_auto_decides_from_the_targets_and_outputs():
    auto = make_task(my_cross_entropy)
    _, correct = auto.eval_sums(torch.tensor([[[2.0, 0.0], [0.0, 1.0], [3.0, 0.0]]]), torch.tensor([0, 1, 1]))
    assert auto.classification and correct.tolist() == [2]
    regression = make_task(my_cross_entropy, "regression")
    assert regression.eval_sums(torch.zeros(1, 3, 2), torch.tensor([0, 1, 1]))[1] is None
    floats = make_task(F.mse_loss)
    assert floats.eval_sums(torch.zeros(1, 3, 2), torch.zeros(3, 2))[1] is None and not floats.classification
    # one output per sample: auto reports loss only; task=classification thresholds at 0
    binary = CustomLoss(F.binary_cross_entropy_with_logits, task="classification")
    assert binary.correct(torch.tensor([[1.0, -1.0, 2.0]]), torch.tensor([1, 0, 0])).tolist() == [2]
    assert make_task(F.binary_cross_entropy_with_logits).eval_sums(torch.zeros(1, 3), torch.ones(3))[1] is None


@pytest.mark.parametrize("loss,task,integer,needle", [
    ("mse", "classification", True, "loss=mse is a regression loss"),
    ("cross_entropy", "regression", True, "classification loss"),
    (my_cross_entropy, "classification", False, "integer class labels"),
    ("cross_entropy", "sometimes", True, "allowed: auto, classification, regression"),
])
def test_task_contradictions_are_one_line_errors(loss, task, integer, needle):
    with pytest.raises(ConfigError) as e:
        make_task(loss, task, integer_targets=integer)
    assert e.value.option == "task" and needle in str(e.value) and "\n" not in str(e.value)


# -- B. BatchNorm running statistics ---------------------------------------------------------

def test_b_final_consensus_rounds_leave_node_models_no_worse_with_gossiped_statistics(tmp_path):
    """The recommended model.norm_stats=gossip: the statistics travel with the parameters, so
    after the rounds every node model is the averaged model (parameters and statistics),
    and the curves' last point is summary.json's number."""
    s, run = decent8.train(bn_net, None, **dict(QUICK, algorithm="dpsgd", compression="identity", topology="ring",
                                                 skew=0.9, data__subset=600, algorithm__consensus_rounds=20, model__norm_stats="gossip",
                                                 out_dir=str(tmp_path), name="g"))
    before = s["before_consensus_rounds"]
    assert s["mean_node_accuracy"] >= before["mean_node_accuracy"]
    # consensus reached in parameters *and* statistics: each node model is the averaged model
    assert s["consensus_distance"] < 1e-8
    assert s["node_accuracies"] == [pytest.approx(s["averaged_model_accuracy"])] * 4
    assert s["mean_node_loss"] == pytest.approx(s["averaged_model_loss"], rel=1e-4)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["after_consensus_rounds"] == 20 and rows[-1]["mean_node_accuracy"] == s["mean_node_accuracy"]
    assert rows[-2]["mean_node_accuracy"] == before["mean_node_accuracy"]
    assert s["norm_stats"] == "gossip" and s["partition"] == "skew 0.9"


def test_gossiped_buffers_mix_like_the_parameters():
    comm = SimulatorCommunicator(make_topology("directed_ring", 4))
    b = torch.arange(8.0).reshape(4, 2)
    w = comm.weights(0).to_dense()
    want = w @ b
    mix_buffers(comm, b, 0)
    assert torch.allclose(b, want) and torch.allclose(b.mean(0), torch.tensor([3.0, 4.0]))
    assert comm.bytes_sent.tolist() == [4.0 * 3] * 4          # 2 statistics + the weight column, one out-edge


def test_batchnorm_meets_skewed_data_warns_once_naming_the_option():
    net = bn_net()
    assert has_running_stats(net) and not has_running_stats(nn.Linear(2, 2))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert warn_if_skewed(net, "local", "dirichlet", 0.0)
        assert not warn_if_skewed(net, "gossip", "dirichlet", 0.0)
        assert not warn_if_skewed(net, "local", "skew", 0.0)
        assert not warn_if_skewed(nn.Linear(2, 2), "local", "skew", 0.9)
    assert len(w) == 1 and "model.norm_stats=gossip" in str(w[0].message) and "\n" not in str(w[0].message)
    with pytest.raises(ConfigError, match="model.norm_stats: unknown value 'fedbn'; allowed: average, gossip, local"):
        build(cfg("model.norm_stats=fedbn"))


# -- C. the smaller defects ------------------------------------------------------------------

def test_dpsgd_at_8_bits_sends_8_bit_models_and_d2_is_refused_with_what_to_set():
    c = build(cfg("precision=int8", "algorithm=dpsgd", "compression=identity", "topology=ring"))
    assert c.algorithm.compressor.name == "quantize" and c.compressor.nbytes() < c.model.dim * 2
    with pytest.raises(ConfigError) as e:
        build(cfg("precision=int8", "algorithm=d2", "compression=identity", "topology=ring"))
    assert e.value.option == "precision" and "precision=fp32" in str(e.value) and "compression=identity" not in str(e.value)
    with pytest.raises(ConfigError, match="compression"):   # top-k is still not D-PSGD's
        build(cfg("precision=int8", "algorithm=dpsgd", "compression=topk", "topology=ring"))


def test_d2_picks_a_valid_gamma_and_records_it():
    config = cfg("algorithm=d2", "compression=identity", "topology=ring", "nodes=8")
    c = build(config)
    # 8-node ring, 1/3 weights: λ_min(W) = −1/3, so γ < 1; the largest multiple of 0.01 is 0.99
    assert c.gamma == 0.99 and c.defaults["algorithm.gamma"] == 0.99
    # recorded in the resolved config (config.yaml), not written into the user's
    assert c.cfg.algorithm.gamma == 0.99 and config.algorithm.gamma is None
    assert build(cfg("algorithm=d2", "compression=identity", "topology=complete")).gamma == 1.0


def test_partition_labels_name_the_partition():
    assert partition_label(cfg("partition=dirichlet", "partition.alpha=0.3")) == "dirichlet α=0.3"
    assert partition_label(cfg("partition=dirichlet", "partition.alpha=0.3"), ascii_only=True) == "dir0.3"
    assert partition_label(cfg("skew=0.9")) == "skew 0.9"
    assert partition_label(cfg("partition=shards")) == "shards 2/node"


def test_import_path_models_resolve_from_the_current_folder(tmp_path, monkeypatch):
    from decent8.models.user import load_factory
    (tmp_path / "mynets_issue29.py").write_text("def make_net():\n    return 'made'\n")
    monkeypatch.chdir(tmp_path)
    # the console script's sys.path: its own folder first, not the current one
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    assert load_factory("mynets_issue29:make_net")() == "made"


def test_a_pickled_object_in_data_path_is_one_safe_line(tmp_path):
    from decent8.data.tensors import load_tensors
    path = tmp_path / "objects.pt"
    torch.save({"x": torch.zeros(4, 2), "y": ValueError("not a tensor")}, path)
    with pytest.raises(ConfigError) as e:
        load_tensors(str(path))
    text = str(e.value)
    assert e.value.option == "data.path" and "\n" not in text and "weights_only" not in text and "tensors" in text


def test_help_of_decent8_train_is_the_api_docstring():
    text = pydoc.render_doc(decent8.train, renderer=pydoc.plaintext)
    assert "Train ``model`` on ``data`` over ``nodes`` decentralized nodes" in text
    import decent8.train.loop as loop  # submodules still import
    from decent8.train import build as build_module
    assert loop.__name__ == "decent8.train.loop" and build_module.__name__ == "decent8.train.build"
    assert callable(decent8.train)


def _python(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120).stdout


def test_the_cli_imports_no_heavy_package_for_help_and_plain_errors():
    heavy = ("torch", "matplotlib", "sklearn", "transformers", "tensorboardX")
    out = _python(f"import sys, decent8.cli.main; print([m for m in {heavy!r} if m in sys.modules])")
    assert out.strip() == "[]"
    out = _python("import sys, contextlib, io\nfrom decent8.cli.main import main\n"
                  "with contextlib.redirect_stderr(io.StringIO()) as e: code = main(['train', 'nodes=0'])\n"
                  "print(code, 'torch' in sys.modules, e.getvalue().strip())")
    assert out.strip() == "2 False decent8: error: nodes: need at least 2 nodes, got 0"


def test_the_top_level_help_lines_are_the_commands_own():
    from decent8.cli.main import COMMANDS, _subparsers, make_parser
    full = make_parser()
    actions = [a for a in full._actions if a.__class__.__name__ == "_SubParsersAction"][0]
    helps = {c.dest: c.help for c in actions._choices_actions}
    assert set(_subparsers(full)) == set(COMMANDS)
    assert {name: line for name, (_, line) in COMMANDS.items()} == {n: h.replace("%%", "%") for n, h in helps.items()}
