"""The fused 8-bit quantizer (decent8.quant.fused) is the eager passes bit for bit: the
quantizer alone (deterministic and stochastic, one range and per-node ranges), and whole
8-bit training steps on every execution strategy (loop, vmap chunk, node-batched layers),
forward and backward, with dropout. Both backends: the CPU's C loop (mode ``on``, built with
the system C compiler in a second; what ``auto`` runs on a CPU at one thread) and the
``torch.compile`` kernel (mode ``compiled``, what a GPU runs; C++ from inductor on a CPU)."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from decent8 import native, streams
from decent8.config import load_config
from decent8.models.strategies import strategy_for
from decent8.native import CLibrary
from decent8.quant import fused
from decent8.quant.quantizer import fake_quantize, node_minmax, quantize_per_node
from decent8.train.build import build
from tests.helpers import run_steps

pytestmark = pytest.mark.usefixtures("one_thread")  # (conftest.py)
#: each case compiles kernels with the system compiler (~5-30 s each cold, minutes on a loaded machine)
compiles = pytest.mark.slow
#: the fused modes of a CPU: the C loop (fast to build) and torch.compile (slow)
MODES = [pytest.param("on", id="c_loop"), pytest.param("compiled", id="compiled", marks=compiles)]


@pytest.fixture
def fused_on():
    previous = fused.set_fused("on")
    yield
    fused.set_fused(previous)


def _both(fn, mode: str = "on"):
    """``fn()`` with the eager passes and with the fused kernel of ``mode``, each after ``manual_seed(0)``."""
    out = []
    for m in ("off", mode):
        previous = fused.set_fused(m)
        try:
            torch.manual_seed(0)
            out.append(fn())
            assert not fused._BROKEN and not fused._SHAPE_FAILED  # (the kernel ran; no eager fallback)
        finally:
            fused.set_fused(previous)
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stochastic", [False, True])
@pytest.mark.parametrize("shape,node_dim", [((5, 3, 7, 7), None), ((4, 33), 0), ((6, 4, 9), 1), ((7,), None)])
def test_fused_quantizer_is_the_eager_passes_bit_for_bit(shape, node_dim, stochastic, mode):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1)) * 3
    eager, one_kernel = _both(lambda: quantize_per_node(x, 8, stochastic, node_dim), mode)
    assert torch.equal(eager, one_kernel)
    mn, mx = node_minmax(x, node_dim)
    q = (eager - mn) / torch.clamp_min((mx - mn) / 255, 1e-8)  # on the grid: whole codes 0..255
    assert torch.allclose(q, q.round(), atol=1e-3) and q.min() >= -1e-3 and q.max() <= 255 + 1e-3


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,node_dim", [((4, 50), 0), ((3, 4, 5, 6), 1), ((1, 7, 3), 0), ((2, 6, 4), 2),
                                            ((5, 9), None)])
def test_fused_quantizer_draws_the_node_streams(shape, node_dim, mode):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(2))
    keys = streams.node_keys(0, range(1 if node_dim is None else shape[node_dim]), 3)

    def run():
        with streams.node_streams(keys):
            return quantize_per_node(x, 8, True, node_dim)

    eager, one_kernel = _both(run, mode)
    assert torch.equal(eager, one_kernel)
    again, _ = _both(run, mode)
    assert torch.equal(again, eager)  # the streams, not the global generator


@pytest.mark.parametrize("case", ["node_in_front_of_samples", "node_innermost", "other_dims_reordered"])
def test_node_stream_codes_of_a_tensor_in_another_memory_order_are_the_eager_passes(case):
    """A vmap chunk's tensor has its node dim moved to the front of a sample-major layout: the
    C loop reads each node's codes (its slice in logical order) in memory order when the other
    dims keep their order there, and draws as the eager passes do otherwise."""
    g = torch.Generator().manual_seed(8)
    if case == "node_in_front_of_samples":
        x = torch.randn(5, 4, 3, 6, generator=g).transpose(0, 1)       # [node 4, 5, 3, 6], memory [5, 4, 3, 6]
    elif case == "node_innermost":
        x = torch.randn(5, 3, 6, 4, generator=g).permute(3, 0, 1, 2)   # memory [5, 3, 6, node 4]
    else:
        x = torch.randn(6, 4, 5, generator=g).permute(1, 2, 0)         # [node 4, 5, 6], memory [6, 4, 5]
    assert not x.is_contiguous()
    keys = streams.node_keys(0, range(4), 3)
    mn, mx = node_minmax(x, 0)
    previous = fused.set_fused("on")
    try:
        assert (fused.codes_layout(x, mn, mx, 0) is None) == (case == "other_dims_reordered")
    finally:
        fused.set_fused(previous)

    def run():
        with streams.node_streams(keys):
            return fake_quantize(x, mn, mx, 8, True, node_dim=0)

    eager, c_loop = _both(run)
    assert torch.equal(eager, c_loop) and c_loop.stride() == eager.stride()


def test_the_c_loop_handles_nan_signed_zeros_and_out_of_range_values_as_the_eager_passes():
    x = torch.randn(3, 64, generator=torch.Generator().manual_seed(3))
    x[0, :4] = torch.tensor([float("nan"), -0.0, 0.0, 1e30])
    x[2, :2] = torch.tensor([-1.4e-45, 0.0])               # (x − (−0)) / s underflows to −0: clamp keeps −0
    mn, mx = torch.tensor([-1.0, 0.0, -0.0]).view(3, 1), torch.tensor([1.0, 0.0, 1000.0]).view(3, 1)  # a constant range
    for stochastic in (False, True):
        eager, c_loop = _both(lambda stochastic=stochastic: fake_quantize(x, mn, mx, 8, stochastic, node_dim=0))
        assert torch.equal(eager.view(torch.int32), c_loop.view(torch.int32))  # every bit, NaN and -0 too
        assert stochastic or torch.signbit(eager[2, 0])


@pytest.mark.parametrize("shape,node_dim", [((6, 6), 1), ((4, 4), 0), ((5, 5), None), ((3, 3, 3), 2)])
def test_square_tensors_read_their_dither_codes_in_place(shape, node_dim):
    """Codes of the global generator are laid out like the tensor, whatever its shape (a
    square tensor's codes are not one row per node)."""
    x = torch.randn(shape, generator=torch.Generator().manual_seed(4)) * 3
    if node_dim is None:
        mn, mx = torch.aminmax(x)
    else:
        dims = tuple(d for d in range(x.dim()) if d != node_dim)
        mn, mx = x.amin(dim=dims, keepdim=True), x.amax(dim=dims, keepdim=True)
    eager, c_loop = _both(lambda: fake_quantize(x, mn, mx, 8, True, node_dim=node_dim))
    assert torch.equal(eager, c_loop)


def test_ranges_the_kernels_do_not_assume_run_the_eager_passes():
    x = torch.randn(3, 4, 4, generator=torch.Generator().manual_seed(5))
    across = (x.amin(dim=(0, 1)), x.amax(dim=(0, 1)))           # 4 values along the last dim, not node_dim 1
    assert not fused.ranges_fit(x, *across, 1)
    assert fused.ranges_fit(x, x.amin(dim=(0, 2), keepdim=True), x.amax(dim=(0, 2), keepdim=True), 1)
    assert not fused.ranges_fit(torch.randn(7), torch.zeros(1, 1), torch.ones(1, 1), None)  # more dims than x
    for stochastic in (False, True):
        eager, fused_mode = _both(lambda stochastic=stochastic: fake_quantize(x, *across, 8, stochastic, node_dim=1))
        assert torch.equal(eager, fused_mode)


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


def _steps(model: str, spec: tuple[str, int], steps: int = 1, extra: tuple[str, ...] = ()) -> torch.Tensor:
    c = build(load_config(None, ["nodes=4", "progress=false", "data.batch_size=8", "optimizer.warmup_epochs=0",
                                 f"model={model}", "precision=int8", "algorithm=choco", "compression=topk",
                                 "compression.ratio=0.9", "sim.compile=false", *extra]))
    sm = copy.copy(c.model)
    sm.init_buffers(4)
    sm.use(strategy_for(*spec))
    return run_steps(c, sm, steps)


SPECS = [("vmap", 1), ("vmap", 4), ("layers", 4)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("spec", SPECS)
def test_8bit_training_steps_with_the_fused_quantizer_are_bitwise_the_eager_ones(spec, mode):
    eager, one_kernel = _both(lambda: _steps("mlp", spec, 2), mode)
    assert torch.equal(eager, one_kernel)


@pytest.mark.parametrize("user_loss", [False, True], ids=["builtin_loss", "user_loss"])
@pytest.mark.parametrize("spec", SPECS)
def test_8bit_steps_of_a_model_with_dropout_in_the_c_loop_are_bitwise_the_eager_ones(spec, user_loss):
    extra = ("loss=tests.equivalence_models:smoothed_cross_entropy",) if user_loss else ()
    eager, c_loop = _both(lambda: _steps("tests.equivalence_models:make_plain_drop", spec, 2, extra))
    assert torch.equal(eager, c_loop)


@pytest.mark.parametrize("mode", MODES)  # the digits CNN: conv activations, max-pool, per-node ranges on 4-D tensors
def test_8bit_cnn_steps_with_the_fused_quantizer_are_bitwise_the_eager_ones(mode):
    for spec in (("vmap", 1), ("vmap", 4)):
        eager, one_kernel = _both(lambda: _steps("cnn", spec, 2), mode)
        assert torch.equal(eager, one_kernel)


def test_auto_runs_the_c_loop_on_a_cpu_at_one_thread_only():
    x = torch.randn(8, 16)
    previous, threads = fused.set_fused("auto"), torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert fused.wanted(x) and fused.takes_codes(x, x.amin(), x.amax(), None)
        torch.set_num_threads(2)
        assert not fused.wanted(x) and not fused.takes_codes(x, x.amin(), x.amax(), None)
        assert not fused.wanted(x.double())  # float32 only
    finally:
        torch.set_num_threads(threads)
        fused.set_fused(previous)


def test_without_a_c_compiler_the_eager_passes_run_with_one_warning(monkeypatch):
    monkeypatch.setattr(fused.cpu_kernel, "LIBRARY", CLibrary("fake_quantize", "", {}, lambda so: None))
    fused.cpu_kernel.LIBRARY.reset(None, "no C compiler (cc, gcc or clang) on PATH")
    monkeypatch.setattr(native, "_WARNED", set())
    previous = fused.set_fused("on")
    try:
        x = torch.randn(4, 9)
        mn, mx = torch.aminmax(x)
        with pytest.warns(RuntimeWarning, match="no C loop .*no C compiler"):
            assert not fused.takes_codes(x, mn, mx, None)
        fused.set_fused("off")
        torch.manual_seed(0)
        eager = fake_quantize(x, mn, mx, 8, True)
        fused.set_fused("auto")
        torch.manual_seed(0)
        assert torch.equal(fake_quantize(x, mn, mx, 8, True), eager)
    finally:
        fused.set_fused(previous)


def test_fused_mode_is_checked():
    with pytest.raises(ValueError, match="auto, on, compiled, off"):
        fused.set_fused("yes")


def test_the_c_loop_is_built_in_the_users_cache_and_not_loaded_from_a_folder_others_may_write(tmp_path,
                                                                                            monkeypatch):
    from decent8.quant import cpu_kernel
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    lib = CLibrary("fake_quantize", cpu_kernel.LIBRARY.source, cpu_kernel.LIBRARY.functions, cpu_kernel.LIBRARY.probe)
    assert lib.available()
    built = Path(lib.lib._name)
    assert built.parent == tmp_path / "decent8" / "kernels"
    built.parent.chmod(0o777)                              # anyone may now replace the library
    lib.reset()
    assert lib.available()
    assert not Path(lib.lib._name).is_relative_to(tmp_path)  # built afresh in a private folder


@pytest.mark.parametrize("shape,node_dim", [((6, 6), 1), ((6, 6), -1), ((2, 6, 4), 2), ((3, 5), 0), ((4, 2, 3), -2)])
def test_node_ranges_are_the_min_and_max_of_each_nodes_slice(shape, node_dim):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(6))
    mn, mx = node_minmax(x, node_dim)
    d = node_dim % x.dim()
    dims = tuple(i for i in range(x.dim()) if i != d)
    assert torch.equal(mn, x.amin(dim=dims, keepdim=True)) and torch.equal(mx, x.amax(dim=dims, keepdim=True))



@pytest.mark.parametrize("case", ["contiguous", "node_in_front_of_samples", "whole_tensor", "long_rows"])
def test_the_c_loops_range_is_node_minmax(case, fused_on):
    """One pass of the C loop gives node_minmax's ranges, shapes included, in any dense memory
    order; a NaN leaves the range to torch (its NaN)."""
    g = torch.Generator().manual_seed(9)
    node_dim = 0
    if case == "contiguous":
        x = torch.randn(4, 3, 5, generator=g)
    elif case == "node_in_front_of_samples":
        x = torch.randn(5, 4, 3, 6, generator=g).transpose(0, 1)
    elif case == "whole_tensor":
        x, node_dim = torch.randn(7, 9, generator=g), None
    else:
        x = torch.randn(3, 1000, generator=g) * 1e30           # the vector part and the tail
        x[1, 999], x[2, 0] = 3e38, -3e38
    got = fused.node_range(x, node_dim)
    want = node_minmax(x, node_dim)
    assert got is not None
    for a, b in zip(got, want):
        assert a.shape == b.shape and torch.equal(a, b)
    x = x.clone()
    x[(1,) + (2,) * (x.dim() - 1)] = float("nan")
    assert fused.node_range(x, node_dim) is None


@pytest.mark.parametrize("mode", ["off", "on"], ids=["eager_passes", "c_loop"])
@pytest.mark.parametrize("stochastic", [False, True])
def test_q_b_does_not_depend_on_which_zero_a_range_reports(stochastic, mode):
    """The C loop's range may report −0 where torch.amin reports +0 (or the reverse) for a range
    of zeros; Q_b's result is the same bits either way."""
    x = torch.tensor([[-0.0, 0.0, 0.0, 1.5], [0.0, -0.0, -0.0, -2.0], [-0.0, 0.0, -0.0, 0.0]])
    outs = []
    for sign in (1.0, -1.0):
        zero = torch.tensor(sign * 0.0)
        mn = torch.stack([zero, torch.tensor(-2.0), zero]).view(3, 1)
        mx = torch.stack([torch.tensor(1.5), zero, zero]).view(3, 1)
        previous = fused.set_fused(mode)
        try:
            torch.manual_seed(0)
            outs.append(fake_quantize(x, mn, mx, 8, stochastic, node_dim=0))
        finally:
            fused.set_fused(previous)
    assert torch.equal(outs[0].view(torch.int32), outs[1].view(torch.int32))


def test_8bit_steps_reading_codes_in_memory_order_are_the_eager_passes_with_dropout_and_a_user_loss(monkeypatch):
    """A two-convolution model with dropout and a user-defined loss on a vmap chunk: its second
    convolution's tensors take the codes-in-memory-order path of the C loop, and the two 8-bit
    steps are bitwise the eager passes' (which draw the same codes as floats)."""
    taken = []
    real = fused.codes_layout

    def spy(x, mn, mx, node_dim):
        got = real(x, mn, mx, node_dim)
        taken.append(got is not None and got[0] is not x)
        return got

    monkeypatch.setattr(fused, "codes_layout", spy)
    extra = ("loss=tests.equivalence_models:smoothed_cross_entropy",)
    eager, c_loop = _both(lambda: _steps("tests.equivalence_models:make_two_conv_drop", ("vmap", 4), 2, extra))
    assert any(taken)                       # the permuted path ran
    assert torch.equal(eager, c_loop)
