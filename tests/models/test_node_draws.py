"""Every random draw belongs to a node, for any model (docs/execution.md "Which random
operators are per node"): a draw on a tensor without the batch axis, a random ``torch.nn``
layer in a plain ``nn.Sequential``, noise on an activation that needs a gradient. Each run is
built through the product path (config → ``build`` → ``choose_chunk``) and compared with the
loop after 1 and 3 steps: equal to 1e-5 relative, or refused in one line naming the operator."""
from __future__ import annotations

import copy

import pytest
import torch

from decent8 import streams
from decent8.config import load_config
from decent8.data.dataset import take
from decent8.errors import ConfigError
from decent8.models.execution import choose_chunk
from decent8.train.build import build
from decent8.train.engine import Engine

NODES = 4
BOUND = 1e-5

pytestmark = pytest.mark.usefixtures("one_thread")  # (conftest.py)

_BUILT: dict[tuple[str, ...], object] = {}


def _parts(model: str, precision: str = "fp32"):
    key = (model, precision)
    if key not in _BUILT:
        _BUILT.clear()
        _BUILT[key] = build(load_config(None, [
            f"nodes={NODES}", "progress=false", "data.batch_size=8", "optimizer.warmup_epochs=0",
            f"model=tests.models.draw_models:{model}", f"precision={precision}", "algorithm=dpsgd",
            "compression=identity"]))
    return _BUILT[key]


def _batch(c, s: int):
    spe = c.sampler.steps_per_epoch
    idx = c.sampler.epoch_indices(s // spe)[:, s % spe]
    return take(c.dataset.x_train, idx), c.dataset.y_train[idx]


def _run(model: str, spec: str, steps: int, precision: str = "fp32", stream_seed: int | None = None):
    """The run's parameters after ``steps`` steps with ``sim.chunk=spec`` chosen as the product
    chooses it (``choose_chunk``: a refusal is its ConfigError)."""
    c = _parts(model, precision)
    sm = copy.copy(c.model)
    sm.init_buffers(NODES)
    if stream_seed is not None:
        sm.seed = stream_seed
    x, y = _batch(c, 0)
    choose_chunk(sm, c.x0.unsqueeze(0).repeat(NODES, 1), x, y, spec, use_cache=False)
    engine = Engine(sm, c.algorithm, c.optimizer, c.comm, c.x0)
    for s in range(steps):
        engine.train_step(*_batch(c, s), 0.05)
    return engine.z.clone()


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()


def _refusal(model: str, spec: str, precision: str = "fp32") -> str:
    with pytest.raises(ConfigError) as e:
        _run(model, spec, 1, precision)
    text = str(e.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("model", ["make_feature_mask", "make_feature_mask_24", "make_weight_noise"])
def test_a_draw_without_the_batch_axis_is_each_nodes_own_in_vmap_chunks(model, precision):
    """``torch.bernoulli(torch.full((w,), 0.8))`` and ``torch.rand_like(weight)``: every node of a
    vmap chunk draws its own, as in the loop (before: one draw shared by the chunk, 2.7e-2 apart
    after one FP32 step; ``rand_like(weight)`` crashed on backward)."""
    for steps in (1, 3):
        ref = _run(model, "1", steps, precision)
        for spec in ("2", "4"):
            assert _rel(_run(model, spec, steps, precision), ref) <= BOUND, (spec, steps)
    assert _rel(_run(model, "1", 1, precision, stream_seed=7), _run(model, "1", 1, precision)) > 1e-4


def test_node_batched_layers_refuse_a_draw_without_the_batch_axis_in_one_line():
    """Node-batched layers cannot give each node its own draw of a tensor that has no batch axis:
    refused in one line naming the operator; where its length happens to equal the merged batch's
    (32 = 8 samples × 4 nodes) the training-mode comparison with the loop refuses it."""
    assert "torch.bernoulli" in _refusal("make_feature_mask_24", "layers:4")
    assert "cannot run this model" in _refusal("make_weight_noise", "layers:4")  # F.linear of stacked weights
    assert "training outputs" in _refusal("make_feature_mask", "layers:4")
    c = _parts("make_feature_mask_24")
    sm = copy.copy(c.model)
    x, y = _batch(c, 0)
    choice = choose_chunk(sm, c.x0.unsqueeze(0).repeat(NODES, 1), x, y, "auto", use_cache=False)
    assert choice.execution == "vmap" and "torch.bernoulli" in choice.layers_unsupported


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_noise_on_an_activation_that_needs_a_gradient_runs_in_every_strategy(precision):
    """``h + randn_like(h) + rand_like(h)`` with h requiring grad: vmap chunks train (before: no
    autograd formula for the draw operator, every chunk crashed) and equal the loop."""
    for steps in (1, 3):
        ref = _run("make_activation_noise", "1", steps, precision)
        for spec in ("2", "4", "layers:4"):
            assert _rel(_run("make_activation_noise", spec, steps, precision), ref) <= BOUND, (spec, steps)


@pytest.mark.parametrize("model", ["make_rrelu_sequential", "make_alpha_dropout_sequential"])
def test_random_torch_layers_in_a_plain_sequential_draw_from_the_node_streams(model):
    """``nn.RReLU`` / ``nn.AlphaDropout`` in an ``nn.Sequential`` of torch's layers: found by the
    operator they call, drawn from the nodes' streams (reseeding the global generator changes
    nothing, another stream seed does), equal to the loop on node-batched layers (and vmap chunks
    for alpha dropout); RReLU under vmap is refused in one line naming ``rrelu``."""
    torch.manual_seed(1)
    ref = _run(model, "1", 3)
    torch.manual_seed(2)
    assert torch.equal(_run(model, "1", 3), ref)
    assert _rel(_run(model, "1", 3, stream_seed=7), ref) > 1e-4
    assert _rel(_run(model, "layers:4", 3), ref) <= BOUND
    if model == "make_rrelu_sequential":
        assert "rrelu" in _refusal(model, "4")
    else:
        assert _rel(_run(model, "4", 3), ref) <= BOUND


def test_the_probe_finds_a_random_torch_layer_by_its_operator_and_drops_the_interception_otherwise():
    for model, expected in (("make_rrelu_sequential", True), ("make_plain_sequential", False)):
        c = _parts(model)
        sm = copy.copy(c.model)
        sm.may_draw = streams.may_draw(sm.module)
        assert sm.may_draw is None  # torch's layers only: decided by the first training chunk
        sm.loss_and_grad(c.x0.unsqueeze(0).repeat(NODES, 1), *_batch(c, 0))
        assert sm.may_draw is expected


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_in_place_draws_and_gumbel_softmax_are_each_nodes_own_in_every_strategy(precision):
    """``Tensor.uniform_/normal_/bernoulli_/exponential_`` on tensors with the batch axis and
    ``F.gumbel_softmax``: drawn from the nodes' streams (reseeding the global generator changes
    nothing, another stream seed does), vmap chunks and node-batched layers equal the loop."""
    model = "make_inplace_draws"
    torch.manual_seed(1)
    ref1 = _run(model, "1", 1, precision)
    torch.manual_seed(2)
    assert torch.equal(_run(model, "1", 1, precision), ref1)
    assert _rel(_run(model, "1", 1, precision, stream_seed=7), ref1) > 1e-4
    ref3 = _run(model, "1", 3, precision)
    for spec in ("2", "4", "layers:4"):
        assert _rel(_run(model, spec, 1, precision), ref1) <= BOUND, spec
        assert _rel(_run(model, spec, 3, precision), ref3) <= BOUND, spec


def test_an_in_place_draw_without_the_batch_axis_is_refused_in_one_line_off_the_loop():
    """``torch.empty(w).bernoulli_(p)``: per node in the loop; a vmap chunk cannot write c nodes'
    draws into one tensor and node-batched layers cannot attribute it — both refused in one line
    naming ``Tensor.bernoulli_``."""
    ref = _run("make_inplace_feature_mask", "1", 1)
    assert _rel(_run("make_inplace_feature_mask", "1", 1, stream_seed=7), ref) > 1e-4
    assert "Tensor.bernoulli_" in _refusal("make_inplace_feature_mask", "4")
    assert "Tensor.bernoulli_" in _refusal("make_inplace_feature_mask", "layers:4")
