"""The top-k selection (`compression.topk.top_indices`) against `torch.topk`: the same index
set on random rows, tied rows (integer values, ±0) and all-zero rows — on tied rows the
set torch.topk picks for the row (the documented tie rule) — on the plain path (small
slots) and the two-stage CPU path alike."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from decent8.compression.topk import TopKCompressor, top_indices
from decent8.layout import ParamLayout

#: (n, c): reference path (n < 4096 or n < 32·c) and two-stage path (n ≥ 4096, n ≥ 32·c)
SHAPES = [(100, 10), (100, 99), (1280, 12), (4096, 128), (4096, 40), (8192, 81), (16384, 163)]


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
def test_selection_equals_torch_topk_set_on_random_tied_and_zero_rows(n: int, c: int, magnitude: bool) -> None:
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


def test_selection_of_a_strided_view_equals_each_row_alone() -> None:
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


def test_topk_compressor_on_tied_values_keeps_torch_topks_positions() -> None:
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
