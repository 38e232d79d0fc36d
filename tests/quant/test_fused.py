"""The fused 8-bit quantizer (decent8.quant.fused) is the eager passes bit for bit: the
quantizer alone (deterministic and stochastic, one range and per-node ranges), and whole
8-bit training steps on every execution strategy (loop, vmap chunk, node-batched layers),
forward and backward. The kernel is compiled with the system compiler on the CPU (mode
``on``); ``auto`` fuses CUDA tensors only."""
from __future__ import annotations

import copy

import pytest
import torch

from decent8 import streams
from decent8.config import load_config
from decent8.models.strategies import strategy_for
from decent8.quant import fused
from decent8.quant.quantizer import fake_quantize, node_minmax, quantize_per_node
from decent8.train.build import build
from tests.helpers import run_steps

pytestmark = pytest.mark.usefixtures("one_thread")  # (conftest.py)
#: each case compiles kernels with the system compiler (~5-30 s each cold, minutes on a loaded machine)
compiles = pytest.mark.slow


@pytest.fixture
def fused_on():
    previous = fused.set_fused("on")
    yield
    fused.set_fused(previous)


def _both(fn):
    """``fn()`` with the eager passes and with the fused kernel, each after ``manual_seed(0)``."""
    out = []
    for mode in ("off", "on"):
        previous = fused.set_fused(mode)
        try:
            torch.manual_seed(0)
            out.append(fn())
            assert not fused._BROKEN and not fused._SHAPE_FAILED  # (the kernel ran; no eager fallback)
        finally:
            fused.set_fused(previous)
    return out


@compiles
@pytest.mark.parametrize("stochastic", [False, True])
@pytest.mark.parametrize("shape,node_dim", [((5, 3, 7, 7), None), ((4, 33), 0), ((6, 4, 9), 1), ((7,), None)])
def test_fused_quantizer_is_the_eager_passes_bit_for_bit(shape, node_dim, stochastic):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1)) * 3
    eager, one_kernel = _both(lambda: quantize_per_node(x, 8, stochastic, node_dim))
    assert torch.equal(eager, one_kernel)
    mn, mx = node_minmax(x, node_dim)
    q = (eager - mn) / torch.clamp_min((mx - mn) / 255, 1e-8)  # on the grid: whole codes 0..255
    assert torch.allclose(q, q.round(), atol=1e-3) and q.min() >= -1e-3 and q.max() <= 255 + 1e-3


@compiles
def test_fused_quantizer_draws_the_node_streams():
    x = torch.randn(4, 50, generator=torch.Generator().manual_seed(2))
    keys = streams.node_keys(0, range(4), 3)

    def run():
        with streams.node_streams(keys):
            return quantize_per_node(x, 8, True, 0)

    eager, one_kernel = _both(run)
    assert torch.equal(eager, one_kernel)
    again, _ = _both(run)
    assert torch.equal(again, eager)  # the streams, not the global generator


@compiles
def test_fused_quantizer_runs_one_kernel_pass(fused_on):
    from torch.profiler import ProfilerActivity, profile
    x = torch.randn(8, 16, 5, 5)
    mn, mx = torch.aminmax(x)
    fake_quantize(x, mn, mx, 8, False)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fake_quantize(x, mn, mx, 8, False)
    names = [e.key for e in prof.key_averages()]
    for eager_op in ("aten::round_", "aten::clamp_", "aten::div_", "aten::mul_"):
        assert eager_op not in names  # (the eager passes dispatch each of these)


def _steps(model: str, spec: tuple[str, int], steps: int = 1) -> torch.Tensor:
    c = build(load_config(None, ["nodes=4", "progress=false", "data.batch_size=8", "optimizer.warmup_epochs=0",
                                 f"model={model}", "precision=int8", "algorithm=choco", "compression=topk",
                                 "compression.ratio=0.9", "sim.compile=false"]))
    sm = copy.copy(c.model)
    sm.init_buffers(4)
    sm.use(strategy_for(*spec))
    return run_steps(c, sm, steps)


@compiles
@pytest.mark.parametrize("spec", [("vmap", 1), ("vmap", 4), ("layers", 4)])
def test_8bit_training_steps_with_the_fused_quantizer_are_bitwise_the_eager_ones(spec):
    eager, one_kernel = _both(lambda: _steps("mlp", spec, 2))
    assert torch.equal(eager, one_kernel)


@compiles  # the digits CNN: conv activations, max-pool, per-node ranges on 4-D tensors
def test_8bit_cnn_steps_with_the_fused_quantizer_are_bitwise_the_eager_ones():
    for spec in (("vmap", 1), ("vmap", 4)):
        eager, one_kernel = _both(lambda: _steps("cnn", spec, 2))
        assert torch.equal(eager, one_kernel)


def test_fused_mode_is_checked():
    with pytest.raises(ValueError, match="auto, on, off"):
        fused.set_fused("yes")
