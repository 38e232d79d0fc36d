"""The top-k selection (`compression.topk.top_indices`) against `torch.topk`: the same index
set on random rows, tied rows (integer values, ±0) and all-zero rows — on tied rows the
set torch.topk picks for the row (the documented tie rule) — on the C loop
(`compression.topk_kernel`), the plain path (small slots) and the two-stage CPU path alike."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from decent8 import native
from decent8.compression import topk_kernel
from decent8.compression.topk import TopKCompressor, top_indices
from decent8.layout import ParamLayout

#: (n, c): without the C loop, the reference path (n < 4096 or n < 32·c) and the two-stage
#: path (n ≥ 4096, n ≥ 32·c); the C loop takes every magnitude selection with 0 < c < n
SHAPES = [(1, 1), (2, 1), (100, 10), (100, 99), (1280, 12), (4096, 128), (4096, 40), (8192, 81), (16384, 163),
          (16384, 8192), (20001, 1)]

needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="the C loop needs a C compiler")


@pytest.fixture(params=["c_loop", "torch"])
def selection(request, monkeypatch) -> str:
    """Run a test on the C loop (where a compiler builds it) and on the torch operators."""
    if request.param == "torch":
        monkeypatch.setattr(topk_kernel, "wanted", lambda s: False)
    elif not topk_kernel.LIBRARY.available():
        pytest.skip(f"no C loop: {topk_kernel.LIBRARY.why_unavailable()}")
    return request.param


def topk_set(score: torch.Tensor, c: int) -> torch.Tensor:
    """torch.topk's positions along the last dim, sorted."""
    return torch.topk(score, c, dim=-1, sorted=False).indices.sort(-1).values


def rows(kind: str, n: int, g: torch.Generator) -> torch.Tensor:
    """``[3, 2, n]`` test rows of one kind."""
    if kind == "random":
        return torch.randn(3, 2, n, generator=g)
    if kind == "tied":                                   # few distinct values: ties at every boundary
        return torch.randint(-3, 4, (3, 2, n), generator=g).float()
    if kind == "zero":
        return torch.zeros(3, 2, n)
    if kind == "signed-zero":                            # −0 and +0 are equal scores
        return torch.where(torch.rand(3, 2, n, generator=g) < 0.5, -0.0, 0.0)
    # random rows with a zero row and a tied row among them
    x = torch.randn(3, 2, n, generator=g)
    x[1, 0] = 0.0
    x[2, 1] = torch.randint(-40, 41, (n,), generator=g).float()
    return x


@pytest.mark.parametrize("magnitude", [True, False])
@pytest.mark.parametrize("n,c", SHAPES)
def test_selection_equals_torch_topk_set_on_random_tied_and_zero_rows(n: int, c: int, magnitude: bool,
                                                                      selection: str) -> None:
    g = torch.Generator().manual_seed(n + c)
    for kind in ("random", "tied", "zero", "signed-zero", "mixed"):
        x = rows(kind, n, g)
        score = x.abs() if magnitude else x
        got = top_indices(x, c, magnitude=magnitude)
        assert got.shape == (3, 2, c)
        got = got.sort(-1).values
        assert torch.equal(got, topk_set(score, c)), kind
        assert all(row.unique().numel() == c for row in got.reshape(-1, c)), kind
        for i, j in ((0, 0), (1, 0), (2, 1)):          # a row's set is torch.topk's on that row alone
            assert torch.equal(got[i, j], topk_set(score[i, j], c)), kind


def test_selection_of_a_strided_view_equals_each_row_alone(selection: str) -> None:
    """Two slots of a wider buffer (a strided view), tied values: each row's set is
    torch.topk's on that row alone (a distributed rank selects its own row)."""
    g = torch.Generator().manual_seed(5)
    n, c = 8192, 81
    wide = torch.randint(-50, 51, (4, 2 * n + 24), generator=g).float()
    s = wide.as_strided((4, 2, n), (wide.stride(0), n + 8, 1), 8)
    got = top_indices(s, c, magnitude=True).sort(-1).values
    for i in range(4):
        for j in range(2):
            assert torch.equal(got[i, j], topk_set(s[i, j].contiguous().abs(), c))


def test_topk_compressor_on_tied_values_keeps_torch_topks_positions(selection: str) -> None:
    """The compressor's payload on integer-valued data (many ties) and an all-zero row keeps,
    per slot, the positions torch.topk picks for the slot alone, on both selection paths."""
    layout = ParamLayout([("a", (16384,)), ("b", (300,)), ("c", (8192,))])
    g = torch.Generator().manual_seed(1)
    x = torch.randint(-20, 21, (3, layout.dim), generator=g).float()
    x[1] = 0.0
    comp = TopKCompressor(layout, 0.99)
    p = comp.encode(x)
    local = p.tensors["indices"].to(torch.int64) + 32768
    for i in range(3):
        for slot, c, start in zip(layout, comp.keep, comp.kept_starts):
            want = topk_set(x[i, slot.offset:slot.end].abs(), c)
            assert torch.equal(local[i, start:start + c].sort().values, want)
    assert np.array_equal(comp.decode(p).numpy()[1], np.zeros(layout.dim, dtype=np.float32))


@needs_cc
def test_the_c_loop_takes_the_selections_of_the_runs_and_flags_exactly_the_tied_rows() -> None:
    """The C loop is what selects on a CPU (not a silent fallback), its positions ascend, and
    its tie flag marks exactly the rows whose c-th and (c+1)-th largest magnitudes are equal."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 3, 16384, generator=g)
    x[1, 2] = torch.randint(-5, 6, (16384,), generator=g).float()
    x[2, 0] = 0.0
    x[3, 1, :200] = 7.0                     # 200 equal largest magnitudes, c = 163 of them: tied
    x[0, 1, :163] = -9.0                    # exactly c equal largest: not tied
    assert topk_kernel.wanted(x)
    idx, tied = topk_kernel.top_magnitude(x, 163)
    vals = x.abs().sort(dim=2, descending=True).values
    assert torch.equal(tied, vals[..., 162] == vals[..., 163])
    assert tied.sum() == 3
    assert bool((idx.diff(dim=2) > 0).all())
    free = ~tied
    assert torch.equal(idx[free], topk_set(x.abs(), 163)[free])
    assert torch.equal(idx[0, 1], torch.arange(163))


def test_the_c_loop_is_not_used_under_a_transform_or_for_other_tensors() -> None:
    x = torch.randn(2, 1, 8192)
    assert not topk_kernel.wanted(x.double())
    assert not topk_kernel.wanted(x.transpose(1, 2))          # rows not contiguous
    seen = []
    torch.vmap(lambda r: seen.append(topk_kernel.wanted(r.unsqueeze(0))) or r)(x)
    assert seen == [False]


def test_without_a_c_compiler_torch_selects_after_one_warning(monkeypatch) -> None:
    from decent8.native import CLibrary
    monkeypatch.setattr(topk_kernel, "LIBRARY", CLibrary("top_magnitude", "", {}, lambda so: None))
    topk_kernel.LIBRARY.reset(None, "no C compiler (cc, gcc or clang) on PATH")
    monkeypatch.setattr(native, "_WARNED", set())
    x = torch.randn(3, 2, 8192, generator=torch.Generator().manual_seed(2))
    with pytest.warns(RuntimeWarning, match="no C loop .*no C compiler"):
        got = top_indices(x, 81, magnitude=True)
    assert torch.equal(got.sort(-1).values, topk_set(x.abs(), 81))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        top_indices(x, 81, magnitude=True)             # once


@needs_cc
def test_the_c_loop_split_over_threads_selects_what_one_thread_selects() -> None:
    g = torch.Generator().manual_seed(4)
    x = torch.randn(7, 2, 32768, generator=g)
    x[3, 1] = torch.randint(-2, 3, (32768,), generator=g).float()      # a tied row in one thread's share
    assert x.numel() >= topk_kernel.SPLIT_MIN
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = topk_kernel.top_magnitude(x, 327)
        torch.set_num_threads(3)
        split = topk_kernel.top_magnitude(x, 327)
        assert torch.equal(top_indices(x, 327, magnitude=True).sort(-1).values, topk_set(x.abs(), 327))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one[0], split[0]) and torch.equal(one[1], split[1])
    assert one[1].sum() == 1
